"""Claims on a drifting box, offline: the autopilot's planner on the simulator's truth (as
tests/test_paired.py runs it) on a box whose speed steps after the baseline's A/A pair - what the
conclusion claims against the paired truth of its pick. No servers; seconds. Run by hand:

    .venv/bin/python benchmarks/drift_sim.py [--seeds 3] [--max-tokens 128]

Each line: the box (speed of the first two sweeps -> the rest), the seed, the launches used, the
pick's paired truth (its objective over the baseline's, on a box that does not move), and the
conclusion's first clause (docs/statistics.md "Paired comparisons").
"""

from __future__ import annotations

import argparse

from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.history import Objective
from agent.brains.autopilot.offline import Noise, sim_truth, simulate
from agent.brains.autopilot.planner import Planner, Settings
from sim.space import DEFAULT_LEVELS, default_space
from tools.domain import stats
from tools.domain.space import SearchSpace

STEPS = ((0.5, 1.0), (0.8, 1.0), (1.0, 0.6), (1.0, 1.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    space = SearchSpace.parse(default_space(), check=engine_check("sim"))
    levels = tuple(DEFAULT_LEVELS)
    truth = sim_truth(max_tokens=args.max_tokens)
    planner = Planner(space, Settings(levels=levels, objective=Objective()))

    def objective(config: dict[str, object]) -> float:
        got = truth(config, levels)  # type: ignore[arg-type]
        assert not isinstance(got, str)
        return stats.geomean(got.values())

    for before, after in STEPS:
        for seed in range(3, 3 + args.seeds):

            def speed(measured: int, before: float = before, after: float = after) -> float:
                return before if measured < 2 else after

            h, finish = simulate(planner, truth, seed=seed, noise=Noise(), drift=speed)
            best = finish.best or space.baseline
            paired_truth = objective(best) / objective(space.baseline)
            said = finish.why.split("; the noise floor (")[0]
            print(
                f"{before:.1f}->{after:.1f} seed {seed} launches {h.launches_used():2d} "
                f"truth {paired_truth:.3f}x | {said}"
            )


if __name__ == "__main__":
    main()
