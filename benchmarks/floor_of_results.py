"""Each level's floor and share, read again for result files already measured, against the box
an agent.toml's [hardware] states (docs/physics.md): the agent's own path - the flags each
result's server ran with (its command and its flags under test, as its engine's profile spells
them: tools/bench/floor.py served_of), the floor of each point from its own mean lengths
(with_floor) - without starting a server.

    .venv/bin/python benchmarks/floor_of_results.py AGENT_TOML RESULT.json [RESULT.json ...]
                                                    [--levels 1,2]

Prints one row a result and level: the dtype it served in, output tok/s, the floor, the share
and the bound. Nothing is written.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from tools.bench import results
from tools.bench.floor import served_of, stated_physics, with_floor
from tools.domain.config import load_config
from tools.servers.profiles import engine_for


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("agent_toml", type=Path)
    p.add_argument("results", type=Path, nargs="+")
    p.add_argument("--levels", default="", help="only these levels (default: every one)")
    args = p.parse_args()
    config = load_config(args.agent_toml)
    precision = engine_for(config).profile.precision
    levels = {int(x) for x in args.levels.split(",") if x}
    print("result | dtype | C | out tok/s | floor tok/s | share | bound")
    for path in args.results:
        r = results.load(str(path))
        served = served_of(precision, r.server.command, r.server.flags)
        physics, why = asyncio.run(stated_physics(config.hardware, 1, None, served=served))
        if physics is None:
            print(f"{path.name}: no floor: {why}")
            continue
        for point in r.points:
            if levels and point.max_concurrency not in levels:
                continue
            q = with_floor(point, physics, r.workload)
            share = "-" if q.floor_share is None else f"{q.floor_share:.1%}"
            print(
                f"{path.name} | {physics.model.weights_dtype or '-'} | {q.max_concurrency} | "
                f"{q.output_throughput:.1f} | {q.floor_tok_s} | {share} | {q.floor_bound}"
            )


if __name__ == "__main__":
    main()
