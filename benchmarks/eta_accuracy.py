"""The supervisor's time-left estimate (agent/view/eta.py) against the time a finished run really
had left, at each benchmark (at most one line per 20 s of the run): docs/supervising.md quotes it.

    agent run --goal "beat baseline" --runs-dir /tmp/eta --run-id lab
    python -m benchmarks.eta_accuracy /tmp/eta/lab [MORE_RUNS ...] [--eta OTHER/agent/view/eta.py]

A run is a run folder or its events file (a recorded session: tests/sessions/autopilot/lab.jsonl).

The estimate is computed as `agent watch` would have drawn it then: from the todo list and the
events up to that point. Per run, and over all the runs given, it prints the median absolute error
of the time left (|estimated - real| / real) at the points once a quarter of the run was done, and
the largest jump between two consecutive estimates less the time between them. `--eta FILE`
imports the estimate from another copy of eta.py (an older tree: the figure before a change).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import statistics
import sys
from pathlib import Path
from types import ModuleType

from agent.report.measured import parse_ts
from state.events import read_events
from state.fold import fold
from state.sweeps import count


def load_eta(path: Path | None) -> ModuleType:
    if path is None:
        import agent.view.eta

        return agent.view.eta
    spec = importlib.util.spec_from_file_location("eta_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def one_run(run: Path, eta: ModuleType) -> tuple[list[float], float]:
    """(relative errors once a quarter of the run is done, the largest jump in seconds)."""
    events = read_events(run if run.is_file() else run / "events.jsonl").events
    stamps = [parse_ts(e["ts"]) for e in events]
    start, end = stamps[0], stamps[-1]
    assert start is not None and end is not None
    total = (end - start).total_seconds()
    print(f"{run}: {total / 60:.1f} min")
    state, last = fold([]), -1e9
    errors: list[float] = []
    previous: tuple[float, float] | None = None  # (t, estimate) of the last estimate
    jump = 0.0
    for i, (e, at) in enumerate(zip(events, stamps, strict=True)):
        state.apply(e)
        if e["type"] != "benchmark" or at is None:
            continue
        t = (at - start).total_seconds()
        seen = events[: i + 1]
        if "budget_s" in inspect.signature(eta.estimate).parameters:  # an older eta.py has none
            estimate = eta.estimate(state.todos, seen, budget_s=eta.budget_left_s(state, seen))
        else:
            estimate = eta.estimate(state.todos, seen)
        if estimate is None:
            continue
        if previous is not None:  # an estimate should fall by the time gone, no more, no less
            jump = max(jump, abs(estimate.seconds - (previous[1] - (t - previous[0]))))
        previous = (t, estimate.seconds)
        left = (end - at).total_seconds()
        if t >= total / 4 and left > 0:
            errors.append(abs(estimate.seconds - left) / left)
        if t - last < 20:
            continue
        last = t
        print(
            f"  at {t:4.0f} s: {left:4.0f} s really left, estimated {estimate.seconds:4.0f} s "
            f"(experiments: {estimate.experiments}, other open todos: {estimate.open_items:g})"
        )
    median = statistics.median(errors) if errors else float("nan")
    print(f"  median error once a quarter was done: {median:.0%}; largest jump {jump:.0f} s")
    return errors, jump


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.eta_accuracy")
    ap.add_argument("runs", nargs="+", type=Path, help="finished runs: folders or events files")
    ap.add_argument("--eta", type=Path, help="another eta.py to measure (default: this tree's)")
    args = ap.parse_args(argv)
    for run in args.runs:
        if not (run.is_file() or (run / "events.jsonl").is_file()):
            ap.error(f"{run}: neither an events file nor a run folder with events.jsonl")
    eta = load_eta(args.eta)
    errors: list[float] = []
    medians, jumps = [], []
    for run in args.runs:
        errs, jump = one_run(run, eta)
        errors += errs
        medians.append(statistics.median(errs) if errs else float("nan"))
        jumps.append(jump)
    print(
        f"{count(len(args.runs), 'run')}: median error once a quarter was done "
        f"{statistics.median(errors):.0%} over all points (per run: "
        f"{', '.join(f'{m:.0%}' for m in medians)}); largest jump "
        f"{max(jumps):.0f} s (per run: {', '.join(f'{j:.0f}' for j in jumps)})"
    )


if __name__ == "__main__":
    main()
