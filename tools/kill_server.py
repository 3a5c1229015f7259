"""kill_server: stop a server of this run - or all of them - and prove it is gone."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult, host_for
from tools.hosts import HostError
from tools.servers.lifecycle import KillReport, kill_server
from tools.servers.profiles import ENGINES, Engine, ProfileError, engine_for


class KillServerInput(ToolInput):
    name: str | None = Field(
        default=None, description="The server to kill; omitted: every server of this run"
    )


async def kill_recorded(ctx: ToolContext, record: dict[str, Any], reason: str) -> KillReport:
    """Kill the server a `server_started` record describes and log `server_killed`."""
    engine = _engine(ctx, record)
    host = host_for(ctx, record.get("host"))
    try:
        report = await kill_server(host, engine, record, ctx.config.server.kill_timeout_s)
    except HostError as err:
        raise ToolError(f"killing server {record['name']}: {err}") from None
    ctx.run.append(
        "server_killed",
        name=record["name"],
        killed=report.killed,
        verified=report.verified,
        foreign=report.foreign,
        seconds=round(report.seconds, 2),
        reason=reason,
    )
    return report


def _engine(ctx: ToolContext, record: dict[str, Any]) -> Engine:
    """The profile the server was started with: the run's own, else the built-in of its name."""
    try:
        engine = engine_for(ctx.config)
    except ProfileError:  # a profile file broken since: the built-in of that name still knows
        engine = ENGINES["openai"]
    if engine.name == record.get("engine"):
        return engine
    return ENGINES.get(str(record.get("engine")), engine)


class KillServer(Tool):
    name = "kill_server"
    Input = KillServerInput

    async def run(self, ctx: ToolContext, inp: KillServerInput) -> ToolResult:
        servers = ctx.run.state.servers
        if inp.name is None:
            records = list(servers.values())
            if not records:
                return ToolResult(text="no server of this run is running", data={"killed": []})
        elif inp.name in servers:
            records = [servers[inp.name]]
        else:
            ended = ctx.run.state.launched.get(inp.name)
            if ended is None:
                known = ", ".join(sorted(servers)) or "none running"
                raise ToolError(f"no server named {inp.name!r} in this run (servers: {known})")
            records = [ended]  # already failed or killed: still make sure nothing is left
        reports = [await kill_recorded(ctx, r, "kill_server") for r in records]
        ok = all(r.ok for r in reports)
        text = "\n".join(r.summary() for r in reports)
        if not ok:
            text += (
                "\nNOT everything could be verified as gone: check with bash (ps, ss, nvidia-smi)"
            )
        return ToolResult(
            text=text,
            is_error=not ok,
            data={
                "servers": [
                    {
                        "name": r.name,
                        "killed": r.killed,
                        "verified": r.verified,
                        "foreign": r.foreign,
                    }
                    for r in reports
                ]
            },
        )
