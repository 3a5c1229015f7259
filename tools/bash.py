"""bash: a shell command on a named host, bounded in time and in what comes back.

What runs is decided by tools.guard.decide: allowed outright, run in the host's sandbox
(tools/hosts/sandbox.py), or refused with one line naming the rule that would allow it.
"""

from __future__ import annotations

from pydantic import Field

from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult, host_for
from tools.guarded import guarded, refusal
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
                f"workdir and the run's outputs/ and logs/, /tmp is private, secrets and "
                f"processes outside are not visible{_NO_NET if not decision.network else ''}; "
                f"to run it outside, the supervisor can "
                f"`agent allow {ctx.run.path.name} {decision.rule!r}`"
            )
        text = head + ("\n" + shown if shown.strip() else "\n(no output)")
        return ToolResult(text=text.rstrip("\n"), is_error=res.timed_out, data=data)


# a sandboxed line that names no network has a namespace of its own (tools/guard/network.py)
_NO_NET = (
    ", and it had no network (its own loopback only: name the URL or host:port it needs on the "
    "line, e.g. an argument http://127.0.0.1:PORT, and it gets the host's)"
)


async def _describe(host: Host, pids: list[int]) -> str:
    try:
        procs = {p.pid: p for p in await host.processes()}
    except HostError:
        procs = {}
    shown = [f"pid {p} ({procs[p].args[:60]})" if p in procs else f"pid {p}" for p in pids[:10]]
    return ", ".join(shown) + (f" and {len(pids) - 10} more" if len(pids) > 10 else "")
