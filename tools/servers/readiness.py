"""Waiting for a server: the log watched, health polled, the process checked, all at once.

Ready = health 200 + the engine's ready line + one real streaming completion (health endpoints
lie: vLLM's reads a flag, SGLang's HTTP server can outlive a dead scheduler) - each as the engine
profile's [readiness] table says (a generic server has no ready line). Failed = the process
is gone or the log shows a failure pattern; either is noticed within one poll (POLL_S) and the
diagnosis follows after a short grace so the whole error message is in the excerpt.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from tools.hosts import Host, HostError
from tools.servers.diagnose import Diagnosis, diagnose, failure_in
from tools.servers.log_progress import parse_line
from tools.servers.profiles import Engine

POLL_S = 0.2  # log, process and health, together (health: >= 2/s even over a slow SSH link)
GRACE_S = 0.5  # after a failure line, for the rest of the message
READ_CHUNK = 1 << 20
LOG_KEEP = 256 * 1024  # bytes of the newest log kept for the diagnosis
QUIET_S = 4 * POLL_S  # a log silent longer than this (and a quarter of the wait) is not loading
HOST_LOST_S = 60.0  # how long the host may be unreachable during a wait
# Each probe whole, the caller's deadline (httpx's timeouts are per read: a body trickled a byte
# at a time never trips them): a health check, /v1/models, the streaming completion
HEALTH_S = 5.0
MODELS_S = 10.0
COMPLETION_S = 120.0


class StartFailure(Exception):
    def __init__(self, diagnosis: Diagnosis, seconds: float) -> None:
        super().__init__(diagnosis.text)
        self.diagnosis = diagnosis
        self.seconds = seconds


@dataclass
class Ready:
    seconds: float
    model: str
    ready_line: str | None
    completion_s: float
    progress: list[str] = field(default_factory=list)


@dataclass
class Watch:
    host: Host
    engine: Engine
    pid: int
    log: str
    port: int
    timeout: float
    model: str | None = None
    on_progress: Callable[[float | None, str], None] | None = None
    offset: int = 0
    partial: bytes = b""
    recent: bytearray = field(default_factory=bytearray)
    ready_line: str | None = None
    failed_at: float | None = None
    last_fraction: float | None = None
    progress_lines: list[str] = field(default_factory=list)
    grew_at: float | None = None  # when the log last grew (time.monotonic)

    def verdict(self, now: float) -> str:
        """A wait that ran out, told apart (the process is alive, the log shows no failure): a
        slow start still writes its log, a hung one has gone quiet."""
        quiet = now - self.grew_at if self.grew_at is not None else None
        if quiet is not None and quiet <= max(QUIET_S, self.timeout / 4):
            return (
                "the process still running and its log still growing - a slow start, not a "
                "crash: start it again with a longer ready_timeout_s"
            )
        said = "wrote no log" if quiet is None else f"its log silent for the last {quiet:.0f} s"
        return f"the process still running but it {said} - stuck, not slow"

    async def read_log(self) -> None:
        try:
            data = await self.host.read_bytes(self.log, self.offset, READ_CHUNK)
        except HostError:
            return  # not created yet
        if not data:
            return
        self.grew_at = time.monotonic()
        self.offset += len(data)
        self.recent += data
        if len(self.recent) > 2 * LOG_KEEP:
            del self.recent[: len(self.recent) - LOG_KEEP]
        text = self.partial + data
        *lines, self.partial = text.replace(b"\r", b"\n").split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            if self.ready_line is None and any(p.search(line) for p in self.engine.ready_lines):
                self.ready_line = line.strip()
            if self.failed_at is None and failure_in(self.engine, line):
                self.failed_at = time.monotonic()
            found = parse_line(line)
            if found is not None and found.fraction not in (None, self.last_fraction):
                self.last_fraction = found.fraction
                self.progress_lines.append(found.line)
                if self.on_progress is not None:
                    self.on_progress(found.fraction, found.line)

    def diagnosis(self) -> Diagnosis:
        return diagnose(self.engine, self.recent.decode("utf-8", "replace"), self.port, None)


async def wait_ready(w: Watch) -> Ready:
    """Return when the server serves a completion; raise StartFailure when it cannot.

    A dropped SSH connection is not the server's failure: the host reconnects on the next call
    (and the port forward is made again); only HOST_LOST_S without the host fails the wait."""
    start = time.monotonic()
    timeout = httpx.Timeout(5.0, read=60.0)
    client: httpx.AsyncClient | None = None
    local_port = 0
    lost_since: float | None = None
    try:
        while True:
            try:
                port = await w.host.forward_port(w.port)
                if port != local_port or client is None:
                    if client is not None:
                        await client.aclose()
                    local_port = port
                    client = httpx.AsyncClient(
                        base_url=f"http://127.0.0.1:{port}", timeout=timeout, trust_env=False
                    )
                alive, healthy, _ = await asyncio.gather(
                    w.host.alive(w.pid), _health(client, w.engine), w.read_log()
                )
            except HostError as err:
                lost_since = lost_since or time.monotonic()
                if time.monotonic() - lost_since > HOST_LOST_S:
                    raise StartFailure(
                        Diagnosis(f"lost host {w.host.name}: {err}", ""), time.monotonic() - start
                    ) from None
                await asyncio.sleep(1.0)
                continue
            lost_since = None
            now = time.monotonic()
            if not alive:  # its last words may have come after this poll's read
                await asyncio.sleep(0.05)
                await w.read_log()
                raise StartFailure(w.diagnosis(), now - start)
            if w.failed_at is not None and now - w.failed_at >= GRACE_S:
                raise StartFailure(w.diagnosis(), now - start)
            said_ready = w.ready_line is not None or not w.engine.ready_lines
            if healthy and said_ready and w.failed_at is None:
                t0 = time.monotonic()
                model = w.model or await model_name(client)
                skip_completion = not w.engine.profile.readiness.completion
                if model is not None and (skip_completion or await completion_ok(client, model)):
                    if w.on_progress is not None and w.last_fraction != 1.0:
                        w.on_progress(1.0, w.ready_line or "ready")  # the bar ends full
                    return Ready(
                        seconds=time.monotonic() - start,
                        model=model,
                        ready_line=w.ready_line,
                        completion_s=time.monotonic() - t0,
                        progress=w.progress_lines,
                    )
            if now - start > w.timeout:
                d = w.diagnosis()
                last = d.excerpt.strip().splitlines()[-1:] or ["(empty log)"]
                d.text = f"not ready after {w.timeout:g} s (ready_timeout_s): {w.verdict(now)}; "
                d.text += f"last log line: {last[0]}"
                raise StartFailure(d, now - start)
            await asyncio.sleep(POLL_S)
    finally:
        if client is not None:
            await client.aclose()


async def _health(client: httpx.AsyncClient, engine: Engine) -> bool:
    try:
        async with asyncio.timeout(HEALTH_S):
            return (await client.get(engine.health_path, timeout=2.0)).status_code == 200
    except (httpx.HTTPError, TimeoutError):
        return False


async def model_name(client: httpx.AsyncClient) -> str | None:
    """The first model /v1/models names within MODELS_S; None: no answer, or not one."""
    try:
        async with asyncio.timeout(MODELS_S):
            data = (await client.get("/v1/models", timeout=5.0)).json()["data"]
        return str(data[0]["id"])
    except (httpx.HTTPError, TimeoutError, ValueError, KeyError, IndexError, TypeError):
        return None


async def completion_ok(client: httpx.AsyncClient, model: str) -> bool:
    """One real streaming completion within COMPLETION_S: at least one chunk with choices, then
    [DONE] (comments forever, or tokens past max_tokens, are not a completion)."""
    most = 4
    body = {"model": model, "prompt": "Hello", "max_tokens": most, "stream": True, "temperature": 0}
    chunks = 0
    try:
        async with (
            asyncio.timeout(COMPLETION_S),
            client.stream("POST", "/v1/completions", json=body) as resp,
        ):
            if resp.status_code != 200:
                return False
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    return chunks > 0
                event: Any = orjson.loads(payload)
                if not isinstance(event, dict):
                    return False
                if event.get("choices"):
                    chunks += 1
                if chunks > most + 2:  # a role and a finish chunk may be empty
                    return False
    except (httpx.HTTPError, orjson.JSONDecodeError, TimeoutError):
        return False
    return False  # no [DONE]: not whole
