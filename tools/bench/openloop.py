"""An open loop for one request-rate level: requests leave on a schedule, whatever is in flight.

Arrivals follow vLLM `bench serve`'s `--request-rate R --burstiness B`: gaps drawn from a gamma
distribution with shape B and mean 1/R (B = 1: a Poisson process; B < 1 burstier, B > 1
steadier; B = "constant": evenly spaced). The schedule is then scaled so that n requests span
(n-1)/R seconds: a level lasts what its rate says, so the achieved rate is the target up to the
client's own lateness (each record's queue_time: how late it left), not up to sampling luck.

Connections: a pool, grown when every open one is busy (a new connection's set-up then counts in
that request's lateness, not its TTFT); one the server closed is not reused.
"""

from __future__ import annotations

import asyncio
import random
import time
from time import perf_counter
from typing import Literal

from tools.bench.deadlines import Deadlines
from tools.bench.http import StreamConn, Target
from tools.bench.loadgen import (
    LevelRun,
    Progress,
    connect_error,
    cut_level,
    new_records,
    open_connections,
    warmup_requests,
    watchdog,
)

PREOPEN = 32  # connections opened before the clock starts (more are opened as needed)


def arrivals(
    n: int, rate: float, burstiness: float | Literal["constant"], seed: int | str
) -> list[float]:
    """n send times in seconds from the level's start (the first request leaves at once)."""
    if n <= 0:
        return []
    if burstiness == "constant":
        return [i / rate for i in range(n)]
    rng = random.Random(seed)
    theta = 1.0 / (rate * burstiness)
    times, t = [0.0], 0.0
    for _ in range(n - 1):
        t += rng.gammavariate(burstiness, theta)
        times.append(t)
    if t > 0:  # scale so that n requests span n / rate seconds, as the rate says
        scale = (n - 1) / rate / t
        times = [x * scale for x in times]
    return times


async def run_open_level(
    target: Target,
    requests: list[bytes],
    send_at: list[float],
    warmup: list[bytes] | None = None,
    progress: Progress | None = None,
    out: LevelRun | None = None,
    connect_timeout: float = 10.0,
    stall_s: float = 300.0,
    ready: asyncio.Event | None = None,
    go: asyncio.Event | None = None,
    prompt_tokens: int | list[int] = 0,
    max_tokens: list[int] | None = None,
    deadlines: Deadlines | None = None,
    level_s: float | None = None,
) -> LevelRun:
    """Send requests[i] at send_at[i] seconds after the start (after `go`, when given); the
    whole level within `level_s` (default: derived, deadlines.py)."""
    run = out if out is not None else LevelRun()
    dl = deadlines or Deadlines()
    longest = max(max_tokens or [0])
    if level_s is None:
        last = send_at[-1] if send_at else 0.0
        level_s = dl.level_deadline(len(requests), 1, longest, connect_timeout, last)
    run.records = new_records(len(requests), prompt_tokens, max_tokens)
    conns: list[StreamConn | None] = []  # every connection, for the watchdog
    idle: list[StreamConn] = []
    guard = asyncio.ensure_future(watchdog(conns, stall_s, dl, run))
    tasks: list[asyncio.Future[None]] = []
    cpu0 = time.process_time()
    try:
        async with asyncio.timeout(level_s):
            opened, _ = await open_connections(target, min(len(requests), PREOPEN), connect_timeout)
            conns.extend(opened)
            idle.extend(c for c in opened if c is not None)
            if warmup and conns:
                await warmup_requests(target, conns, warmup, connect_timeout, longest)
            if ready is not None:
                ready.set()
            if go is not None:
                await go.wait()
            cpu0 = time.process_time()
            t0 = perf_counter()

            async def one(i: int) -> None:
                rec = run.records[i]
                conn = idle.pop() if idle else None
                while conn is not None and (conn.closed or conn.server_closed):
                    conn.close()
                    conn = idle.pop() if idle else None
                if conn is None:
                    try:
                        conn = await target.connect(connect_timeout)
                    except (OSError, TimeoutError) as err:
                        rec.start = rec.end = perf_counter()
                        rec.fail("connect", connect_error(target, err, connect_timeout))
                        _tick(run, progress)
                        return
                    conns.append(conn)
                fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                conn.send(requests[i], rec, fut)
                rec.queue_time = rec.start - (t0 + send_at[i])  # how late it left
                await fut
                if not (conn.closed or conn.server_closed):
                    idle.append(conn)
                _tick(run, progress)

            for i, at in enumerate(send_at):
                delay = t0 + at - perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.ensure_future(one(i)))
            await asyncio.gather(*tasks)
    except TimeoutError:
        cut_level(run, conns, level_s)
    finally:
        for task in tasks:
            task.cancel()
        run.cpu_seconds = time.process_time() - cpu0
        if ready is not None:
            ready.set()  # a parent waiting for this shard hears of it, whatever happened
        guard.cancel()
        for conn in conns:
            if conn is not None:
                conn.abort("cancelled", "the benchmark was interrupted")
                conn.close()
        run.records = [r for r in run.records if r.start > 0]  # those sent (or cut by the level)
    return run


def _tick(run: LevelRun, progress: Progress | None) -> None:
    run.finished += 1
    if progress is not None:
        progress(run.finished)
