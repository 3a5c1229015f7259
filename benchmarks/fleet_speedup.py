"""One box against three: the default lab campaign run through the fleet (`agent run --fleet ray
--boxes N`, a local Ray cluster of N simulated boxes), wall time and the decisions made.

    .venv/bin/python -m benchmarks.fleet_speedup [--boxes 1,3] [--time-scale 20] [--runs-dir DIR]
    .venv/bin/python -m benchmarks.fleet_speedup --offline 8 [--boxes 1,3]


Each run is the CLI as a user runs it, cluster start and stop included. Printed per run: wall
time (the process), the campaign's own time (run_started -> run_finished), trials, boxes used,
the largest number of trials overlapping in time, the configurations measured and the
recommendation; then the ratio N boxes / 1 box of the campaign's time (run_started to
run_finished, the cluster's start and stop included). "The same decisions": the same configurations
measured and the same recommendation (the order differs, as trials end in another order).
Target (issue 15): 3 boxes at most 0.6x the one-box wall time. Figures go to docs/fleet.md.

`--offline SEEDS`: the same controller loop (plan_batch, agent/brains/autopilot/batch.py) with no
cluster, against the simulator's truth (1.5 % noise), trials taking their typical lab times (a
screen 9 s, a full sweep 25 s, +-10 %) and no CPU contention: the critical path of the planning
alone, per seed, and the median ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any


def run_once(boxes: int, runs_dir: Path, scale: float) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "RAY_ADDRESS")}
    env["AGENT_LAB_TIME_SCALE"] = f"{scale:g}"
    run_id = f"fleet-{boxes}box-{int(time.time())}"
    argv = [sys.executable, "-m", "agent.cli", "run", "--goal", "beat baseline"]
    argv += ["--runs-dir", str(runs_dir), "--run-id", run_id, "--fleet", "ray"]
    start = time.monotonic()
    proc = subprocess.run([*argv, "--boxes", str(boxes)], env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"{boxes} box(es): exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return summary(runs_dir / run_id, boxes, wall)


def summary(run: Path, boxes: int, wall: float | None = None) -> dict[str, Any]:
    """What a fleet run folder says: its campaign time (run_started -> run_finished, the
    cluster's start and stop included), trials, boxes, overlap, decisions."""
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    ts = [datetime.fromisoformat(e["ts"].replace("Z", "+00:00")) for e in (events[0], events[-1])]
    trials = [e for e in events if e["type"] == "trial_ended"]
    started = [e for e in events if e["type"] == "trial_started"]
    rec = json.loads((run / "recommendation.json").read_text())
    return {
        "boxes": boxes,
        "wall_s": wall,
        "campaign_s": (ts[1] - ts[0]).total_seconds(),
        "trials": len(trials),
        "boxes_used": len({t["box"] for t in trials}),
        "overlap": max_overlap(trials),
        "configs": sorted({json.dumps(e["flags"], sort_keys=True) for e in started}),
        "recommended": rec["config"],
        "floor": rec.get("noise_floor"),
        "run": str(run),
    }


def max_overlap(trials: list[dict[str, Any]]) -> int:
    edges = sorted([(t["started"], 1) for t in trials] + [(t["ended"], -1) for t in trials])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


SCREEN_S, SWEEP_S = 9.0, 25.0  # a trial's time in the default lab at time scale 20


def offline(boxes: int, seed: int) -> tuple[float, int, float]:
    """(model time, trials, the recommendation's share of the optimum) of the batched campaign
    on `boxes` slots, trials ending when their modelled time is up."""
    import random

    from agent.brains.autopilot.batch import plan_batch, record_trial
    from agent.brains.autopilot.engine_limits import engine_check
    from agent.brains.autopilot.history import History
    from agent.brains.autopilot.offline import sim_truth
    from agent.brains.autopilot.planner import Experiment, Finish, Planner, Settings
    from sim.space import DEFAULT_LEVELS, default_space
    from tools.domain import lab_truth
    from tools.domain.space import SearchSpace

    space = SearchSpace.parse(default_space(), check=engine_check("sim"))
    planner = Planner(space, Settings(levels=tuple(DEFAULT_LEVELS)))
    h, rng = History(space), random.Random(seed)
    truth, optimum = sim_truth(), lab_truth.optimum(default_space())[1]
    now, trials, flight = 0.0, 0, list[tuple[float, int, Experiment]]()
    while True:
        steps = plan_batch(planner, h, [e for _, _, e in flight], boxes - len(flight))
        if steps and isinstance(steps[0], Finish):
            best = steps[0].best
            return now, trials, lab_truth.config_value(best) / optimum if best else 0.0
        for step in steps:
            if isinstance(step, Experiment):
                trials += 1
                took = (SWEEP_S if step.full else SCREEN_S) * rng.uniform(0.9, 1.1)
                flight.append((now + took, trials, step))
        flight.sort(key=lambda f: f[:2])
        now, _, e = flight.pop(0)
        got = truth(e.config, e.levels)
        if not isinstance(got, str):
            got = {c: v * rng.gauss(1, 0.015) for c, v in got.items()}
        record_trial(h, e, got)


def main_offline(counts: list[int], seeds: int) -> int:
    import statistics

    ratios: dict[int, list[float]] = {n: [] for n in counts[1:]}
    for seed in range(seeds):
        runs = {n: offline(n, seed) for n in counts}
        t0 = runs[counts[0]][0]
        line = "; ".join(
            f"{n} box(es) {t:.0f} s, {k} trials, {q:.1%} of the optimum"
            for n, (t, k, q) in runs.items()
        )
        for n in counts[1:]:
            ratios[n].append(runs[n][0] / t0)
        print(f"seed {seed}: {line}", flush=True)
    for n, rs in ratios.items():
        print(
            f"{n} boxes / {counts[0]}: median {statistics.median(rs):.2f}x "
            f"(min {min(rs):.2f}, max {max(rs):.2f}) of the model time over {seeds} seeds"
        )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--boxes", default="1,3", help="box counts to compare; the first is the base")
    ap.add_argument("--time-scale", type=float, default=20.0, help="the simulator's time scale")
    ap.add_argument("--runs-dir", type=Path, help="default: a temporary folder")
    ap.add_argument("--runs", help="run folders made before, one per --boxes entry, to read again")
    ap.add_argument("--offline", type=int, metavar="SEEDS", help="the offline model, no cluster")
    args = ap.parse_args()
    if args.offline:
        return main_offline([int(b) for b in args.boxes.split(",")], args.offline)
    runs_dir = args.runs_dir or Path(tempfile.mkdtemp(prefix="fleet-speedup-"))
    counts = [int(b) for b in args.boxes.split(",")]
    done = dict(zip(counts, args.runs.split(","), strict=False)) if args.runs else {}
    out = []
    for n in counts:
        # a run made before (--runs): read its folder again
        r = summary(Path(done[n]), n) if n in done else run_once(n, runs_dir, args.time_scale)
        out.append(r)
        wall = f"wall {r['wall_s']:.0f} s, " if r["wall_s"] is not None else ""
        print(
            f"{n} box(es): {wall}campaign {r['campaign_s']:.0f} s, "
            f"{r['trials']} trials on {r['boxes_used']} box(es), at most {r['overlap']} at once; "
            f"recommends {json.dumps(r['recommended'], sort_keys=True)}",
            flush=True,
        )
    base = out[0]
    for r in out[1:]:
        same = r["configs"] == base["configs"] and r["recommended"] == base["recommended"]
        print(
            f"{r['boxes']} boxes / {base['boxes']}: {r['campaign_s'] / base['campaign_s']:.2f}x "
            "the campaign's time; same configurations "
            f"measured and same recommendation: {'yes' if same else 'no'}"
        )
        if not same:
            only = set(r["configs"]) ^ set(base["configs"])
            print(f"  configurations measured by one run only: {len(only)}")
    print(f"runs: {runs_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
