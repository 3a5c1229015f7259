"""The share of the bandwidth floor as the agent measures it against the simulator's own.

    .venv/bin/python benchmarks/floor_share.py [--time-scale 20] [--levels 1,2,...]
                                               [--input-len 512] [--max-tokens 128]

Starts the simulator (noise 0) with the reference space's baseline, then with its optimum, sweeps
each with the agent's own client (tools/bench/sweep.py: the floor from the server's /server_info,
tools/bench/floor.py) and prints each level's measured share of the floor against the
simulator's own (sim.truth.floor_share: its modelled throughput over its floor) and their
difference. A loaded machine slows the simulator down, so the measured share can only fall short
of the modelled one; docs/physics.md records a run.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from sim_client import start_server

from sim.space import DEFAULT_BASE_FLAGS, DEFAULT_LEVELS, default_space
from sim.truth import baseline_of, floor_share, model_of
from tools.bench.schema import Workload
from tools.bench.sweep import SweepSpec, run_sweep
from tools.domain import lab_truth


def argv_of(config: dict[str, Any]) -> list[str]:
    return [
        w for k, v in config.items() if v is not False for w in ([k] if v is True else [k, str(v)])
    ]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--time-scale", type=float, default=20.0)
    p.add_argument("--levels", default=",".join(map(str, DEFAULT_LEVELS)))
    p.add_argument("--input-len", type=int, default=512)
    p.add_argument("--max-tokens", type=int, default=128)
    ns = p.parse_args()
    levels = [int(x) for x in ns.levels.split(",")]
    space = default_space()
    optimum, _ = lab_truth.optimum(space, max_tokens=ns.max_tokens)
    print(f"time scale {ns.time_scale:g}, {ns.input_len} in / {ns.max_tokens} out, noise 0")
    print(
        f"{'config':>9} {'C':>4} {'tok/s':>8} {'floor':>8} {'measured':>9} {'own':>7} {'diff':>7}"
    )
    for name, config in (("baseline", baseline_of(space)), ("optimum", optimum)):
        flags = [*DEFAULT_BASE_FLAGS, *argv_of(config)]
        server = start_server([*flags, "--time-scale", f"{ns.time_scale:g}", "--noise", "0"])
        try:
            wl = Workload(input_len=ns.input_len, max_tokens=ns.max_tokens)
            url = f"http://127.0.0.1:{server.port}"
            outcome = asyncio.run(run_sweep(SweepSpec(url=url, levels=levels, workload=wl)))
        finally:
            server.stop()
        model = model_of(config)
        for point in outcome.points:
            c = point["max_concurrency"]
            own = floor_share(model, c, ns.input_len, ns.max_tokens)
            measured = point.get("floor_share") or 0.0
            print(
                f"{name:>9} {c:>4} {point['output_throughput']:>8.1f} {point['floor_tok_s']:>8.0f} "
                f"{measured:>8.2%} {own:>7.2%} {100 * (measured / own - 1):>+6.1f}%",
                flush=True,
            )


if __name__ == "__main__":
    main()
