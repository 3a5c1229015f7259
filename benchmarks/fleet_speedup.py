"""One box against three: the default lab campaign run through the fleet (`agent run --fleet ray
--boxes N`, a local Ray cluster of N simulated boxes), wall time and the decisions made.

    .venv/bin/python -m benchmarks.fleet_speedup [--boxes 1,3] [--time-scale 20] [--runs-dir DIR]
    .venv/bin/python -m benchmarks.fleet_speedup --offline 8 [--boxes 1,3]


Each run is the CLI as a user runs it, cluster start and stop included. Printed per run: wall
time (the process), the campaign's own time (run_started -> run_finished), trials, boxes used,
the largest number of trials overlapping in time, the configurations measured and the
recommendation; then the ratio N boxes / 1 box of the campaign's time (run_started to
run_finished, the cluster's start and stop included). The two runs do not make exactly the same
decisions (trials end in another order, the noise differs, the batch confirms every leader), so
the output says how close they are - the same recommendation, trials, configurations measured
by both - and gives the ratio at exactly the same decisions too: the N-box campaign against its
own trials one after another on one box (estimated from the one-box run's time outside trials and
its median trial time per purpose). Target (issue 15): 3 boxes at most 0.6x the one-box wall
time. Figures go to docs/fleet.md.

`--offline SEEDS`: the same controller loop (AskTell's suggest_batch and tell,
agent/brains/autopilot/ask_tell.py) with no cluster, against the simulator's truth (1.5 % noise),
trials taking their typical lab times (a screen 9 s, a challenger's screen 4 s, a full sweep
25 s, +-10 %) and no CPU contention: the critical path of the planning alone, per seed - the batch
that held the free boxes (held), the one that screens ahead of a confirmation with the winner
proven in launch pairs alone (ahead), and the fleet's own proof since issue 46: crossovers, the
winner and the baseline at once on two boxes and then swapped, beside other work (crossover) -
and the median ratio, the time the fleet ran only re-validations or launch pairs, and in how many
seeds the winner was established by its paired comparisons.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
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
    cluster's start and stop included), the cluster's start (run_started -> fleet_started) and
    what follows the last trial (the stop, the conclusion), trials (purpose, seconds), boxes,
    overlap, decisions."""
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]

    def at(e: dict[str, Any]) -> float:
        return datetime.fromisoformat(e["ts"].replace("Z", "+00:00")).timestamp()

    trials = [e for e in events if e["type"] == "trial_ended"]
    started = [e for e in events if e["type"] == "trial_started"]
    purpose = {e["trial"]: e["purpose"] for e in started}
    fleet = next(e for e in events if e["type"] == "fleet_started")
    from tools.bench.schema import Recommendation

    rec = Recommendation.model_validate_json((run / "recommendation.json").read_bytes())
    return {
        "boxes": boxes,
        "wall_s": wall,
        "campaign_s": at(events[-1]) - at(events[0]),
        "start_s": at(fleet) - at(events[0]),
        "after_s": at(events[-1]) - at(trials[-1]) if trials else 0.0,
        "trial_s": [(purpose.get(t["trial"], "?"), t["ended"] - t["started"]) for t in trials],
        "trials": len(trials),
        "boxes_used": len({t["box"] for t in trials}),
        "overlap": max_overlap(trials),
        "configs": sorted({json.dumps(e["flags"], sort_keys=True) for e in started}),
        "recommended": rec.config,
        "floor": rec.noise_floor,
        "run": str(run),
    }


def same_decisions(r: dict[str, Any], one: dict[str, Any]) -> float:
    """The one-box time of `r`'s very trials (the same decisions), estimated from the one-box
    run: its time outside trials (the cluster's start and stop, the controller), plus each of
    `r`'s trials at the one-box run's median time for a trial of that purpose (its own time
    when the one-box run had none)."""
    import statistics

    kinds: dict[str, list[float]] = {}
    for kind, seconds in one["trial_s"]:
        kinds.setdefault(kind, []).append(seconds)
    outside = one["campaign_s"] - sum(seconds for _, seconds in one["trial_s"])
    each = [statistics.median(kinds[k]) if k in kinds else sec for k, sec in r["trial_s"]]
    return outside + sum(each)


