"""A closed loop for one concurrency level: C connections, each sends its next request as soon
as the previous one finished, so exactly C requests are in flight (request rate unbounded).

Connections are opened and warm-up requests sent before the clock starts: TCP (and TLS) set-up
is not part of any request's TTFT. A watchdog fails a request that received nothing for
`stall_s` seconds or passed one of its deadlines (head, first token, total: deadlines.py), and
the whole level - connections, warm-up, requests - runs under the level's deadline, so no server,
however it trickles, can hang the sweep.

Keep-alive: a connection is reused while the server keeps it open. A server that says Keep-Alive
and closes anyway after each response (llama.cpp's llama-server) races the next request: a
request the server closed on before answering is sent once more on a fresh connection, and once
the server has shown it closes, every request of the level takes a fresh connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from time import perf_counter

from tools.bench.deadlines import (
    ABANDONED,
    LEVEL_DEADLINE,
    WAITED_OUT,
    Deadlines,
    level_pace,
)
from tools.bench.http import StreamConn, Target
from tools.bench.request_record import RequestRecord

Progress = Callable[[int], None]  # called with the number of requests finished so far


@dataclass
class LevelRun:
    """What a level measured; filled as it goes, so an interrupted level keeps its records."""

    records: list[RequestRecord] = field(default_factory=list)
    cpu_seconds: float = 0.0
    finished: int = 0

    succeeded: int = 0
    waited_out: int = 0  # finished requests that waited out a deadline without a token

    def count(self, rec: RequestRecord) -> None:
        """A request of the level finished."""
        self.finished += 1
        self.succeeded += rec.success
        self.waited_out += rec.error_kind in WAITED_OUT

    def hopeless(self, streams: int) -> bool:
        """No request has succeeded and one per stream (at least 2) waited out a deadline without
        a token: the rest would wait the same way (with the default deadlines, 600 s each), so a
        closed level sends no more."""
        return not self.succeeded and self.waited_out >= max(2, streams)

    @property
    def done(self) -> list[RequestRecord]:
        return [r for r in self.records if r.end > 0]

    @property
    def duration(self) -> float:
        done = self.done
        if not done:
            return 0.0
        return max(r.end for r in done) - min(r.start for r in done)


async def open_connections(
    target: Target, n: int, timeout: float
) -> tuple[list[StreamConn | None], str]:
    """n connections (None where one failed) and the first failure's message."""
    results = await asyncio.gather(
        *(target.connect(timeout) for _ in range(n)), return_exceptions=True
    )
    conns: list[StreamConn | None] = []
    error = ""
    for res in results:
        if isinstance(res, BaseException):
            conns.append(None)
            error = error or connect_error(target, res, timeout)
        else:
            conns.append(res)
    return conns, error


def connect_error(target: Target, err: BaseException, timeout: float) -> str:
    if isinstance(err, TimeoutError | asyncio.TimeoutError):
        return f"cannot reach {target.url}: no connection within {timeout:g} s"
    if isinstance(err, ConnectionRefusedError):
        return f"cannot reach {target.url}: connection refused (is the server up on that port?)"
    return f"cannot reach {target.url}: {type(err).__name__}: {err}"


