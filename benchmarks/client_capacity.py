"""Client capacity: measured vs ideal output throughput and the client's CPU per streamed chunk,
against the simulator in ideal mode (fixed TTFT and ITL, whatever the batch) on this machine.

    .venv/bin/python benchmarks/client_capacity.py                      # our client (agent bench)
    .venv/bin/python benchmarks/client_capacity.py --candidates all     # + httpx, aiohttp, raw
    .venv/bin/python benchmarks/client_capacity.py --processes 2 --levels 250,500
    .venv/bin/python benchmarks/client_capacity.py --floor              # per-wake-up CPU floor

Ideal: every request takes TTFT + (max_tokens - 1) x ITL, so C in flight give
C x max_tokens / (TTFT + (max_tokens - 1) x ITL) tok/s (C x 128 / 1.32 s by default).
Candidates (benchmarks/client_candidates.py): agent = tools.bench's sweep (child process,
uvloop), raw = the same protocol in this process on asyncio's loop, httpx-lines / httpx-scan /
aiohttp-lines / aiohttp-scan = the libraries with per-line json.loads or the lean scan.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from client_candidates import CANDIDATES  # noqa: E402

from tools.bench.metrics import compute_point  # noqa: E402
from tools.bench.random_prompts import bodies  # noqa: E402
from tools.bench.schema import Point, Workload  # noqa: E402
from tools.bench.sweep import SweepSpec, discover_model, run_sweep  # noqa: E402


class Server:
    def __init__(self, kind: str, ttft_ms: float, itl_ms: float) -> None:
        self.log = Path(tempfile.mkstemp(prefix="capacity-", suffix=".log")[1])
        if kind == "sim":
            cmd = [
                sys.executable,
                "-m",
                "sim",
                "--ideal-ttft-ms",
                str(ttft_ms),
                "--ideal-itl-ms",
                str(itl_ms),
                "--port",
                "0",
                "--load-seconds",
                "0",
                "--seed",
                "1",
            ]
            pattern, ready = r"http://[^:]+:(\d+)", "ready to roll"
        else:
            cmd = [
                sys.executable,
                str(ROOT / "benchmarks" / "client_fake_server.py"),
                "--ttft-ms",
                str(ttft_ms),
                "--itl-ms",
                str(itl_ms),
            ]
            pattern, ready = r"PORT (\d+)", "PORT"
        env = dict(os.environ, SIM_GPU_DIR=tempfile.mkdtemp(prefix="capacity-gpus-"))
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True
            )
        deadline = time.monotonic() + 60
        while ready not in (text := self.log.read_text()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"server did not start:\n{text[-2000:]}")
            time.sleep(0.05)
        self.port = int(re.search(pattern, text).group(1))  # type: ignore[union-attr]

    def cpu_seconds(self) -> float:
        """CPU of the server's whole process group (the sim has worker processes)."""
        total = 0.0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.proc.pid:
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.log.unlink(missing_ok=True)


async def agent_level(url: str, c: int, n: int, max_tokens: int, processes: int) -> Point:
    wl = Workload(
        model="",
        input_len=64,
        max_tokens=max_tokens,
        requests_per_level=n,
        warmup_requests=min(c, 10),
    )
    out = await run_sweep(SweepSpec(url=url, levels=[c], workload=wl, processes=processes))
    return Point.model_validate(out.points[0])  # the sweep's outcome holds flat dicts


async def candidate_level(name: str, url: str, c: int, n: int, max_tokens: int) -> Point:
    reqs = bodies(n, 0, await discover_model(url, "", 10), 64, max_tokens)
    run = await CANDIDATES[name](f"{url}/v1/completions", reqs, c)
    return compute_point(run.records, run.duration, c, max_tokens, cpu_seconds=run.cpu_seconds)


