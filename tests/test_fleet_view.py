"""The supervisor's view of a fleet run (agent/view/fleet.py over state/fleet.py): an event log
written with Run.append as agent/fleet/controller.py writes it, on a clock the test sets, then
the live view, the plain lines, `agent watch` and `agent watch --json [--fleet]` read back from
it."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import state.events
from agent.cli.watch import main as watch_main
from agent.view.console import PlainPrinter
from agent.view.eta import estimate, eta_text
from agent.view.live import event_line
from agent.view.panels import Board, render
from agent.view.watch import stream_json, watch_view
from state.events import read_events
from state.fold import fold
from state.run import Run

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC).timestamp()
BASE = {"--attention-backend": "flashinfer", "--cuda-graph-max-bs": 128, "--fusion": True}
FA3 = {**BASE, "--attention-backend": "fa3"}
LOST = "lost on its node (WorkerCrashedError): the worker died unexpectedly"
NODES = {"n1": "box1", "n2": "box2"}
EXPLORE: dict[str, object] = {
    "id": "explore",
    "status": "pending",
    "priority": "high",
    "content": "Screen one-factor changes (6 experiments left)",
}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Set the time the next events are stamped with, in seconds after T0."""
    now = [T0]

    def stamp() -> str:
        return datetime.fromtimestamp(now[0], UTC).isoformat(timespec="milliseconds")[:-6] + "Z"

    monkeypatch.setattr(state.events, "utc_now", stamp)

    def at(seconds: float) -> None:
        now[0] = T0 + seconds

    return at


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    r = Run.create(tmp_path / "runs", "fleet-view")
    yield r
    r.close()


def started(run: Run, trial: str, purpose: str, flags: dict[str, Any], attempt: int = 1) -> None:
    levels = [1, 10, 100] if purpose == "screen" else [1, 2, 5, 10, 100]
    run.append(
        "trial_started", trial=trial, purpose=purpose, why="because", flags=flags,
        levels=levels, attempt=attempt,
    )  # fmt: skip


def ended(run: Run, trial: str, box: str, seconds: float | None, reason: str = "") -> None:
    node = {v: k for k, v in NODES.items()}.get(box, "")
    run.append(
        "trial_ended", trial=trial, node=node, box=box, ok=not reason, reason=reason,
        started=0.0, ended=0.0, seconds=seconds, ready_s=2.0, command="sim", log_tail="",
        cleanup="", attempt=1,
    )  # fmt: skip


def campaign(run: Run, at: Callable[[float], None], finish: bool = True) -> None:
    """Two boxes: the A/A pair together, a screen lost with its worker and retried, then a
    confirmation; at t=60 the confirmation is still running (unless `finish`)."""
    at(0)
    run.append("run_started", run_id=run.id, goal="beat baseline", brain="autopilot")
    run.append("fleet_started", engine="ray", nodes=NODES, slots=2)
    started(run, "baseline-L01", "baseline", BASE)
    started(run, "noise-L02", "noise", BASE)
    at(20)
    ended(run, "baseline-L01", "box1", 19.0)
    started(run, "screen-L03-fa3", "screen", FA3)
    at(22)
    ended(run, "noise-L02", "box2", 21.0)
    at(25)
    ended(run, "screen-L03-fa3", "box1", None, LOST)  # lost: no seconds of its own (5 s held)
    run.append("trial_retried", trial="screen-L03-fa3", reason=LOST, avoid="n1")
    started(run, "screen-L03-fa3-try2", "screen", FA3, attempt=2)
    at(34)
    ended(run, "screen-L03-fa3-try2", "box2", 9.0)
    started(run, "confirm-L04-fa3", "confirm", FA3)
    at(60)
    run.append("todo", todos=[EXPLORE], changes={})
    if finish:
        ended(run, "confirm-L04-fa3", "box1", 26.0)
        run.append("run_finished", status="finished", exit_code=0, reason="done")


def board_of(run: Run) -> Board:
    board = Board(run_path=run.path)
    for event in read_events(run.events_path).events:
        board.apply(event)
    return board


