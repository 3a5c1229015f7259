"""Measured vs modelled throughput of the simulator, C = 1..250, at a given time scale.

    .venv/bin/python benchmarks/sim_accuracy.py [--time-scale 1] [--spec] [--levels 1,2,...]

Starts the simulator (noise 0) with the reference flags, sweeps a closed loop per level and
prints measured output tok/s (divided by the time scale: model time) against sim.truth, the
relative error (the server's own overhead) and the server's CPU. Figures go in docs/sim.md.
"""

from __future__ import annotations

import argparse
import asyncio

from sim_client import EAGLE3, REFERENCE_FLAGS, run_level, start_server

from sim.flags import parse_server_args
from sim.model import Model
from sim.truth import latency, level_throughput


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--spec", action="store_true", help="EAGLE-3 (3, 1, 4) instead of the baseline")
    p.add_argument("--levels", default="1,2,5,10,30,70,100,250")
    p.add_argument("--input-len", type=int, default=512)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--rounds", type=int, default=2, help="requests per client per level")
    ns = p.parse_args()
    flags = [*REFERENCE_FLAGS, *(EAGLE3 if ns.spec else [])]
    flags += ["--time-scale", f"{ns.time_scale:g}", "--noise", "0", "--seed", "1"]
    model = Model(parse_server_args(flags))
    server = start_server(flags)
    scale = ns.time_scale
    print(
        f"time scale {scale:g}, {'EAGLE-3' if ns.spec else 'baseline'}, "
        f"{ns.input_len} in / {ns.max_tokens} out, {ns.rounds} requests per client"
    )
    print(
        f"{'C':>4} {'measured':>9} {'modelled':>9} {'error':>7} {'TPOT ms':>8} {'model':>7} "
        f"{'TTFT ms':>8} {'server CPU':>10}"
    )
    try:
        for c in [int(x) for x in ns.levels.split(",")]:
            cpu0 = server.cpu_seconds()
            level = asyncio.run(
                run_level(server.port, c, c * ns.rounds, ns.input_len, ns.max_tokens)
            )
            cpu = (server.cpu_seconds() - cpu0) / level.duration
            measured = level.output_throughput / scale
            modelled = level_throughput(model, c, ns.input_len, ns.max_tokens)
            lat = latency(model, c, ns.input_len, ns.max_tokens)
            error = 100 * (measured / modelled - 1)
            print(
                f"{c:>4} {measured:>9.1f} {modelled:>9.1f} {error:>6.2f}% "
                f"{level.mean_tpot_ms() * scale:>8.2f} {lat['tpot_ms']:>7.2f} "
                f"{level.mean_ttft_ms() * scale:>8.1f} {100 * cpu:>9.1f}%",
                flush=True,
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