def max_overlap(trials: list[dict[str, Any]]) -> int:
    edges = sorted([(t["started"], 1) for t in trials] + [(t["ended"], -1) for t in trials])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


SCREEN_S, CHALLENGER_S, SWEEP_S = 9.0, 4.0, 25.0  # a trial's time in the lab at time scale 20


@dataclass(frozen=True)
class Model:
    """One offline campaign: its time, trials, share of the optimum, and the same trials one
    after another (the box time: what one box takes for these very decisions)."""

    time: float
    trials: int
    share: float
    serial: float
    alone: float  # the time only re-validations or launch pairs run (steps.SERIAL), nothing else
    proven: bool  # the winner established by its paired comparisons (launch pairs, crossovers)


def offline(boxes: int, seed: int, screen_ahead: bool = True, crossover: bool = False) -> Model:
    """The batched campaign on `boxes` slots, trials ending when their modelled time is up;
    `crossover`: the winner proven in crossovers (two boxes at once, beside other work) instead
    of launch pairs alone, the box of a period's half that ended held until the other ends (as
    agent/fleet/controller.py holds it)."""
    import random

    from agent.brains.autopilot.ask_tell import AskTell, Measured, NotStarted, Sweep
    from agent.brains.autopilot.engine_limits import engine_check
    from agent.brains.autopilot.offline import sim_truth
    from agent.brains.autopilot.planner import Experiment, Finish, Planner, Settings
    from agent.brains.autopilot.steps import SERIAL
    from sim.space import DEFAULT_LEVELS, default_space
    from tools.domain import lab_truth
    from tools.domain.space import SearchSpace

    space = SearchSpace.parse(default_space(), check=engine_check("sim"))
    planner = Planner(space, Settings(levels=tuple(DEFAULT_LEVELS), crossover=crossover))
    search, rng = AskTell(planner), random.Random(seed)
    truth, optimum = sim_truth(), lab_truth.optimum(default_space())[1]
    now, trials, serial, alone = 0.0, 0, 0.0, 0.0
    flight = list[tuple[float, int, Experiment]]()
    ended = set[int]()  # the crossover periods a half of which came back
    while True:
        held = sum(1 for _, _, e in flight if e.period and e.period in ended)
        free = boxes - len(flight) - held
        steps = search.suggest_batch(free, screen_ahead)  # beside the trials told placed
        if steps and isinstance(steps[0], Finish):
            best = steps[0].best
            share = lab_truth.config_value(best) / optimum if best else 0.0
            proven = steps[0].paired is not None and steps[0].established
            return Model(now, trials, share, serial, alone, proven)
        for step in steps:
            if isinstance(step, Experiment):
                trials += 1
                took = modelled(step) * rng.uniform(0.9, 1.1)
                serial += took
                flight.append((now + took, trials, step))
                search.placed(step)
        flight.sort(key=lambda f: f[:2])
        if all(f[2].purpose in SERIAL for f in flight):  # the fleet waits on them alone
            alone += flight[0][0] - now
        now, _, e = flight.pop(0)
        ended.add(e.period)
        got = truth(e.config, e.levels)
        if isinstance(got, str):
            search.tell(e, NotStarted(got))
        else:
            sweep = Sweep({c: v * rng.gauss(1, 0.015) for c, v in got.items()})
            search.tell(e, Measured((sweep,), e.label))


def modelled(step: Any) -> float:
    """A trial's typical time in the lab: a challenger screens the two lowest levels (fast)."""
    return SWEEP_S if step.full else CHALLENGER_S if step.purpose == "challenger" else SCREEN_S