def text_of(renderable: Any, width: int = 120) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_the_fold_knows_what_runs_what_ended_and_how_busy_the_boxes_were(
    run: Run, clock: Callable[[float], None]
) -> None:
    campaign(run, clock, finish=False)
    fleet = run.state.fleet
    assert fleet is not None
    assert list(fleet.running) == ["confirm-L04-fa3"]
    assert [(e.trial.name, e.box, e.ok) for e in fleet.ended] == [
        ("baseline-L01", "box1", True),
        ("noise-L02", "box2", True),
        ("screen-L03-fa3", "box1", False),
        ("screen-L03-fa3-try2", "box2", True),
    ]
    assert fleet.ended[2].retried and fleet.ended[2].seconds == pytest.approx(5.0)
    assert fleet.per_box() == {"box1": 2, "box2": 2}
    # busy: 19 + 21 + 5 (the lost try, by the log) + 9, and the confirmation 26 s so far, of
    # 2 boxes x 60 s
    assert fleet.busy_seconds() == pytest.approx(80.0)
    assert fleet.utilisation() == pytest.approx(80 / 120)
    assert fleet.at_once() == pytest.approx(80 / 60)
    assert fleet.utilisation(now=T0 + 70) == pytest.approx(90 / 140)  # it runs on


def test_the_live_view_shows_the_boxes_the_trials_in_flight_and_the_ends(
    run: Run, clock: Callable[[float], None]
) -> None:
    campaign(run, clock, finish=False)
    board = board_of(run)
    shown = text_of(render(board, now=datetime.fromtimestamp(T0 + 60, UTC)))
    assert "fleet: 2 boxes, 2 at once · busy 67% of box time so far" in shown
    assert "step 0 · 1 trial(s) in flight on the fleet" in shown  # not "thinking"
    rows = {line.split()[0]: line for line in shown.splitlines() if line.strip().startswith("│")
            for line in [line.strip("│ ")] if line}  # fmt: skip
    assert rows["box1"].split()[-2:] == ["2", "0:24"]  # 2 trials ended there, 19 s + 5 s busy
    # the box of a trial is known at its end: either box may be running the confirmation
    assert "idle" not in rows["box1"] and rows["box1"].split()[1] == "-"
    assert rows["box2"].split()[:2] == ["box2", "-"]
    flight = rows["?"]
    assert "confirm-L04-fa3" in flight and "candidate" in flight and "0:26" in flight
    assert "--attention-backend fa3" in shown  # its flags, as changed from the baseline's
    assert "fleet: screen-L03-fa3 on box1: 5.0 s, lost on its node (WorkerCrashedError)" in shown
    assert "→ retried" in shown
    assert "fleet: screen-L03-fa3-try2 on box2: 9.0 s, ok" in shown


def test_a_placed_trial_shows_on_its_box_and_an_unplaced_one_waits(
    run: Run, clock: Callable[[float], None]
) -> None:
    clock(0)
    run.append("fleet_started", engine="ray", nodes=NODES, slots=2)
    started(run, "baseline-L01", "baseline", BASE)
    run.append("trial_placed", trial="baseline-L01", node="n2", box="box2")
    started(run, "screen-L02-fa3", "screen", FA3)
    clock(12)
    fleet = run.state.fleet
    assert fleet is not None
    assert [t.name for t in fleet.waiting()] == ["screen-L02-fa3"]
    assert fleet.busy_seconds(now=T0 + 12) == pytest.approx(12.0)  # waiting is not busy
    shown = text_of(render(board_of(run), now=datetime.fromtimestamp(T0 + 12, UTC)))
    box2 = next(line for line in shown.splitlines() if "box2" in line)
    assert "baseline-L01" in box2 and "baseline" in box2 and "0:12" in box2
    assert any("waiting" in line and "screen-L02-fa3" in line for line in shown.splitlines())


def test_the_plain_lines_say_each_end_the_retry_and_the_fleet_at_the_end(
    run: Run, clock: Callable[[float], None]
) -> None:
    out = io.StringIO()
    run.listeners.append(PlainPrinter(out, run.path))
    campaign(run, clock)
    lines = [line[11:] for line in out.getvalue().splitlines()]  # without "[hh:mm:ss] "
    assert "fleet: 2 boxes (box1, box2), 2 trial(s) at once" in lines
    assert "fleet: baseline-L01 on box1: 19.0 s, ok" in lines
    assert f"fleet: screen-L03-fa3 on box1: -, {LOST}" in lines
    assert "fleet: screen-L03-fa3 runs again, on another box" in lines
    assert "fleet: screen-L03-fa3-try2 starts (screened: fa3 at C=1,10,100, try 2)" in lines
    assert not any(line.startswith(("trial_", "fleet_started")) for line in lines)  # no JSON
    # the end: trials per box, utilisation over the whole run (19+21+5+9+26 of 2 x 60)
    assert (
        "fleet: 5 trials ended (box1 3, box2 2); busy 67% of 2 boxes' time, "
        "1.3 trials at once on average; 1 retried"
    ) in lines
    assert event_line(read_events(run.events_path).events[-2]) is not None  # the live view's too


