"""The supervisor's time-left estimate (agent/view/eta.py) against the time a finished run really
had left, at each benchmark (at most one line per 20 s of the run): docs/supervising.md quotes it.

    agent run --goal "beat baseline" --runs-dir /tmp/eta --run-id lab
    python -m benchmarks.eta_accuracy /tmp/eta/lab

The estimate is computed as `agent watch` would have drawn it then: from the todo list and the
events up to that point.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent.report.measured import parse_ts
from agent.view.eta import estimate
from state.events import read_events
from state.fold import fold


def main(run: Path) -> None:
    events = read_events(run / "events.jsonl").events
    stamps = [parse_ts(e["ts"]) for e in events]
    start, end = stamps[0], stamps[-1]
    assert start is not None and end is not None
    print(f"run {(end - start).total_seconds() / 60:.1f} min")
    state, last = fold([]), -1e9
    for i, (e, at) in enumerate(zip(events, stamps, strict=True)):
        state.apply(e)
        if e["type"] != "benchmark" or at is None:
            continue
        t = (at - start).total_seconds()
        if t - last < 20:
            continue
        last = t
        eta = estimate(state.todos, events[: i + 1])
        if eta is not None:
            left = (end - at).total_seconds()
            print(
                f"at {t:4.0f} s: {left:4.0f} s really left, estimated {eta.seconds:4.0f} s "
                f"({eta.experiments} experiments, {eta.open_items:g} other open todos)"
            )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
