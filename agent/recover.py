"""What `agent resume` does before the loop goes on after a crash (a SIGKILL, an OOM kill, a power
cut of the controller): the run's servers outlived the agent, and its last turn may have been cut
in the middle.

0. A kill right after `run_started` left no briefing: it is written again.
1. Every tool call of the last turn that has no result gets one: an is_error that says the call
   was interrupted and may have run in part (the model API refuses a tool_use without a result,
   and the model must not believe a half-done call finished).
2. Every server the fold still counts as running is looked at on its host: its process group
   alive, holding its port, and /health answering 200 -> `server_adopted` (the run goes on with
   it); otherwise it is killed with kill_server's machinery -> `server_killed` (reason says why).
"""

from __future__ import annotations

from typing import Any

import httpx

from state.run import Run
from tools.base import INTERRUPTED, ToolContext, ToolError, host_for
from tools.hosts import Host, HostError
from tools.kill_server import kill_recorded
from tools.servers.profiles import ENGINES, engine_for

HEALTH_TIMEOUT_S = 5.0


def close_dangling_calls(run: Run) -> list[str]:
    """Answer the last turn's unanswered tool calls; the ids answered."""
    messages = run.state.messages
    assistant = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if not assistant:
        return []
    last = assistant[-1]
    answered = {
        b.get("tool_use_id")
        for m in messages[last + 1 :]
        for b in m["content"]
        if b.get("type") == "tool_result"
    }
    closed = []
    for block in messages[last]["content"]:
        if block.get("type") == "tool_use" and block["id"] not in answered:
            run.append(
                "tool_result",
                id=block["id"],
                name=block["name"],
                text=INTERRUPTED.format(name=block["name"]),
                is_error=True,
                data={"interrupted": True},
                duration_s=0.0,
            )
            closed.append(block["id"])
    return closed


async def recover_servers(ctx: ToolContext) -> list[str]:
    """Adopt or kill each server the run had running; one line per server, for the terminal."""
    lines = []
    for record in list(ctx.run.state.servers.values()):
        name = record["name"]
        try:
            host = host_for(ctx, record.get("host"))
            why = await _unfit(host, record, ctx)
        except (ToolError, HostError) as err:
            lines.append(f"server {name}: cannot check it on its host ({err}); left as recorded")
            continue
        if why is None:
            ctx.run.append(
                "server_adopted",
                name=name,
                host=host.name,
                pid=record["pid"],
                pgid=record.get("pgid") or record["pid"],
                port=record["port"],
            )
            lines.append(f"server {name}: still serving on {host.name}:{record['port']}, adopted")
            continue
        try:
            report = await kill_recorded(ctx, record, f"found on resume: {why}")
            lines.append(f"server {name}: {why}; {report.summary()}")
        except ToolError as err:
            lines.append(f"server {name}: {why}; could not kill it: {err}")
    return lines


async def _unfit(host: Host, record: dict[str, Any], ctx: ToolContext) -> str | None:
    """Why the recorded server cannot be adopted, or None when it can."""
    pgid, port = int(record.get("pgid") or record["pid"]), int(record["port"])
    members = {p.pid for p in await host.processes() if p.pgid == pgid}
    if not members:
        return "its processes are gone"
    holders = await host.port_holders(port)
    if holders and not set(holders) & members:
        return f"port {port} is held by another process ({', '.join(map(str, holders))})"
    engine = ENGINES.get(str(record.get("engine")), engine_for(ctx.config))
    local_port = await host.forward_port(port)
    url = f"http://127.0.0.1:{local_port}{engine.health_path}"
    try:
        async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT_S, trust_env=False) as client:
            status = (await client.get(url)).status_code
    except httpx.HTTPError as err:
        return f"alive but not answering {engine.health_path} ({type(err).__name__})"
    if status != 200:
        return f"alive but {engine.health_path} says {status} (still loading, or broken)"
    return None


def restore_briefing(ctx: ToolContext) -> bool:
    """A kill right after `run_started` leaves no first message: write the briefing again."""
    if ctx.run.state.messages:
        return False
    from agent.briefing import briefing

    state = ctx.run.state
    told = None if state.brain == "autopilot" or not state.limits else state.limits
    text = briefing(state.goal, ctx.config, told)
    ctx.run.append("message", role="user", content=[{"type": "text", "text": text}])
    return True


async def recover(ctx: ToolContext) -> list[str]:
    """The steps, in order; the lines to show."""
    lines = ["wrote the briefing that a crash cut off"] if restore_briefing(ctx) else []
    closed = close_dangling_calls(ctx.run)
    lines += [f"answered {len(closed)} interrupted tool call(s)"] if closed else []
    return lines + await recover_servers(ctx)