def test_watch_json_streams_the_events_as_they_are_and_fleet_adds_the_view(
    run: Run, clock: Callable[[float], None]
) -> None:
    campaign(run, clock)
    raw = run.events_path.read_text().splitlines()
    plain = io.StringIO()
    assert stream_json(run.events_path, plain, 0.01, 0, once=True) == 0
    assert plain.getvalue().splitlines() == raw  # the contract: every event line, as it is
    out = io.StringIO()
    assert stream_json(run.events_path, out, 0.01, 0, once=True, fleet=True) == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [json.dumps(x, ensure_ascii=False, separators=(",", ":")) for x in lines
            if "seq" in x] == raw  # fmt: skip
    views = [x for x in lines if x.get("type") == "fleet_view"]
    fleet_events = [e for e in map(json.loads, raw) if e["type"].startswith(("fleet", "trial"))]
    assert len(views) == len(fleet_events) + 1  # and one after run_finished
    mid = next(v for v in views if v["after_seq"] == fleet_events[-2]["seq"])  # confirm starts
    assert [(r["trial"], r["box"], r["what"]) for r in mid["running"]] == [
        ("confirm-L04-fa3", None, "candidate: fa3")
    ]
    last = views[-1]
    assert last["running"] == [] and last["trials_per_box"] == {"box1": 3, "box2": 2}
    assert last["retried"] == [{"trial": "screen-L03-fa3", "reason": LOST}]
    assert [e["reason"] for e in last["ended"] if not e["ok"]] == [LOST]
    assert last["busy_s"] == 80.0 and last["elapsed_s"] == 60.0
    assert last["utilisation"] == pytest.approx(0.667, abs=1e-3)


def test_watch_prints_the_fleet_once_a_run_has_ended(
    run: Run, clock: Callable[[float], None]
) -> None:
    campaign(run, clock)
    console = Console(width=120, record=True, file=io.StringIO())
    watch_view(run.events_path, console, once=True)
    shown = console.export_text()
    assert "fleet: 2 boxes, 2 at once · busy 67% of box time so far" in shown  # at its end
    assert "fleet: confirm-L04-fa3 on box1: 26.0 s, ok" in shown


def test_watch_fleet_without_json_is_a_one_line_usage_error(
    run: Run, clock: Callable[[float], None], capsys: pytest.CaptureFixture[str]
) -> None:
    campaign(run, clock)
    assert watch_main([str(run.path), "--fleet"]) == 2
    assert capsys.readouterr().err.strip() == (
        "agent watch: --fleet goes with --json (the view shows a fleet already)"
    )


def test_a_resumed_fleet_counts_both_sessions_and_the_trial_that_never_came_back(
    run: Run, clock: Callable[[float], None]
) -> None:
    clock(0)
    run.append("fleet_started", engine="ray", nodes=NODES, slots=2)
    started(run, "baseline-L01", "baseline", BASE)
    clock(10)  # the controller's last event: it dies; resumed at t=100 on one box
    run.append("todo", todos=[EXPLORE], changes={})
    clock(100)
    run.append("run_resumed")
    run.append("fleet_started", engine="ray", nodes={"n3": "box3"}, slots=1)
    run.append("trial_retried", trial="baseline-L01", reason="resumed", avoid=None)
    started(run, "baseline-L01-try2", "baseline", BASE, attempt=2)
    clock(120)
    fleet = fold(read_events(run.events_path).events).fleet
    assert fleet is not None
    assert [t.name for t in fleet.lost] == ["baseline-L01"]
    assert list(fleet.running) == ["baseline-L01-try2"]
    assert fleet.running["baseline-L01-try2"].box == "box3"  # one box: it runs there
    # busy: 10 s of the first try (to its session's end) and 20 s of the second; offered:
    # 2 boxes x 100 s, then 1 box x 20 s
    assert fleet.utilisation(now=T0 + 120) == pytest.approx(30 / 40)
    assert fleet.elapsed(now=T0 + 120) == pytest.approx(30.0)  # the 90 s it was down: not
    shown = text_of(render(board_of(run), now=datetime.fromtimestamp(T0 + 120, UTC)))
    assert "fleet: baseline-L01 never came back (its session ended first)" in shown
    lines = [event_line(e) for e in read_events(run.events_path).events]
    assert any(line is not None and "baseline-L01 runs again: resumed" in line.plain
               for line in lines)  # fmt: skip


