"""One merge rule for sweeps (state/sweeps.py `continued`): a benchmark continues the latest sweep
of its launch when the label is the same and it measures no level that sweep has. The events'
count, the autopilot's History and the statistics' result files read the same sweeps from it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from agent.brains.autopilot.ask_tell import AskTell, Measured, Sweep
from agent.brains.autopilot.observe import history_of_run
from agent.brains.autopilot.planner import Experiment, Planner, Settings
from state.events import read_events
from state.sweeps import continued, grouped, sweeps
from tests.test_ask_tell import FA3, LEVELS, SPACE
from tools.bench import results
from tools.bench.schema import BenchResult

LAB = Path(__file__).parent / "sessions" / "autopilot" / "lab.jsonl"


def test_the_rule() -> None:
    calls = [
        ("a", "x", {1: 1.0, 2: 2.0}, "b1"),
        ("b", "x", {1: 1.0, 2: 2.0}, "b2"),  # another launch between: a sweep of its own
        ("a", "x", {5: 5.0}, "b3"),  # the rest of a's sweep, though b's came between
        ("a", "x", {5: 5.5}, "b4"),  # C=5 again: a repeat, a new sweep
        ("a", "y", {10: 9.0}, "b5"),  # another label
        ("a", "y", {30: 9.0}, "b6"),
    ]
    found = [(s.launch, s.label, s.ids) for s in grouped(calls)]
    assert found == [
        ("a", "x", ["b1", "b3"]),
        ("b", "x", ["b2"]),
        ("a", "x", ["b4"]),
        ("a", "y", ["b5", "b6"]),
    ]
    assert grouped(calls)[0].per_level == {1: 1.0, 2: 2.0, 5: 5.0}
    assert continued(grouped(calls), "c", "x", {1}) is None  # no sweep of that launch yet


def event(i: int, label: str, levels: tuple[int, ...], server: str = "server") -> dict[str, Any]:
    summary = {str(c): 100.0 + c for c in levels}
    return {"seq": i, "ts": f"2026-12-07T10:00:{i:02d}Z", "type": "benchmark", "id": f"b{i:03d}",
            "label": label, "server": server, "summary": summary, "flags": {}}  # fmt: skip


def result_of(e: dict[str, Any]) -> BenchResult:
    return results.of_event(e, Path("/nonexistent"))


def test_the_result_files_group_as_the_events_do() -> None:
    """One launch, one configuration: the result files (no launches known, runs of one label
    taken for one) and the events read the same sweeps, repeats and a label without calls."""
    events = [
        {"seq": 0, "ts": "2026-12-07T10:00:00Z", "type": "server_started", "name": "server"},
        event(1, "noise-L01", (1, 2)),
        event(2, "noise-L01", (5, 10)),
        event(3, "noise-L01", (1, 2)),  # measured again: a repeat
        event(4, "noise-L01", (5, 10)),
        event(5, "screen-L01", (1,)),
        event(6, "screen-L01", (1,)),
    ]
    by_events = [s.ids for s in sweeps(events)]
    assert by_events == [["b001", "b002"], ["b003", "b004"], ["b005"], ["b006"]]
    ordered = [result_of(e) for e in events[1:]]
    assert results.repeats(ordered) == [
        [{1: 101.0, 2: 102.0, 5: 105.0, 10: 110.0}] * 2,
        [{1: 101.0}] * 2,
    ]


def test_the_autopilot_reads_the_sweeps_the_report_counts(tmp_path: Path) -> None:
    """The recorded lab campaign: the History's measurements (observe: launches from its
    start_server calls) are the events' sweeps (launches from server_started), less the duet's
    rounds, which the History keeps per round."""
    (tmp_path / "lab").mkdir()
    shutil.copy(LAB, tmp_path / "lab" / "events.jsonl")
    events = read_events(tmp_path / "lab" / "events.jsonl").events
    h = history_of_run(tmp_path / "lab")
    duet = {str(e["id"]) for e in events if e["type"] == "benchmark" and e.get("duet")}
    ours = [list(m.ids) for m in h.measurements if not set(m.ids) & duet]
    theirs = [s.ids for s in sweeps(events) if not set(s.ids) & duet]
    assert len(ours) > 10 and any(len(ids) > 1 for ids in ours)
    assert ours == theirs


def test_a_trial_told_measures_its_calls_by_the_same_rule() -> None:
    """A fleet trial's calls by groups of levels are one sweep; a level measured again is a
    repeat (it was merged into the first before the rule was one)."""
    s = AskTell(Planner(SPACE, Settings(levels=LEVELS)))
    screen = Experiment(FA3, (1, 8), "screen", "a neighbour", fresh=True)
    s.tell(screen, Measured((Sweep({1: 90.0}, None, ("r1",)), Sweep({8: 400.0}, None, ("r2",)))))
    s.tell(screen, Measured((Sweep({1: 91.0}, None, ("r3",)), Sweep({1: 92.0}, None, ("r4",)))))
    found = [(m.launch, m.ids, m.per_level) for m in s.history.measurements]
    assert found == [(0, ("r1", "r2"), {1: 90.0, 8: 400.0}), (1, ("r3",), {1: 91.0}),
                     (1, ("r4",), {1: 92.0})]  # fmt: skip