def main_offline(counts: list[int], seeds: int) -> int:
    """Per seed and box count, the batch that holds free boxes while a confirmation runs (the
    previous one) beside the one that screens ahead (now), both against one box; then the
    median, min and max of each ratio. "Same trials": the campaign's time against the same
    trials one after another - the speedup at exactly the same decisions."""
    import statistics

    kinds = {"held": (False, False), "ahead": (True, False), "crossover": (True, True)}
    ratios: dict[tuple[int, str], list[float]] = {}
    floors: dict[tuple[int, str], list[float]] = {}  # the trials run alone / the one-box time
    same: dict[tuple[int, str], list[float]] = {}
    shares: dict[tuple[int, str], list[float]] = {}
    proven: dict[tuple[int, str], list[bool]] = {}
    for seed in range(seeds):
        one = offline(counts[0], seed)
        parts = [f"{counts[0]} box(es) {one.time:.0f} s, {one.trials} trials, {one.share:.1%}"]
        for n in counts[1:]:
            for kind, (flag, cross) in kinds.items():
                m = offline(n, seed, flag, cross)
                ratios.setdefault((n, kind), []).append(m.time / one.time)
                floors.setdefault((n, kind), []).append(m.alone / one.time)
                same.setdefault((n, kind), []).append(m.time / m.serial)
                shares.setdefault((n, kind), []).append(m.share)
                proven.setdefault((n, kind), []).append(m.proven)
                parts.append(
                    f"{n} {kind} {m.time:.0f} s ({m.time / one.time:.2f}x), {m.trials} trials, "
                    f"{m.share:.1%}"
                )
        print(f"seed {seed}: " + "; ".join(parts), flush=True)
    print(f"over {seeds} seeds, median (min-max) of the model time:")
    for (n, kind), rs in ratios.items():
        ss, qs = same[(n, kind)], shares[(n, kind)]
        what = {
            "held": "boxes held (before)",
            "ahead": "screens ahead of a confirmation, launch pairs alone",
            "crossover": "screens ahead, the winner proven in crossovers beside other work",
        }[kind]
        print(
            f"  {n} boxes, {what}: {statistics.median(rs):.2f}x (min {min(rs):.2f}, "
            f"max {max(rs):.2f}) the one-box time; {statistics.median(ss):.2f}x "
            f"(min {min(ss):.2f}, max {max(ss):.2f}) its own trials one after another; "
            f"{min(qs):.1%}-{max(qs):.1%} of the optimum; the winner established by its "
            f"paired comparisons in {sum(proven[(n, kind)])} of {seeds} seeds"
        )
        fs = floors[(n, kind)]
        print(
            f"    of which only re-validations or launch pairs ran (nothing beside them: no box "
            f"count shortens it): {statistics.median(fs):.2f}x (min {min(fs):.2f}, max "
            f"{max(fs):.2f}) the one-box time"
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
    counts = [int(b) for b in args.boxes.split(",")]
    done = dict(zip(counts, args.runs.split(","), strict=False)) if args.runs else {}
    fresh = [n for n in counts if n not in done]  # to run now; the others are read again
    runs_dir: Path = args.runs_dir or Path(
        tempfile.mkdtemp(prefix="fleet-speedup-") if fresh else tempfile.gettempdir()
    )
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
        print(
            f"{r['boxes']} boxes / {base['boxes']}: {r['campaign_s'] / base['campaign_s']:.2f}x "
            "the campaign's time (the issue's figure)"
        )
        serial = same_decisions(r, base)
        print(
            f"  at the same decisions: {r['campaign_s'] / serial:.2f}x the one-box time of its "
            f"own {r['trials']} trials one after another (estimated at {serial:.0f} s from the "
            f"one-box run's time outside trials and its median trial time per purpose)"
        )
        one, many = set(base["configs"]), set(r["configs"])
        rec = r["recommended"] == base["recommended"]
        print(
            f"  same recommendation: {'yes' if rec else 'no'}; trials {base['trials']} and "
            f"{r['trials']}; configurations measured by both {len(one & many)}, by one run "
            f"only {len(one ^ many)}; same configurations measured: "
            f"{'yes' if one == many else 'no'}"
        )
    for r in out:
        print(
            f"  {r['boxes']} box(es): the cluster's start {r['start_s']:.1f} s (run_started -> "
            f"fleet_started), after the last trial {r['after_s']:.1f} s (stop, conclusion)"
        )
    if fresh:
        print(f"runs: {runs_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
