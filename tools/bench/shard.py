"""The load generator in child processes: each runs uvloop and its share of a level.

Why processes: the agent's own event loop (the model call, the terminal) must not share a core
with 25,000 SSE messages a second, uvloop halves the client's CPU per message, and past one core's
worth of messages (~100k/s) more processes are the only way up. perf_counter is CLOCK_MONOTONIC,
so the children's timestamps are on the parent's clock.

Protocol, one JSON object per line. Parent -> child: {"level": {...}}, {"go": 1}, {"stop": 1},
{"exit": 1}. Child -> parent: {"ready": 1}, {"done": n} (progress), {"result": {"records",
"cpu"}}, {"error": "one line"}.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from tools.bench.deadlines import Deadlines
from tools.bench.http import Target
from tools.bench.loadgen import LevelRun, run_level
from tools.bench.openloop import run_open_level
from tools.bench.random_prompts import PATHS, bodies, level_seed, request_body
from tools.bench.request_record import RequestRecord

_LIMIT = 1 << 30  # a level's records (every ITL of every request) come back in one line


def share(total: int, shards: int, j: int) -> int:
    """How many of `total` shard j gets when dealt round-robin."""
    return total // shards + (1 if j < total % shards else 0)


@dataclass
class LevelPlan:
    """One shard's share of a level: the request bytes and what each asks for."""

    requests: list[bytes]
    warmup: list[bytes]
    prompt_tokens: int | list[int]
    max_tokens: list[int] | None
    send_at: list[float] | None  # open loop: each request's send time; None: closed loop


def level_requests(spec: dict[str, Any], shard: int, shards: int) -> LevelPlan:
    """The measured and warm-up requests of one shard, dealt round-robin from one seeded list so
    that the same seed sends the same prompts whatever the number of shards. `samples` in the
    job ([prompt, prompt_tokens, max_tokens] rows from a dataset) replace the random words."""
    target = Target.parse(spec["url"])
    path = PATHS[spec["endpoint"]]
    style = [
        spec["endpoint"],
        spec["ignore_eos"],
        spec["temperature"],
        spec["extra_body"],
        spec.get("prefix", ""),
    ]
    extra_tokens = spec.get("prefix_tokens", 0)
    seed, level = spec["seed"], spec["level"]
    prompt_tokens: int | list[int] = spec["prompt_tokens"] + extra_tokens
    max_tokens: list[int] | None = None
    if spec.get("samples") is not None:
        rows = spec["samples"][shard::shards]
        measured = [request_body(spec["model"], p, m, *style) for p, _, m in rows]
        warm = [request_body(spec["model"], p, m, *style) for p, _, m in spec["warm_samples"]]
        prompt_tokens = [t + extra_tokens for _, t, _ in rows]
        max_tokens = [m for _, _, m in rows]
    else:
        make = [spec["model"], spec["words"], spec["max_tokens"], *style]
        measured = bodies(spec["num_prompts"], level_seed(seed, level, "measured"), *make)
        measured = measured[shard::shards]
        max_tokens = [spec["max_tokens"]] * len(measured)  # for a count from the chunks
        warm = bodies(spec["warmup"], level_seed(seed, level, "warmup"), *make)
    send_at = spec.get("send_at")
    return LevelPlan(
        [target.request(path, b) for b in measured],
        [target.request(path, b) for b in warm[shard::shards]],
        prompt_tokens,
        max_tokens,
        None if send_at is None else send_at[shard::shards],
    )


async def run_plan(
    spec: dict[str, Any],
    plan: LevelPlan,
    out: LevelRun,
    progress: Callable[[int], None] | None = None,
    ready: asyncio.Event | None = None,
    go: asyncio.Event | None = None,
) -> LevelRun:
    """Run one shard's plan: an open loop when it has send times, else a closed loop."""
    target = Target.parse(spec["url"])
    common: dict[str, Any] = {
        "warmup": plan.warmup,
        "progress": progress,
        "out": out,
        "connect_timeout": spec["connect_timeout"],
        "stall_s": spec["stall_s"],
        "ready": ready,
        "go": go,
        "prompt_tokens": plan.prompt_tokens,
        "max_tokens": plan.max_tokens,
        "deadlines": Deadlines.from_job(spec.get("deadlines")),
        "level_s": spec.get("level_s"),
    }
    if plan.send_at is not None:
        return await run_open_level(target, plan.requests, plan.send_at, **common)
    count = spec.get("count")  # a level with a minimum length: this shard's share of its count
    if count is not None:
        count = share(count, spec.get("shards", 1), spec.get("shard", 0))
    return await run_level(
        target,
        plan.requests,
        spec["concurrency"],
        deadline_s=spec.get("deadline_s"),
        count=count,
        min_s=spec.get("min_s"),
        **common,
    )


