"""Ideal mode capacity: chunks per second the simulator streams, and its CPU, C = 1..250.

    .venv/bin/python benchmarks/sim_ideal.py [--ttft-ms 50] [--itl-ms 10] [--max-tokens 128]

Every request streams at once (closed loop, C clients); ideal output throughput is
C * max_tokens / (ttft + (max_tokens - 1) * itl). The server must keep up (>= 20,000 chunks/s
at C=250, ITL 10 ms) within one core, leaving the other core to the client.
"""

from __future__ import annotations

import argparse
import asyncio
import resource

from sim_client import run_level, start_server


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--levels", default="1,10,100,250")
    p.add_argument("--rounds", type=int, default=4)
    ns = p.parse_args()
    server = start_server(
        ["--ideal-ttft-ms", f"{ns.ttft_ms:g}", "--ideal-itl-ms", f"{ns.itl_ms:g}"]
    )
    per_request = (ns.ttft_ms + (ns.max_tokens - 1) * ns.itl_ms) / 1000
    print(f"ideal mode: TTFT {ns.ttft_ms:g} ms, ITL {ns.itl_ms:g} ms, {ns.max_tokens} tokens")
    print(
        f"{'C':>4} {'tok/s':>9} {'ideal':>9} {'of ideal':>8} {'chunks/s':>9} {'ITL ms':>7} "
        f"{'server CPU':>10} {'client CPU':>10}"
    )
    try:
        for c in [int(x) for x in ns.levels.split(",")]:
            cpu0 = server.cpu_seconds()
            me0 = resource.getrusage(resource.RUSAGE_SELF)
            level = asyncio.run(run_level(server.port, c, c * ns.rounds, 8, ns.max_tokens))
            me1 = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (server.cpu_seconds() - cpu0) / level.duration
            client = (me1.ru_utime + me1.ru_stime - me0.ru_utime - me0.ru_stime) / level.duration
            ideal = c * ns.max_tokens / per_request
            tput = level.output_throughput
            print(
                f"{c:>4} {tput:>9.0f} {ideal:>9.0f} {100 * tput / ideal:>7.1f}% "
                f"{level.chunks / level.duration:>9.0f} {level.mean_tpot_ms():>7.2f} "
                f"{100 * cpu:>9.1f}% {100 * client:>9.1f}%",
                flush=True,
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
