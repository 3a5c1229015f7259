"""bash: a shell command on a named host, bounded in time and in what comes back.

What runs is decided by tools.guard.decide: allowed outright, run in the host's sandbox
(tools/hosts/sandbox.py), or refused with one line naming the rule that would allow it.
"""

from __future__ import annotations

import os
import posixpath
from typing import Any

from pydantic import Field

from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult, host_for
from tools.guard import Context, Decision, RuleError, Rules, decide, paths
from tools.hosts import Host, HostError
from tools.hosts.output import clean, cut, save_full

OUTPUT_LIMIT = 12_000  # characters the model sees; the full text goes to outputs/


class BashInput(ToolInput):
    command: str = Field(description="The bash command line to run (in the host's workdir)")
    host: str | None = Field(
        default=None, description="Host name from the config; default: the server's host"
    )
    timeout_s: float = Field(
        default=120,
        gt=0,
        le=1800,
        description="Seconds before the command and everything it started are killed (max 1800)",
    )


class Bash(Tool):
    name = "bash"
    Input = BashInput

    async def run(self, ctx: ToolContext, inp: BashInput) -> ToolResult:
        if not inp.command.strip():
            raise ToolError("empty command")
        host = host_for(ctx, inp.host)
        try:
            decision, command = await guarded(ctx, host, inp.command)
        except HostError as err:
            raise ToolError(str(err)) from None
        verdict = {"action": decision.action, "reason": decision.reason, "rule": decision.rule}
        if decision.action == "refuse":
            return ToolResult(text=refusal(ctx, decision), is_error=True, data={"guard": verdict})
        try:
            res = await host.run(command, timeout=inp.timeout_s)
        except HostError as err:
            raise ToolError(str(err)) from None
        out, err_text = clean(res.stdout), clean(res.stderr)
        body = out + (
            ("" if not out or out.endswith("\n") else "\n") + "[stderr]\n" + err_text
            if err_text
            else ""
        )
        if res.timed_out and res.survivors:
            head = (
                f"timed out after {inp.timeout_s:g} s on {host.name}: the command's process group "
                f"was killed, but what it moved into a session of its own (setsid) still runs: "
                f"{await _describe(host, res.survivors)}; kill them with bash if unwanted"
            )
        elif res.timed_out:
            head = (
                f"timed out after {inp.timeout_s:g} s on {host.name}: the command and "
                f"everything it started were killed"
            )
        else:
            head = f"exit {res.exit_code} in {res.duration:.1f} s on {host.name}"
        shown, was_cut = cut(body, OUTPUT_LIMIT)
        data: dict[str, object] = {
            "exit_code": res.exit_code,
            "duration_s": round(res.duration, 3),
            "timed_out": res.timed_out,
            "host": host.name,
        }
        if decision.action != "allow" or decision.rule:
            data["guard"] = verdict
        if res.survivors:
            data["survivors"] = res.survivors
        if was_cut or res.dropped:
            path = save_full(ctx, "bash", body)
            data["output_path"] = path
            head += f"; output cut, full text: {path}"
            if res.dropped:
                head += f" ({res.dropped} bytes beyond the capture limit were dropped)"
        if decision.action == "sandbox":  # after where the output is: the line may be cut there
            head += (
                f"; ran in the sandbox ({decision.reason}): the root is read-only beyond the "
                f"workdir and the run folder, /tmp is private, processes outside are not "
                f"visible; to run it outside, the supervisor can `agent allow "
                f"{ctx.run.path.name} {decision.rule!r}`"
            )
        text = head + ("\n" + shown if shown.strip() else "\n(no output)")
        return ToolResult(text=text.rstrip("\n"), is_error=res.timed_out, data=data)


async def _describe(host: Host, pids: list[int]) -> str:
    try:
        procs = {p.pid: p for p in await host.processes()}
    except HostError:
        procs = {}
    shown = [f"pid {p} ({procs[p].args[:60]})" if p in procs else f"pid {p}" for p in pids[:10]]
    return ", ".join(shown) + (f" and {len(pids) - 10} more" if len(pids) > 10 else "")


