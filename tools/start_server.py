"""start_server: the configured command plus the model's flags, launched detached, watched until
it serves a completion or fails - with a one-line diagnosis when it fails."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from state.secrets import UnresolvedSecret, resolve
from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult, host_for
from tools.hosts import Host, HostError
from tools.kill_server import kill_recorded
from tools.log_paths import check_name, log_path
from tools.servers.command import build_command, refuse_public_bind
from tools.servers.lifecycle import gpu_holders, kill_server, launch, ownership
from tools.servers.probe import probe
from tools.servers.profiles import Engine, ProfileError, engine_for
from tools.servers.readiness import StartFailure, Watch, wait_ready

MOST_READY_S = 6 * 3600  # a model load longer than this is not a slow start


class StartServerInput(ToolInput):
    name: str | None = Field(
        default=None, description="A name for this server within the run; default: server.name"
    )
    flags: dict[str, Any] = Field(
        default={},
        description='Flags added to the configured command: {"--flag": value}; true = the switch '
        "alone, false = omitted, anything else = --flag value",
    )
    host: str | None = Field(default=None, description="Host name; default: the server's host")
    port: int | None = Field(default=None, ge=1, le=65535, description="default: the config's")
    ready_timeout_s: float | None = Field(
        default=None,
        gt=0,
        le=MOST_READY_S,
        description="How long to wait for ready this time (default: the config's "
        "server.ready_timeout_s): more for a start that was still loading when the wait ended",
    )


class StartServer(Tool):
    name = "start_server"
    Input = StartServerInput

    async def run(self, ctx: ToolContext, inp: StartServerInput) -> ToolResult:
        cfg = ctx.config.server
        name = check_name("server", inp.name or cfg.name)
        try:
            engine = engine_for(ctx.config)
        except ProfileError as err:
            raise ToolError(str(err)) from None
        host = host_for(ctx, inp.host or cfg.host)
        port = inp.port or cfg.port
        try:  # a resumed run's config holds `NAME=[redacted]`: the value comes from the env
            base = resolve(cfg.command)
        except UnresolvedSecret as err:
            raise ToolError(str(err)) from None
        command = build_command(base, inp.flags, engine, port)
        refuse_public_bind(command, cfg.allow_public_bind)
        try:
            facts = await probe(host, engine, base)
        except HostError as err:
            raise ToolError(str(err)) from None
        refused = facts.check(inp.flags) if facts.check is not None else None
        if refused:
            return self._refused(ctx, name, inp.flags, command, refused)
        try:
            notes = await self._clear_the_way(ctx, host, engine, name, port, command)
            log = await log_path(ctx, host, "server", name)
            # recorded even when SIGTERM cancels the call mid-launch: the run's end kills it
            pid = await launch(
                host,
                command,
                log,
                lambda pid: ctx.run.append(
                    "server_started",
                    name=name,
                    host=host.name,
                    engine=engine.name,
                    engine_version=facts.version,
                    pid=pid,
                    pgid=pid,
                    port=port,
                    command=command,
                    flags=inp.flags,
                    log=log,
                ),
            )
        except HostError as err:
            raise ToolError(str(err)) from None
        watch = Watch(
            host,
            engine,
            pid,
            log,
            port,
            inp.ready_timeout_s or cfg.ready_timeout_s,
            model=cfg.model,
            on_progress=_progress(ctx, name),
        )
        try:
            ready = await wait_ready(watch)
        except (StartFailure, HostError) as err:
            return await self._failed(ctx, host, engine, name, pid, port, command, log, err)
        procs = await host.processes()
        record = {"pid": pid, "pgid": pid, "port": port}
        workers = [
            {"pid": p.pid, "args": p.args}
            for p in ownership(procs, record).values()
            if p.pid != pid
        ]
        ctx.run.append(
            "server_ready",
            name=name,
            seconds=round(ready.seconds, 2),
            workers=workers,
            model=ready.model,
            ready_line=ready.ready_line,
        )
        shown = ctx.run.scrub(command)  # a secret resolved from the environment stays unsaid
        text = (
            f"server {name} ready on {host.name}:{port} after {ready.seconds:.1f} s "
            f"(pid {pid}, model {ready.model}, {engine.name} {facts.version}, a test completion "
            f"took {ready.completion_s:.2f} s); log {log}\ncommand: {shown}"
        )
        if notes:
            text += "\n" + "\n".join(notes)
        return ToolResult(
            text=text,
            data={
                "name": name,
                "host": host.name,
                "port": port,
                "pid": pid,
                "log": log,
                "seconds": round(ready.seconds, 2),
                "model": ready.model,
                "command": shown,
                "engine": engine.name,
                "engine_version": facts.version,
            },
        )

    def _refused(
        self, ctx: ToolContext, name: str, flags: dict[str, Any], command: str, why: str
    ) -> ToolResult:
        """The engine's own flag check refused the command line: nothing is launched."""
        diagnosis = f"refused before launch: {why}"
        ctx.run.append(
            "server_failed",
            name=name,
            diagnosis=diagnosis,
            log_excerpt="",
            seconds=0.0,
            cleanup="nothing was launched",
            flags=flags,
            command=command,
        )
        return ToolResult(
            text=f"server {name} not started: {diagnosis}\ncommand: {ctx.run.scrub(command)}",
            is_error=True,
            data={"name": name, "diagnosis": diagnosis, "log": None, "seconds": 0.0},
        )

    async def _clear_the_way(
        self, ctx: ToolContext, host: Host, engine: Engine, name: str, port: int, command: str
    ) -> list[str]:
        """Pre-checks: our own servers on that name or port go; a stranger on the port stops us;
        GPU memory held by others is worth a warning."""
        notes = []
        for other in list(ctx.run.state.servers.values()):
            same_port = other.get("host") == host.name and int(other["port"]) == port
            if other["name"] == name or same_port:
                report = await kill_recorded(ctx, other, f"replaced by start_server {name}")
                notes.append(f"first stopped the running {report.summary()}")
        if await host.port_in_use(port):
            procs = {p.pid: p for p in await host.processes()}
            holders = [
                f"pid {q} ({procs[q].args[:60]})" if q in procs else f"pid {q}"
                for q in await host.port_holders(port)
            ]
            who = ", ".join(holders) or "a process this user cannot see"
            raise ToolError(
                f"port {port} on host {host.name} is in use by {who}, not by a server of this "
                "run; stop it (bash) if it is a leftover, or start on another port",
                data={"name": name, "port_busy": port},
            )
        held = await gpu_holders(host, engine, command)
        if held:
            procs = {p.pid: p for p in await host.processes()}
            who = ", ".join(
                sorted(
                    {
                        f"pid {h['pid']} ({procs[h['pid']].args[:40]})"
                        if h["pid"] in procs
                        else f"pid {h['pid']}"
                        for h in held
                    }
                )
            )
            notes.append(
                f"warning: GPU memory is held by processes of no server of this run: {who}"
            )
        return notes

    async def _failed(
        self,
        ctx: ToolContext,
        host: Host,
        engine: Engine,
        name: str,
        pid: int,
        port: int,
        command: str,
        log: str,
        err: Exception,
    ) -> ToolResult:
        busy: dict[str, int] = {}
        if isinstance(err, StartFailure):
            diagnosis, excerpt, seconds = err.diagnosis.text, err.diagnosis.excerpt, err.seconds
            busy = {"port_busy": port} if err.diagnosis.cause == "port_busy" else {}
        else:
            diagnosis, excerpt, seconds = f"lost the host while waiting: {err}", "", 0.0
        record = {"name": name, "pid": pid, "pgid": pid, "port": port, "command": command}
        try:  # a failed start must not leave workers holding the port or the GPU
            report = await kill_server(host, engine, record, ctx.config.server.kill_timeout_s)
            cleanup = report.summary()
        except HostError as exc:
            cleanup = f"could not clean up: {exc}"
        ctx.run.append(
            "server_failed",
            name=name,
            diagnosis=diagnosis,
            log_excerpt=excerpt,
            seconds=round(seconds, 2),
            cleanup=cleanup,
        )
        text = (
            f"server {name} failed to start after {seconds:.1f} s: {diagnosis}\n"
            f"log {log}; the relevant lines:\n{excerpt}\n(cleanup: {cleanup})"
        )
        return ToolResult(
            text=text,
            is_error=True,
            data={
                "name": name,
                "diagnosis": diagnosis,
                "log": log,
                "seconds": round(seconds, 2),
                **busy,
            },
        )


def _progress(ctx: ToolContext, name: str) -> Any:
    progress = ctx.progress
    if progress is None:
        return None

    def report(fraction: float | None, line: str) -> None:
        progress("server_load", name=name, fraction=fraction, line=line)

    return report
