"""What the supervisor's view (agent watch, and agent run on a terminal) adds for a newcomer: an
estimate of the time left, the model's thinking summary, and a final screen naming the report
and the command to deploy in full."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from rich.console import Console

from agent.brains.autopilot import conclude, families
from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.history import History
from agent.brains.autopilot.planner import Experiment, Planner, Settings
from agent.brains.autopilot.todo_plan import todos
from agent.report import write_report
from agent.report.measured import read_run
from agent.view.console import PlainPrinter
from agent.view.eta import clock, estimate, raw_estimate
from agent.view.panels import Board, render
from sim.space import DEFAULT_LEVELS, default_space
from state.events import read_events
from state.run import Run
from tests.test_newcomer_report import autopilot_run
from tools.domain.space import SearchSpace

TODOS = [
    {"id": "cleanup", "content": "Kill leftover servers", "status": "completed"},
    {"id": "a", "content": "Screen fa3", "status": "in_progress"},
    {"id": "b", "content": "Screen triton", "status": "pending"},
    {"id": "c", "content": "Re-validate the winner", "status": "pending"},
    {"id": "report", "content": "Recommend the config, report", "status": "pending"},
]


def screen(run: Run, width: int = 400) -> str:
    board = Board(run_path=run.path)
    for event in read_events(run.events_path).events:
        board.apply(event)
    console = Console(record=True, width=width)
    console.print(render(board))
    return console.export_text()


def test_the_time_left_comes_from_open_todos_and_measured_times(make_run: Any) -> None:
    run, _ = make_run()
    run.append("todo", todos=TODOS, changes={})
    assert "time left: estimated after the first launch and sweep" in screen(run)
    run.append("server_ready", name="s", seconds=40.0)
    run.append("tool_call", id="t1", name="run_benchmark", input={"label": "screen-L01-fa3"})
    run.append("tool_result", id="t1", name="run_benchmark", text="", duration_s=80.0)
    eta = estimate(run.state.todos, read_events(run.events_path).events)
    # two pending experiments of a launch and a sweep each, and the one in progress, just begun:
    # a whole one left (less the moments since it began); the parts add up to the total
    assert eta is not None and eta.open_items == 2.5
    assert eta.seconds == pytest.approx(360.0, abs=5) and eta.items_s == 240.0
    assert eta.seconds == eta.items_s + eta.running_s
    text = screen(run)
    assert (
        "about 6 min left (2 open todos × 2:00 each + 2:00 for the one in progress = 6:00; "
        "a launch took 40 s, a sweep 1:20)" in text
    )


def test_watch_shows_the_thinking_summary(make_run: Any) -> None:
    run, _ = make_run()
    thought = "The baseline is noisy at C=1; screen fa3 at three levels first."
    content = [{"type": "text", "text": "Screening fa3."}]
    run.append("message", role="assistant", content=content, thinking=thought,
               stop_reason="tool_use", usage={}, cost_usd=0.0, model="m")  # fmt: skip
    text = screen(run)
    assert "thinking" in text
    assert thought in text


def test_the_final_screen_names_the_report_and_the_whole_command(make_run: Any) -> None:
    run, _ = make_run()
    autopilot_run(run)
    write_report(run)
    run.append("run_finished", status="finished", exit_code=0, reason="Done. " + "x" * 400)
    configs = read_run(run.path, read_events(run.events_path).events).configs
    command = next(c.command for c in configs if c.label == "validate-L02-fa3")
    assert "--attention-backend fa3" in command
    text = screen(run)
    assert f"report: {run.path / 'report.html'}" in text
    assert f"deploy candidate: fa3: {command}" in text
    out = io.StringIO()  # `agent run` off a terminal prints the same lines
    PlainPrinter(out, run.path)(read_events(run.events_path).events[-1])
    assert f"] deploy candidate: fa3: {command}\n" in out.getvalue()


def test_a_long_todo_item_weighs_in_the_estimate() -> None:
    """An item that held several experiments (300 s) counts, and the one in progress is
    expected to run as long again as it has (100 s so far)."""

    def at(t: int, type_: str, **data: Any) -> dict[str, Any]:
        return {"seq": t, "ts": f"2026-01-01T00:{t // 60:02d}:{t % 60:02d}Z",
                "type": type_, **data}  # fmt: skip

    def todos(*statuses: str) -> list[dict[str, Any]]:
        return [{"id": i, "content": i, "status": s} for i, s in zip("abc", statuses, strict=True)]

    events = [
        at(0, "todo", todos=todos("in_progress", "pending", "pending")),
        at(1, "server_ready", seconds=10.0),
        at(2, "tool_call", id="t", name="run_benchmark", input={"label": "x"}),
        at(22, "tool_result", id="t", name="run_benchmark", duration_s=20.0),
        at(23, "benchmark", id="b1"),
        at(300, "todo", todos=todos("completed", "in_progress", "pending")),
        at(301, "benchmark", id="b2"),
        at(400, "message", role="assistant", content=[]),
    ]
    eta = raw_estimate(todos("completed", "in_progress", "pending"), events)
    assert eta is not None and eta.item_s == 200.0  # the mean of 300 s and 100 s so far
    assert eta.seconds == 200.0 + 100.0  # one pending item, and what is left of the one running


def test_the_screening_items_experiments_left_weigh_in_the_estimate(make_run: Any) -> None:
    """The autopilot's "Screen one-factor changes ..." item holds one screen per untried change
    from the best; it says how many are left (one fewer once one is screened), and the estimate
    counts a launch and a sweep for each instead of half an item."""
    space = SearchSpace.parse(default_space(), check=engine_check("sim"))
    planner = Planner(space, Settings(levels=tuple(DEFAULT_LEVELS)))
    h = History(space)
    for label in ("baseline-L01", "noise-L01"):  # the baseline and its A/A repeat: the best
        h.launched(space.baseline)
        per = {c: 100.0 for c in DEFAULT_LEVELS}
        h.measured(space.baseline, len(h.launches) - 1, per, label)

    def explore_item(h: History) -> tuple[list[dict[str, Any]], int]:
        items = todos(planner, h, "explore")
        content = next(t["content"] for t in items if t["id"] == "explore")
        found = re.search(r"\((\d+) experiments left\)$", content)
        assert found, content
        return items, int(found.group(1))

    items, left = explore_item(h)
    first = planner.decide(h)
    assert isinstance(first, Experiment) and first.purpose == "screen"
    h.launched(first.config)
    per = {c: 90.0 for c in first.levels}  # a clear loss: the best stays the baseline
    h.measured(first.config, len(h.launches) - 1, per, "screen-L02")
    assert explore_item(h)[1] == left - 1

    run, _ = make_run()
    run.append("todo", todos=items, changes={})
    run.append("server_ready", name="s", seconds=40.0)
    run.append("tool_call", id="t1", name="run_benchmark", input={"label": "screen-L01-fa3"})
    run.append("tool_result", id="t1", name="run_benchmark", text="", duration_s=80.0)
    eta = estimate(run.state.todos, read_events(run.events_path).events)
    # the experiments left, then the family and re-validation items (the report item: seconds)
    assert eta is not None and (eta.experiments, eta.open_items) == (left, 2.0)
    assert eta.seconds == (left + 2) * 120.0
    text = screen(run)
    total = clock((left + 2) * 120.0)
    assert f"({left} experiments × 2:00 + 2 open todos × 2:00 each = {total}; a launch" in text


def test_the_revalidation_item_says_the_launches_it_holds() -> None:
    """Once a configuration beats the baseline, the re-validation item says the launches the
    stage holds (conclude.launches_left): the winner's fresh launch, the challenger's, and the
    launch pairs a verdict is expected to need - three where the gain is many floors large, more
    where it is a few (read anytime-valid, two pairs' one degree of freedom decides almost
    nothing) - then those the pairs' own figures need; one fewer per launch made. The time left
    counts each instead of one item for nine."""
    space = SearchSpace.parse(default_space(), check=engine_check("sim"))
    levels = tuple(DEFAULT_LEVELS)
    planner = Planner(space, Settings(levels=levels))
    better = space.complete({**space.baseline, "--attention-backend": "fa3"})

    def measured(
        h: History, config: dict[str, Any], value: float | dict[int, float], label: str
    ) -> None:
        h.launched(config)
        per_level = value if isinstance(value, dict) else dict.fromkeys(levels, value)
        h.measured(config, len(h.launches) - 1, per_level, label)

    def validate_left(h: History) -> int | None:
        item = next(t for t in todos(planner, h, "explore") if t["id"] == "validate")
        found = re.search(r"\((\d+) experiments? left\)$", item["content"])
        return int(found.group(1)) if found else None

    def campaign(gain: float) -> History:
        h = History(space)
        measured(h, space.baseline, 100.0, "baseline")
        noisy = {c: 100.0 * (1.03 if i % 2 else 0.97) for i, c in enumerate(levels)}
        h.measured(space.baseline, 0, noisy, "noise")  # a floor of about 2 %
        assert validate_left(h) is None  # nothing beat the baseline: nothing to pair
        measured(h, better, 100.0 * gain, "confirm")
        return h

    assert validate_left(campaign(1.3)) == 7  # its fresh launch, three pairs: many floors
    h = campaign(1.1)
    assert validate_left(h) == 11  # its fresh launch, five pairs: 10 % is a few floors
    measured(h, better, 111.0, "validate")
    assert validate_left(h) == 8  # four pairs for the mean of its two sweeps (1.105x)
    measured(h, space.baseline, 100.0, "pair")
    measured(h, better, 110.0, "pair")
    assert validate_left(h) == 6
    measured(h, better, 104.0, "pair")
    measured(h, space.baseline, 100.0, "pair")
    # two pairs in (1.10x, 1.04x): what their own spread needs from here
    need = conclude.paired(planner.read(h), better).pairs_needed()
    assert need is not None and need > 3 and validate_left(h) == 2 * (need - 2)

    # a challenger (better at C=1 only) is re-validated on its own fresh launch too
    h = campaign(1.3)
    other = space.complete({**space.baseline, "--max-running-requests": 256})
    measured(h, other, {c: 170.0 if c == 1 else 120.0 for c in levels}, "confirm")
    assert validate_left(h) == 8


def test_the_family_item_says_the_members_it_will_screen() -> None:
    """Once a member of the speculation family comes close to the best (a screen at 0.95x of it
    at C=1), the family item says how many members its stage will screen - the family on the
    best's other flags, then one and two of its parameters changed - one fewer once one is
    screened; before, it says none (the stage may not run). Counted as one item, the family
    stage of the recorded lab session (6 launches) was costed at a third of what it took."""
    space = SearchSpace.parse(default_space(), check=engine_check("sim"))
    levels = tuple(DEFAULT_LEVELS)
    planner = Planner(space, Settings(levels=levels))
    h = History(space)
    for label in ("baseline-L01", "noise-L01"):
        h.launched(space.baseline)
        h.measured(space.baseline, len(h.launches) - 1, dict.fromkeys(levels, 100.0), label)

    def family_left(h: History) -> int | None:
        content = next(t["content"] for t in todos(planner, h, "explore") if t["id"] == "family")
        found = re.search(r"\((\d+) experiments? left\)$", content)
        return int(found.group(1)) if found else None

    assert family_left(h) is None
    member = space.repair({**space.baseline, "--speculative-algorithm": "EAGLE3"})
    h.launched(member)
    close = {c: 95.0 if c == levels[0] else 50.0 for c in levels}
    h.measured(member, len(h.launches) - 1, close, "screen-L02-EAGLE3")
    left = family_left(h)
    assert left is not None and left >= 3, left
    first = families.tune(planner.read(h), space.baseline)
    assert first is not None and first.purpose == "challenger"
    h.launched(first.config)
    h.measured(first.config, len(h.launches) - 1, dict.fromkeys(first.levels, 40.0), "challenger")
    assert family_left(h) == left - 1
