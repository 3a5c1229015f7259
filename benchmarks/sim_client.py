"""A lean raw-asyncio streaming client and a server launcher, for the sim_* benchmarks.

Not the project's benchmark client (tools/bench): just enough to load the simulator hard
with little CPU - HTTP/1.1 keep-alive, chunked SSE read frame by frame, usage parsed once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim.space import DEFAULT_BASE_FLAGS  # noqa: E402

REFERENCE_FLAGS = [
    *DEFAULT_BASE_FLAGS,
    "--attention-backend",
    "flashinfer",
    "--enable-flashinfer-allreduce-fusion",
    "--cuda-graph-max-bs",
    "128",
]
EAGLE3 = ["--speculative-algorithm", "EAGLE3"]


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    def cpu_seconds(self) -> float:
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def start_server(flags: list[str], timeout: float = 60.0) -> Server:
    log = Path(tempfile.mkstemp(prefix="sim-bench-", suffix=".log")[1])
    env = dict(os.environ, SIM_GPU_DIR=tempfile.mkdtemp(prefix="sim-gpus-"))
    cmd = [sys.executable, "-m", "sim", *flags, "--port", "0", "--load-seconds", "0"]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text()
        if "fired up and ready to roll" in text:
            port = int(re.search(r"http://[^:]+:(\d+)", text).group(1))  # type: ignore[union-attr]
            return Server(proc, port, log)
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {text[-2000:]}")
        time.sleep(0.05)
    raise RuntimeError("server did not come up")


@dataclass
class Result:
    ttft: float = 0.0
    e2el: float = 0.0
    tokens: int = 0
    chunks: int = 0


@dataclass
class Level:
    concurrency: int
    duration: float
    results: list[Result] = field(default_factory=list)

    @property
    def output_throughput(self) -> float:
        return sum(r.tokens for r in self.results) / self.duration

    @property
    def chunks(self) -> int:
        return sum(r.chunks for r in self.results)

    def mean_tpot_ms(self) -> float:
        tp = [(r.e2el - r.ttft) / (r.tokens - 1) for r in self.results if r.tokens > 1]
        return 1000 * sum(tp) / max(1, len(tp))

    def mean_ttft_ms(self) -> float:
        return 1000 * sum(r.ttft for r in self.results) / max(1, len(self.results))


def request_bytes(port: int, input_len: int, max_tokens: int) -> bytes:
    body = orjson.dumps(
        {
            "prompt": " ".join(["hello"] * input_len),
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def stream_one(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: bytes
) -> Result:
    r = Result()
    start = time.perf_counter()
    writer.write(req)
    await reader.readuntil(b"\r\n\r\n")
    last = start
    while True:
        size = int((await reader.readline()).split(b";")[0], 16)
        if size == 0:
            await reader.readline()
            break
        frame = await reader.readexactly(size + 2)
        if b'"choices":[{' in frame:
            last = time.perf_counter()
            if not r.chunks:
                r.ttft = last - start
            r.chunks += 1
        elif b'"usage":{' in frame:
            r.tokens = orjson.loads(frame[6:].strip())["usage"]["completion_tokens"]
    r.e2el = last - start
    return r


async def run_level(
    port: int, concurrency: int, requests: int, input_len: int, max_tokens: int
) -> Level:
    req = request_bytes(port, input_len, max_tokens)
    left = [requests]
    level = Level(concurrency, 0.0)

    async def client() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while left[0] > 0:
                left[0] -= 1
                level.results.append(await stream_one(reader, writer, req))
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    level.duration = time.perf_counter() - start
    return level
