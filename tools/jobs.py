"""start_job / job_status / stop_job: long batch work that is not a server (data generation,
training). Detached in its own session, logged, found again after the agent restarts (the events
say where it runs), its exit status kept in a file next to its log."""

from __future__ import annotations

import asyncio
import shlex
import time
from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult, host_for
from tools.guarded import guarded, refusal
from tools.hosts import Host, HostError
from tools.hosts.output import clean
from tools.launched import job_record
from tools.log_paths import check_name, log_path
from tools.servers.log_progress import last_progress, seconds

STOP_GRACE_S = 10.0
TAIL_BYTES = 65536


class StartJobInput(ToolInput):
    name: str = Field(description="A short unique name for the job, e.g. datagen")
    command: str = Field(description="The command line, run with bash in the host's workdir")
    host: str | None = Field(default=None, description="Host name; default: the server's host")


class JobNameInput(ToolInput):
    name: str = Field(description="The job's name, as given to start_job")


class StartJob(Tool):
    name = "start_job"
    Input = StartJobInput

    async def run(self, ctx: ToolContext, inp: StartJobInput) -> ToolResult:
        name = check_name("job", inp.name)
        running = ctx.run.state.jobs.get(name)
        if running is not None:
            raise ToolError(
                f"job {name!r} is already recorded as running (pid {running['pid']} on "
                f"{running['host']}); check it with job_status, stop it with stop_job, or pick "
                "another name"
            )
        host = host_for(ctx, inp.host)
        try:  # decided as bash decides: outright, in the host's sandbox (its whole tree), or not
            decision, command = await guarded(ctx, host, inp.command)
        except HostError as err:
            raise ToolError(str(err)) from None
        if decision.action == "refuse":
            raise ToolError(refusal(ctx, decision))
        try:
            log = await log_path(ctx, host, "job", name)
            exit_file = log + ".exit"
            q = shlex.quote
            # the wrapper records the exit status where job_status finds it, even after a restart
            wrapper = (
                f"bash --norc --noprofile -c {q(command)}; "
                f"echo $? > {q(exit_file)}.tmp && mv {q(exit_file)}.tmp {q(exit_file)}"
            )
            pid = await host.start_detached(wrapper, log)
        except HostError as err:
            raise ToolError(str(err)) from None
        ctx.run.append(
            "job_started",
            name=name,
            host=host.name,
            pid=pid,
            pgid=pid,
            command=inp.command,
            log=log,
            exit_file=exit_file,
        )
        return ToolResult(
            text=f"job {name} started on {host.name}: pid {pid}, log {log}. "
            "Check it with job_status; it keeps running if the agent stops.",
            data={"name": name, "pid": pid, "log": log, "host": host.name},
        )


class JobStatus(Tool):
    name = "job_status"
    Input = JobNameInput

    async def run(self, ctx: ToolContext, inp: JobNameInput) -> ToolResult:
        started, ended = _find(ctx, inp.name)
        host = host_for(ctx, started["host"])
        try:
            if ended is None and not await host.alive(int(started["pid"])):
                code = await _exit_code(host, started["exit_file"])
                ended = ctx.run.append("job_ended", name=inp.name, exit_code=code)
            tail = await _tail(host, started["log"])  # after the check: an ended job's last words
        except HostError as err:
            raise ToolError(str(err)) from None
        return status_result(started, ended, tail)