def test_time_left_on_a_fleet_divides_the_experiments_by_the_trials_run_at_once(
    run: Run, clock: Callable[[float], None]
) -> None:
    campaign(run, clock, finish=False)
    todo = EXPLORE
    events = read_events(run.events_path).events
    fleet = fold(events).fleet
    assert fleet is not None
    eta = estimate([todo], events, fleet)
    assert eta is not None  # a fleet run has no server_ready nor run_benchmark: its trials
    # tell: ready after 2 s; the rest of the trials that ended ok (19, 21, 9 s) less that
    assert (eta.launch_s, eta.sweep_s) == pytest.approx((2.0, 49 / 3 - 2))
    assert eta.at_once == pytest.approx(80 / 60)
    assert eta.seconds == pytest.approx(6 * (49 / 3) / (80 / 60))
    # the item is pending: its experiments to come, each a trial (a launch and its sweep)
    text = eta_text(eta, finished=False)
    assert "6 experiments to come × 16 s (a launch and a full sweep) ÷ 1.3 at once" in text
    assert estimate([todo], events) is None  # without the fleet, as on one box: nothing yet


def test_a_fleet_resumed_an_hour_later_is_busy_at_most_all_of_its_time(
    run: Run, clock: Callable[[float], None]
) -> None:
    # issue 49, item 6: a model's fleet run killed with 3 trials in flight, resumed an hour
    # later; the resume records them as ended (interrupted, no seconds of their own: agent/fleet/
    # model.settle). Each held its box to its session's end (60 s), not through the hour the
    # fleet was down - the summary said "busy 729 % of 3 boxes' time, 21.9 trials at once"
    three = {"n1": "box1", "n2": "box2", "n3": "box3"}
    clock(0)
    run.append("run_started", run_id=run.id, goal="beat baseline", brain="anthropic")
    run.append("fleet_started", engine="ray", nodes=three, slots=3)
    for i in range(3):
        started(run, f"screen-L0{i}", "screen", FA3)
    clock(60)  # the controller's last event; it is killed
    run.append("todo", todos=[EXPLORE], changes={})
    clock(3600)
    run.append("run_resumed")
    for i in range(3):
        run.append("trial_ended", trial=f"screen-L0{i}", ok=False, end="interrupted",
                   reason="interrupted", interrupted=True, cleanup="", attempt=1)  # fmt: skip
    run.append("fleet_started", engine="ray", nodes=three, slots=3)
    for i in range(3, 6):
        started(run, f"screen-L0{i}", "screen", FA3)
    clock(3700)
    for i in range(3, 6):
        run.append("trial_ended", trial=f"screen-L0{i}", node=f"n{i - 2}", box=f"box{i - 2}",
                   ok=True, reason="", seconds=50.0, attempt=1)  # fmt: skip
    run.append("run_finished", status="finished", exit_code=0, reason="done")
    fleet = fold(read_events(run.events_path).events).fleet
    assert fleet is not None
    # busy: 3 x 60 s before the kill, 3 x 50 s after; offered: 3 boxes x (60 s + 100 s)
    assert fleet.busy_seconds() == pytest.approx(330.0)
    assert fleet.utilisation() == pytest.approx(330 / 480)
    assert fleet.at_once() == pytest.approx(330 / 160)
    out = io.StringIO()
    printer = PlainPrinter(out, run.path)
    for e in read_events(run.events_path).events:
        printer(e)
    assert "busy 69% of 3 boxes' time, 2.1 trials at once on average" in out.getvalue()