async def run_level(
    target: Target,
    requests: list[bytes],
    concurrency: int,
    warmup: list[bytes] | None = None,
    progress: Progress | None = None,
    out: LevelRun | None = None,
    connect_timeout: float = 10.0,
    stall_s: float = 300.0,
    ready: asyncio.Event | None = None,
    go: asyncio.Event | None = None,
    prompt_tokens: int | list[int] = 0,
    max_tokens: list[int] | None = None,
    deadline_s: float | None = None,
    deadlines: Deadlines | None = None,
    level_s: float | None = None,
    count: int | None = None,
    min_s: float | None = None,
) -> LevelRun:
    """Send `requests` with `concurrency` in flight; `ready`/`go` let a parent start shards
    together (set `ready` once connected and warmed up, then wait for `go`). `prompt_tokens`:
    each prompt's expected length, kept when the server reports no usage; `max_tokens`: each
    request's output length; `deadline_s`: send no request later than this after the start
    (the requests not sent are not part of the level); `min_s` with `count`: send the first
    `count`, and more of `requests` only until `min_s` seconds have passed (those not sent are
    not part of the level); `deadlines`: each request's; `level_s`: the whole level's, from the
    first connection on (default: derived, deadlines.py)."""
    run = out if out is not None else LevelRun()
    dl = deadlines or Deadlines()
    workers = max(1, min(concurrency, len(requests)))
    longest = max(max_tokens or [0])
    count = len(requests) if min_s is None or count is None else min(count, len(requests))
    owed = 0 if deadline_s is not None else count  # what a cut or an abandon fails if unsent
    if level_s is None:
        level_s = dl.level_deadline(len(requests), workers, longest, connect_timeout)
        if deadline_s is not None:  # a timed level: its duration, then its last answers
            level_s = min(level_s, connect_timeout + deadline_s + 2 * dl.request_s(longest))
        elif min_s is not None:
            level_s = dl.minimum_level_deadline(
                level_s, count, workers, longest, connect_timeout, min_s
            )
    run.records = new_records(len(requests), prompt_tokens, max_tokens)
    conns: list[StreamConn | None] = []
    guard = asyncio.ensure_future(watchdog(conns, stall_s, dl, run))
    cpu0 = time.process_time()
    try:
        async with asyncio.timeout(level_s):
            opened, _ = await open_connections(target, workers, connect_timeout)
            conns.extend(opened)  # the list the watchdog already holds
            if warmup:
                await warmup_requests(target, conns, warmup, connect_timeout, longest)
            if ready is not None:
                ready.set()
            if go is not None:
                await go.wait()
            order = _hopeful(_handout(len(requests), deadline_s, count, min_s), run, workers)
            reuse = _Reuse()
            cpu0 = time.process_time()

            def tick(rec: RequestRecord) -> None:
                run.count(rec)
                if progress is not None:
                    progress(run.finished)

            await asyncio.gather(
                *(
                    _worker(target, conns, w, requests, run, order, tick, connect_timeout, reuse)
                    for w in range(workers)
                )
            )
    except TimeoutError:  # the requests it did not owe and did not send are not part of it
        cut_level(run, conns, level_s, owed)
    finally:
        run.cpu_seconds = time.process_time() - cpu0
        if ready is not None:
            ready.set()  # a parent waiting for this shard hears of it, whatever happened
        guard.cancel()
        for conn in conns:
            if conn is not None:
                conn.abort("cancelled", "the benchmark was interrupted")
                conn.close()
        if run.hopeless(workers) and owed:
            abandon(run, owed)
        if owed < len(requests):  # the requests never sent and not owed are not part of it
            run.records = [r for r in run.records if r.start > 0]
    return run


def cut_level(
    run: LevelRun, conns: list[StreamConn | None], level_s: float, owed: int | None = None
) -> None:
    """The level's deadline passed: what is in flight, and what of the first `owed` (default:
    all) was never sent, fails with it."""
    message = f"the level ran past its deadline of {level_s:g} s"
    for conn in conns:
        if conn is not None:
            conn.abort(LEVEL_DEADLINE, message)
    now = perf_counter()
    owed = len(run.records) if owed is None else owed
    for i, rec in enumerate(run.records):
        if rec.end == 0 and (i < owed or rec.start > 0):
            rec.start = rec.start or now
            rec.end = now
            rec.fail(LEVEL_DEADLINE, message)


def _hopeful(order: Iterator[int], run: LevelRun, streams: int) -> Iterator[int]:
    """The request indices while the level can still measure something (LevelRun.hopeless)."""
    for i in order:
        if run.hopeless(streams):
            return
        yield i


def abandon(run: LevelRun, owed: int | None = None) -> None:
    """The requests of the first `owed` (default: all) a hopeless level did not send: failed,
    with the reason."""
    message = (
        f"not sent: the level's first {run.waited_out} requests got no token before their deadlines"
    )
    now = perf_counter()
    for rec in run.records[:owed]:
        if rec.start == 0:
            rec.start = rec.end = now
            rec.fail(ABANDONED, message)


def new_records(
    n: int, prompt_tokens: int | list[int], max_tokens: list[int] | None
) -> list[RequestRecord]:
    prompts = prompt_tokens if isinstance(prompt_tokens, list) else [prompt_tokens] * n
    outs = max_tokens or [0] * n
    return [
        RequestRecord(prompt_tokens=p, max_tokens=m) for p, m in zip(prompts, outs, strict=True)
    ]