# files of the run folder a sandboxed command may not change (nothing a run wrote is lost)
RUN_READ_ONLY = ("events.jsonl", "todos.json", "config.toml", "results", "run.lock")


def rules_of(ctx: ToolContext) -> Rules:
    """The config's [guard] rules, then the supervisor's (`agent allow`, folded from the log)."""
    guard = ctx.config.guard
    extra = list(getattr(ctx.run.state, "guard_allow", []) or [])
    try:
        return Rules.parse(guard.allow, guard.deny).with_allow(extra)
    except RuleError as err:  # the config validated its own; a bad `agent allow` is refused there
        raise ToolError(f"a [guard] rule is invalid: {err}") from None


async def guarded(ctx: ToolContext, host: Host, command: str) -> tuple[Decision, str]:
    """The decision on `command` for this host, and the command line to run (in the sandbox
    when the decision says so)."""
    sandbox = await host.sandbox() if ctx.config.guard.sandbox else None
    workdir = await host.workdir()
    run_dir = str(ctx.run.path.resolve()) if host.is_local else None
    context = Context(
        workdir=workdir,
        run_dir=run_dir,
        home=os.path.expanduser("~") if host.is_local else await host.home(),
        pids=frozenset(_recorded(ctx, "pid") | _recorded(ctx, "pgid")),
        ports=frozenset(_recorded(ctx, "port")),
        read=_read_script if host.is_local else None,
    )
    decision = decide(command, rules_of(ctx), sandbox is not None, context)
    if decision.action == "allow" and decision.writes and not decision.rule:
        escape = await _escapes(host, context, list(decision.writes))
        if escape:
            why = f"{escape} leads out of the workdir and the run folder (a symlink)"
            if sandbox is None:
                why += "; this host has no sandbox to run it in"
            decision = Decision("sandbox" if sandbox else "refuse", why, decision.rule)
    if decision.action != "sandbox" or sandbox is None:
        return decision, command
    writable = [workdir] + ([run_dir] if run_dir else [])
    readonly = [f"{run_dir}/{name}" for name in RUN_READ_ONLY] if run_dir else []
    hide = [h.identity_file for h in ctx.config.hosts if h.identity_file] if host.is_local else []
    hide += [f"{k}.pub" for k in hide]
    return decision, sandbox.wrap(command, workdir, writable, readonly, hide)


def refusal(ctx: ToolContext, decision: Decision) -> str:
    allow = (
        f"; if it is really intended, the supervisor can allow it: `agent allow "
        f"{ctx.run.path.name} {decision.rule!r}` (or [guard] allow in agent.toml)"
        if decision.rule
        else ""
    )
    return f"refused by the destructive-command guard: {decision.reason}{allow}"


def _recorded(ctx: ToolContext, key: str) -> set[int]:
    """Pids, groups or ports of what the run started (servers, jobs), running or ended."""
    state = ctx.run.state
    records: list[dict[str, Any]] = [
        *state.servers.values(),
        *state.launched.values(),
        *state.jobs.values(),
    ]
    return {int(r[key]) for r in records if isinstance(r.get(key), int) and r[key] > 1}


def _read_script(path: str) -> str | None:
    """A script's text on this machine (at most 1 MB, regular files only)."""
    try:
        if os.path.isfile(path) and os.path.getsize(path) <= 1_000_000:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
    except OSError:
        return None
    return None


async def _escapes(host: Host, context: Context, writes: list[str]) -> str | None:
    """The first path written that a symlink takes out of the writable folders, or None."""
    wanted: list[str] = []
    for path in writes:
        full = context.absolute(path)
        if full is None or full.startswith("/dev/"):
            continue
        cut_at = paths.GLOB.search(full)
        wanted.append(posixpath.dirname(full[: cut_at.start()]) if cut_at else full)
    if not wanted:
        return None
    real = await host.realpaths(wanted)
    roots = [r for r in (await host.realpaths(context.roots())) if r]
    for path, target in zip(wanted, real, strict=False):
        if not any(target == r or target.startswith(r.rstrip("/") + "/") for r in roots):
            return path
    return None
