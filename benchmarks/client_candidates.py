"""The HTTP clients measured against each other for the benchmark engine (docs/benchmark.md).

Every candidate runs the same closed loop (C workers, each sending its next request when the
previous one ends) and fills the same RequestRecord, so compute_point scores them alike:
  httpx-lines    httpx, aiter_lines + json.loads per message (the obvious client)
  httpx-scan     httpx, aiter_raw + the lean `choices` scan (is it httpx or the parsing?)
  aiohttp-lines  aiohttp, per-line json.loads (vLLM's `bench serve` way)
  aiohttp-scan   aiohttp, iter_any + the lean scan
  raw            tools.bench.http: an asyncio Protocol, httptools framing, the lean scan (ours)
  raw-handparsed the same with the hand-written framing it had before httptools
                 (client_handparsed.py; for the side-by-side figures only)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from time import perf_counter

import orjson

from tools.bench.http import Target
from tools.bench.loadgen import LevelRun, run_level
from tools.bench.request_record import RequestRecord

_CHOICES = (b'"choices":[{', b'"choices": [{')


def _scan(rec: RequestRecord, state: dict, data: bytes, t: float) -> None:
    """The lean scan: count complete `choices` messages, keep the usage message."""
    buf = state["buf"] + data
    end = buf.rfind(b"\n\n")
    if end < 0:
        state["buf"] = buf
        return
    events, state["buf"] = buf[:end], buf[end + 2 :]
    n = events.count(_CHOICES[0]) + events.count(_CHOICES[1])
    if n:
        if rec.chunks:
            rec.itl.append(t - state["last"])
        else:
            rec.ttft = t - rec.start
        rec.itl.extend([0.0] * (n - 1))
        rec.chunks += n
        state["last"] = t
    if b'"usage":{' in events or b'"usage": {' in events:
        state["usage"] = events


def _usage(rec: RequestRecord, state: dict) -> None:
    events = state.get("usage", b"")
    at = max(events.rfind(b'"usage":{'), events.rfind(b'"usage": {'))
    line = events[events.rfind(b"data:", 0, at) + 5 :].split(b"\n", 1)[0].strip()
    usage = orjson.loads(line)["usage"] if at >= 0 else None
    if usage and rec.chunks:
        rec.output_tokens, rec.prompt_tokens = usage["completion_tokens"], usage["prompt_tokens"]
        rec.latency = state["last"] - rec.start
        rec.success = True
    else:
        rec.fail("no_usage", "no usage")


def _lines(rec: RequestRecord, line: str, t: float, state: dict) -> None:
    """vLLM's per-message handling: json.loads every message."""
    line = line.strip()
    if not line or line.startswith(":"):
        return
    chunk = line.removeprefix("data: ")
    if chunk == "[DONE]":
        return
    data = json.loads(chunk)
    if data.get("choices"):
        if rec.chunks:
            rec.itl.append(t - state["last"])
        else:
            rec.ttft = t - rec.start
        rec.chunks += 1
        state["last"] = t
    elif usage := data.get("usage"):
        rec.output_tokens, rec.prompt_tokens = usage["completion_tokens"], usage["prompt_tokens"]


async def _closed_loop(
    requests: list[bytes], concurrency: int, one: Callable[[bytes, RequestRecord], Awaitable[None]]
) -> LevelRun:
    import time

    run = LevelRun(records=[RequestRecord() for _ in requests])
    order = iter(range(len(requests)))

    async def worker() -> None:
        for i in order:
            rec = run.records[i]
            try:
                await one(requests[i], rec)
            except Exception as err:
                rec.fail(type(err).__name__, str(err))
            rec.end = perf_counter()

    cpu0 = time.process_time()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(requests)))))
    run.cpu_seconds = time.process_time() - cpu0
    return run


async def httpx_level(url: str, bodies: list[bytes], c: int, scan: bool) -> LevelRun:
    import httpx

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx.Timeout(10.0, read=None, write=None, pool=None)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:

        async def one(body: bytes, rec: RequestRecord) -> None:
            state: dict = {"buf": b"", "last": 0.0}
            rec.start = perf_counter()
            headers = {"content-type": "application/json"}
            async with client.stream("POST", url, content=body, headers=headers) as resp:
                if scan:
                    async for data in resp.aiter_raw():
                        _scan(rec, state, data, perf_counter())
                    _usage(rec, state)
                else:
                    async for line in resp.aiter_lines():
                        _lines(rec, line, perf_counter(), state)
                    rec.latency = state["last"] - rec.start
                    rec.success = rec.chunks > 0

        await asyncio.gather(*(one(b, RequestRecord()) for b in bodies[:c]))  # connect + warm
        return await _closed_loop(bodies, c, one)


async def aiohttp_level(url: str, bodies: list[bytes], c: int, scan: bool) -> LevelRun:
    import aiohttp

    conn = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
    async with aiohttp.ClientSession(connector=conn, timeout=timeout) as session:

        async def one(body: bytes, rec: RequestRecord) -> None:
            state: dict = {"buf": b"", "last": 0.0}
            rec.start = perf_counter()
            headers = {"content-type": "application/json"}
            async with session.post(url, data=body, headers=headers) as resp:
                if scan:
                    async for data in resp.content.iter_any():
                        _scan(rec, state, data, perf_counter())
                    _usage(rec, state)
                else:
                    async for raw in resp.content:
                        _lines(rec, raw.decode(), perf_counter(), state)
                    rec.latency = state["last"] - rec.start
                    rec.success = rec.chunks > 0

        await asyncio.gather(*(one(b, RequestRecord()) for b in bodies[:c]))
        return await _closed_loop(bodies, c, one)


async def raw_level(url: str, bodies: list[bytes], c: int) -> LevelRun:
    target = Target.parse(url.rsplit("/v1/", 1)[0])
    requests = [target.request("/v1/completions", b) for b in bodies]
    return await run_level(target, requests, c, warmup=requests[:c])


async def handparsed_level(url: str, bodies: list[bytes], c: int) -> LevelRun:
    from client_handparsed import HandParsedTarget

    base = Target.parse(url.rsplit("/v1/", 1)[0])
    target = HandParsedTarget(base.scheme, base.host, base.port, base.prefix)
    requests = [target.request("/v1/completions", b) for b in bodies]
    return await run_level(target, requests, c, warmup=requests[:c])


CANDIDATES: dict[str, Callable[[str, list[bytes], int], Awaitable[LevelRun]]] = {
    "httpx-lines": lambda u, b, c: httpx_level(u, b, c, scan=False),
    "httpx-scan": lambda u, b, c: httpx_level(u, b, c, scan=True),
    "aiohttp-lines": lambda u, b, c: aiohttp_level(u, b, c, scan=False),
    "aiohttp-scan": lambda u, b, c: aiohttp_level(u, b, c, scan=True),
    "raw": raw_level,
    "raw-handparsed": handparsed_level,
}