def _handout(n: int, stop_s: float | None, count: int, min_s: float | None) -> Iterator[int]:
    """The one place that decides whether the level hands out another request: the indices in
    order, of `n` prepared - none after `stop_s` (a timed level), and past the first `count`
    none once `min_s` has passed (a level with a minimum length)."""
    start = perf_counter()
    for i in range(n):
        elapsed = perf_counter() - start
        if stop_s is not None and elapsed >= stop_s:
            return
        if min_s is not None and i >= count and elapsed >= min_s:
            return
        yield i


@dataclass
class _Reuse:
    """Whether connections outlive a response on this server (learnt during the level)."""

    keep: bool = True


async def _worker(
    target: Target,
    conns: list[StreamConn | None],
    w: int,
    requests: list[bytes],
    run: LevelRun,
    order: Iterator[int],
    tick: Callable[[RequestRecord], None],
    connect_timeout: float,
    reuse: _Reuse,
) -> None:
    loop = asyncio.get_running_loop()
    records = run.records
    free_since = perf_counter()
    for i in order:  # shared by the workers: whoever is free takes the next request
        rec = records[i]
        conn = conns[w]
        if conn is not None and conn.requests and (conn.server_closed or not reuse.keep):
            reuse.keep = False  # it closes connections after a response: one per request
            conn.close()
            conn = None
        if conn is None or conn.closed:
            try:
                conn = conns[w] = await target.connect(connect_timeout)
            except (OSError, TimeoutError) as err:
                conns[w] = None
                rec.start = rec.end = perf_counter()
                rec.fail("connect", connect_error(target, err, connect_timeout))
                tick(rec)
                await asyncio.sleep(0.05)  # a refused port fails in microseconds: don't spin
                free_since = perf_counter()
                continue
        fut: asyncio.Future[None] = loop.create_future()
        conn.send(requests[i], rec, fut)
        rec.queue_time = rec.start - free_since
        await fut
        if rec.error_kind == "disconnect" and not conn.answered and conn.requests > 1:
            # the server closed an idle keep-alive connection as we sent: once more, fresh
            reuse.keep = False
            rec = records[i] = RequestRecord(
                prompt_tokens=rec.prompt_tokens, max_tokens=rec.max_tokens
            )
            try:
                conn = conns[w] = await target.connect(connect_timeout)
                fut = loop.create_future()
                conn.send(requests[i], rec, fut)
                await fut
            except (OSError, TimeoutError) as err:
                rec.start = rec.end = perf_counter()
                rec.fail("connect", connect_error(target, err, connect_timeout))
        free_since = perf_counter()
        tick(rec)


async def warmup_requests(
    target: Target,
    conns: list[StreamConn | None],
    warmup: list[bytes],
    timeout: float,
    max_tokens: int = 0,
) -> None:
    """Send the warm-up requests concurrently over the level's connections; discard results."""
    loop = asyncio.get_running_loop()

    async def one(w: int, request: bytes) -> None:
        conn = conns[w]
        if conn is None or conn.closed:
            try:
                conn = conns[w] = await target.connect(timeout)
            except (OSError, TimeoutError):
                return
        fut: asyncio.Future[None] = loop.create_future()
        conn.send(request, RequestRecord(max_tokens=max_tokens), fut)  # cut past max_tokens too
        await fut

    await asyncio.gather(*(one(w % len(conns), r) for w, r in enumerate(warmup[: len(conns)])))


async def watchdog(
    conns: list[StreamConn | None], stall_s: float, dl: Deadlines, run: LevelRun
) -> None:
    """Fail each request in flight that passed a deadline (its total tightened by the level's
    pace once known: deadlines.py)."""
    pace: float | None = None
    seen = -1
    while True:
        await asyncio.sleep(dl.tick_s(stall_s))
        if run.finished != seen:  # the pace moves only when a request finishes
            seen, pace = run.finished, level_pace(run.records)
        now = perf_counter()
        for conn in conns:
            rec = conn.rec if conn is not None else None
            if conn is None or rec is None:
                continue
            late = conn.overdue(now, dl, dl.learned_request_s(rec.max_tokens, pace), stall_s)
            if late is not None:
                with contextlib.suppress(Exception):
                    conn.abort(*late)
