"""What the model's shell commands may do, decided once for bash and start_job: the config's and
the supervisor's rules, the run's own pids and ports, the host's sandbox (tools.guard.decide,
tools/hosts/sandbox.py) - and the command line that then runs: as it is, in the sandbox, or not at
all (the refusal names the rule that would allow it)."""

from __future__ import annotations

import os
import posixpath
from typing import Any

from tools.base import ToolContext, ToolError
from tools.guard import Context, Decision, RuleError, Rules, decide, paths
from tools.hosts import Host

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
        listdir=_listdir if host.is_local else None,
        public_bind=ctx.config.server.allow_public_bind,
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


def _listdir(path: str) -> list[str] | None:
    """A folder's entries on this machine (does the workdir shadow `python -m X`?)."""
    try:
        return os.listdir(path)
    except OSError:
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