def floor_us() -> float:
    """CPU per wake-up of an empty uvloop protocol receiving one small message every 10 ms."""
    import uvloop

    class Sink(asyncio.Protocol):
        n = 0

        def data_received(self, data: bytes) -> None:
            Sink.n += 1

    async def main() -> float:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        code = (
            f"import socket,time\ns=socket.create_connection(('127.0.0.1',{port}))\n"
            "for i in range(500):\n s.send(b'data: x\\n\\n'); time.sleep(0.01)\n"
        )
        writer = subprocess.Popen([sys.executable, "-c", code])
        conn, _ = srv.accept()
        await asyncio.get_running_loop().connect_accepted_socket(Sink, conn)
        cpu0 = time.process_time()
        while writer.poll() is None:
            await asyncio.sleep(0.2)
        return (time.process_time() - cpu0) / max(Sink.n, 1) * 1e6

    return uvloop.run(main())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--levels", default="1,10,100,250")
    ap.add_argument(
        "--candidates",
        default="agent",
        help="comma list of agent," + ",".join(CANDIDATES) + " or 'all'",
    )
    ap.add_argument("--processes", type=int, default=1, help="client processes for 'agent'")
    ap.add_argument("--rounds", type=int, default=5, help="requests per level = rounds x C")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--ttft-ms", type=float, default=50)
    ap.add_argument("--itl-ms", type=float, default=10)
    ap.add_argument("--server", choices=["sim", "fake"], default="sim")
    ap.add_argument("--floor", action="store_true", help="only measure the wake-up floor")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    if args.floor:
        print(f"empty uvloop protocol, one message per 10 ms: {floor_us():.1f} us CPU per wake-up")
        return
    names = ["agent", *CANDIDATES] if args.candidates == "all" else args.candidates.split(",")
    levels = [int(x) for x in args.levels.split(",")]
    request_s = (args.ttft_ms + (args.max_tokens - 1) * args.itl_ms) / 1000
    server = Server(args.server, args.ttft_ms, args.itl_ms)
    url = f"http://127.0.0.1:{server.port}"
    rows = []
    print(
        f"server: {args.server} ideal mode, TTFT {args.ttft_ms:g} ms, ITL {args.itl_ms:g} ms, "
        f"{args.max_tokens} tokens ({request_s:.2f} s a request); {os.cpu_count()} CPUs"
    )
    print(
        f"{'client':14} {'C':>4} {'tok/s':>8} {'ideal':>8} {'%ideal':>7} {'cli CPU%':>8} "
        f"{'us/chunk':>8} {'srv CPU%':>8} {'TTFT ms':>8} {'ITL ms':>7}"
    )
    try:
        for name in names:
            for c in levels:
                n = c * args.rounds
                srv0, t0 = server.cpu_seconds(), time.monotonic()
                if name == "agent":
                    p = asyncio.run(agent_level(url, c, n, args.max_tokens, args.processes))
                else:
                    p = asyncio.run(candidate_level(name, url, c, n, args.max_tokens))
                srv = 100 * (server.cpu_seconds() - srv0) / (time.monotonic() - t0)
                ideal = c * args.max_tokens / request_s
                row = {
                    "client": name,
                    "C": c,
                    "output_throughput": p.output_throughput,
                    "ideal": ideal,
                    "percent_ideal": 100 * p.output_throughput / ideal,
                    "client_cpu_percent": p.client_cpu_percent,
                    "client_cpu_us_per_chunk": (p.model_extra or {})["client_cpu_us_per_chunk"],
                    "server_cpu_percent": srv,
                    "mean_ttft_ms": p.mean_ttft_ms,
                    "mean_itl_ms": p.mean_itl_ms,
                    "failed": p.failed,
                }
                rows.append(row)
                print(
                    f"{name:14} {c:>4} {row['output_throughput']:>8.0f} {ideal:>8.0f} "
                    f"{row['percent_ideal']:>6.1f}% {row['client_cpu_percent'] or 0:>8.1f} "
                    f"{row['client_cpu_us_per_chunk'] or 0:>8.1f} {srv:>8.1f} "
                    f"{row['mean_ttft_ms']:>8.1f} {row['mean_itl_ms']:>7.2f}"
                    + (f"  ({p.failed} failed)" if p.failed else ""),
                    flush=True,
                )
    finally:
        server.stop()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