class ShardPool:
    """n child processes that run levels together; start them once per sweep."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.procs: list[asyncio.subprocess.Process] = []

    async def start(self) -> None:
        for _ in range(self.n):
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tools.bench.shard",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=_LIMIT,
                start_new_session=True,  # Ctrl-C reaches the parent only
                env={**os.environ, "PYTHONPATH": _pythonpath()},
            )
            self.procs.append(proc)

    async def run_level(
        self, spec: dict[str, Any], progress: Callable[[int], None] | None, out: LevelRun
    ) -> LevelRun:
        """Run one level across the shards; on cancellation keep what finished."""
        level, shards = spec["concurrency"], self.n
        active = [j for j in range(shards) if share(level, shards, j) > 0]
        for j in active:
            job = {**spec, "shard": j, "shards": shards, "concurrency": share(level, shards, j)}
            self._send(j, {"level": job})
        done = dict.fromkeys(active, 0)
        results: dict[int, dict[str, Any]] = {}
        try:
            for j in active:  # wait until every shard is connected and warm, then start together
                msg = await self._recv(j)
                if "error" in msg:
                    raise ShardError(msg["error"])
            for j in active:
                self._send(j, {"go": 1})

            async def collect(j: int) -> None:
                while True:
                    msg = await self._recv(j)
                    if "done" in msg:
                        done[j] = msg["done"]
                        if progress is not None:
                            progress(sum(done.values()))
                    elif "result" in msg:
                        results[j] = msg["result"]
                        return
                    elif "error" in msg:
                        raise ShardError(msg["error"])

            await asyncio.gather(*(collect(j) for j in active))
        except asyncio.CancelledError:
            for j in active:
                if j not in results:
                    self._send(j, {"stop": 1})
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._drain(active, results), 5)
            _merge(out, results)
            raise
        _merge(out, results)
        return out

    async def _drain(self, active: list[int], results: dict[int, dict[str, Any]]) -> None:
        for j in active:
            while j not in results:
                msg = await self._recv(j)
                if "result" in msg:
                    results[j] = msg["result"]

    def _send(self, j: int, msg: dict[str, Any]) -> None:
        stdin = self.procs[j].stdin
        assert stdin is not None
        stdin.write(orjson.dumps(msg) + b"\n")

    async def _recv(self, j: int) -> dict[str, Any]:
        stdout = self.procs[j].stdout
        assert stdout is not None
        line = await stdout.readline()
        if not line:
            code = await self.procs[j].wait()
            raise ShardError(f"benchmark client process {j} exited with code {code}")
        msg: dict[str, Any] = orjson.loads(line)
        return msg

    async def close(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                with contextlib.suppress(Exception):
                    assert proc.stdin is not None
                    proc.stdin.write(b'{"exit": 1}\n')
                    proc.stdin.close()
        for proc in self.procs:
            try:
                await asyncio.wait_for(proc.wait(), 3)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        self.procs = []


class ShardError(RuntimeError):
    pass


def _merge(out: LevelRun, results: dict[int, dict[str, Any]]) -> None:
    out.records = [RequestRecord.from_wire(row) for r in results.values() for row in r["records"]]
    out.cpu_seconds = sum(r["cpu"] for r in results.values())
    out.finished = len(out.records)


def _pythonpath() -> str:
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    rest = os.environ.get("PYTHONPATH", "")
    return here + (os.pathsep + rest if rest else "")


# --- the child ---------------------------------------------------------------------------------
async def _child() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = sys.stdout.buffer

    def send(msg: dict[str, Any]) -> None:
        out.write(orjson.dumps(msg) + b"\n")
        out.flush()

    while True:
        line = await reader.readline()
        if not line:
            return
        msg = orjson.loads(line)
        if "exit" in msg:
            return
        if "level" in msg:
            await _child_level(msg["level"], reader, send)


async def _child_level(
    spec: dict[str, Any], reader: asyncio.StreamReader, send: Callable[[dict[str, Any]], None]
) -> None:
    try:
        plan = level_requests(spec, spec["shard"], spec["shards"])
    except Exception as err:
        send({"error": f"{type(err).__name__}: {err}"})
        return
    ready, go = asyncio.Event(), asyncio.Event()
    run = LevelRun()
    task = asyncio.ensure_future(run_plan(spec, plan, run, ready=ready, go=go))
    # the level sets `ready` whatever happens; a task that failed before it did is also an answer
    await asyncio.wait(
        [task, asyncio.ensure_future(ready.wait())], return_when=asyncio.FIRST_COMPLETED
    )
    send({"ready": 1})

    async def listen() -> None:
        while True:
            line = await reader.readline()
            if not line:
                task.cancel()
                return
            msg = orjson.loads(line)
            if "go" in msg:
                go.set()
            elif "stop" in msg:
                task.cancel()
                return

    async def report() -> None:
        while True:
            await asyncio.sleep(0.25)
            send({"done": run.finished})

    listener, reporter = asyncio.ensure_future(listen()), asyncio.ensure_future(report())
    failure = ""
    try:
        await task
    except asyncio.CancelledError:
        pass
    except Exception as err:
        failure = f"client process failed: {type(err).__name__}: {err}"
    for helper in (listener, reporter):
        helper.cancel()
    await asyncio.gather(listener, reporter, return_exceptions=True)  # before the next read
    if failure:
        send({"error": failure})
        return
    kept = [r for r in run.records if r.end > 0 and r.error_kind != "cancelled"]
    send({"result": {"records": [r.to_wire() for r in kept], "cpu": run.cpu_seconds}})


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    try:
        import uvloop

        uvloop.run(_child())
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        asyncio.run(_child())


if __name__ == "__main__":
    main()