class StopJob(Tool):
    name = "stop_job"
    Input = JobNameInput

    async def run(self, ctx: ToolContext, inp: JobNameInput) -> ToolResult:
        started, ended = _find(ctx, inp.name)
        if ended is not None:
            return ToolResult(text=f"job {inp.name} already ended (exit {ended.get('exit_code')})")
        host = host_for(ctx, started["host"])
        pgid = int(started["pgid"])
        try:
            await host.signal_group(pgid, "TERM")
            deadline = time.monotonic() + STOP_GRACE_S
            while time.monotonic() < deadline and await host.group_alive(pgid):
                await asyncio.sleep(0.2)
            forced = await host.group_alive(pgid)
            if forced:
                await host.signal_group(pgid, "KILL")
                await asyncio.sleep(0.2)
            gone = not await host.group_alive(pgid)
            code = await _exit_code(host, started["exit_file"])
        except HostError as err:
            raise ToolError(str(err)) from None
        ctx.run.append("job_ended", name=inp.name, exit_code=code, stopped=True, forced=forced)
        how = "SIGKILL after SIGTERM was ignored" if forced else "SIGTERM"
        state = "every process of it is gone" if gone else "SOME PROCESSES ARE STILL ALIVE"
        return ToolResult(
            text=f"job {inp.name} stopped ({how}); {state}",
            is_error=not gone,
            data={"forced": forced, "gone": gone},
        )


def _find(ctx: ToolContext, name: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    started, ended = job_record(ctx, name)
    if started is None:
        known = ", ".join(sorted(ctx.run.state.jobs)) or "none running"
        raise ToolError(f"no job named {name!r} in this run (jobs: {known})")
    return started, ended


async def _tail(host: Host, log: str) -> str:
    size = await host.size(log)
    start = max(0, size - TAIL_BYTES)
    return clean((await host.read_bytes(log, start, TAIL_BYTES)).decode("utf-8", "replace"))


async def _exit_code(host: Host, exit_file: str) -> int | None:
    try:
        text = (await host.read_bytes(exit_file, 0, 32)).decode().strip()
    except HostError:
        return None  # killed before the wrapper could write it
    return int(text) if text.lstrip("-").isdigit() else None


def status_result(started: dict[str, Any], ended: dict[str, Any] | None, tail: str) -> ToolResult:
    """job_status's result: how the job stands for the model, and typed for code (`data`)."""
    name = started["name"]
    began = datetime.fromisoformat(started["ts"].replace("Z", "+00:00"))
    until = (
        datetime.fromisoformat(ended["ts"].replace("Z", "+00:00")) if ended else datetime.now(UTC)
    )
    elapsed = (until - began).total_seconds()
    lines = [line for line in tail.splitlines() if line.strip()]
    progress = last_progress(tail)
    if ended is None:
        head = (
            f"job {name}: running for {_dur(elapsed)} on {started['host']} (pid {started['pid']})"
        )
    else:
        code = ended.get("exit_code")
        how = (
            "stopped"
            if ended.get("stopped")
            else (
                "finished OK"
                if code == 0
                else f"failed (exit {code})"
                if code is not None
                else "ended without an exit status (killed?)"
            )
        )
        head = f"job {name}: {how} after {_dur(elapsed)} on {started['host']}"
    out = [head]
    data: dict[str, Any] = {
        "running": ended is None,
        "elapsed_s": round(elapsed, 1),
        "exit_code": ended.get("exit_code") if ended else None,
        "log": started["log"],
        "tail": lines[-15:],  # the log's last lines, as shown: what a stage's fix is read from
    }
    if progress is not None:
        bits = [f"progress: {progress.line}"]
        if progress.fraction is not None:
            bits.append(f"{progress.fraction:.0%}")
            data["fraction"] = progress.fraction
        if progress.rate:
            bits.append(f"rate {progress.rate}")
        # the time left, typed for the poller: the log's own ETA (in the job's clock, which a
        # simulated stage speeds up) or estimated from the elapsed time (real seconds)
        if progress.eta:
            bits.append(f"ETA {progress.eta}")
            data["eta_s"], data["eta_clock"] = seconds(progress.eta), "job"
        elif ended is None and progress.fraction and 0 < progress.fraction < 1:
            left = elapsed * (1 - progress.fraction) / progress.fraction
            bits.append(f"ETA ~{_dur(left)} (estimated from the elapsed time)")
            data["eta_s"], data["eta_clock"] = round(left, 1), "real"
        out.append(" | ".join(bits))
    out.append(f"log {started['log']}, last lines:")
    out.extend(lines[-15:] or ["(empty)"])
    return ToolResult(text="\n".join(out), data=data)


def _dur(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
