"""The time left as the supervisor reads it: one odd estimate does not move it (the median of the
last few, each less the time since), its parts add up to what it says, and one experiment is
"1 experiment"."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agent.view.eta import Eta, budget_left_s, clock, estimate, eta_text, raw_estimate
from state.fold import fold


def at(t: int, type_: str, **data: Any) -> dict[str, Any]:
    return {"seq": t, "ts": f"2026-01-01T00:{t // 60:02d}:{t % 60:02d}Z", "type": type_, **data}


def items(explore: str, rest: str = "pending") -> list[dict[str, Any]]:
    return [
        {"id": "explore", "content": explore, "status": "in_progress"},
        {"id": "family", "content": "Tune the family", "status": rest},
        {"id": "validate", "content": "Re-validate the winner", "status": rest},
    ]


def screened(t: int, n: int) -> list[dict[str, Any]]:
    """A screen of 20 s after a launch of 5 s, at t, the screening item saying n left."""
    return [
        at(t, "server_ready", name="s", seconds=5.0),
        at(t + 1, "tool_call", id=f"c{t}", name="run_benchmark", input={"label": f"screen-{t}"}),
        at(t + 21, "tool_result", id=f"c{t}", name="run_benchmark", duration_s=20.0),
        at(t + 21, "benchmark", id=f"b{t}", label=f"screen-{t}"),
        at(t + 22, "todo", todos=items(f"Screen changes ({n} experiments left)")),
    ]


def campaign() -> list[dict[str, Any]]:
    events = [at(0, "todo", todos=items("Screen changes (6 experiments left)"))]
    for i, n in enumerate((5, 4, 3, 2)):
        events += screened(25 * i + 1, n)
    return events


def test_one_odd_estimate_does_not_move_the_time_left() -> None:
    events = campaign()
    steady = estimate(items("Screen changes (2 experiments left)"), events)
    assert steady is not None
    # the planner's count jumps to 40 for one update, then back: the raw estimate jumps ...
    odd = [*events, at(110, "todo", todos=items("Screen changes (40 experiments left)"))]
    raw = raw_estimate(items("Screen changes (40 experiments left)"), odd)
    assert raw is not None and raw.seconds > 5 * steady.seconds
    shown = estimate(items("Screen changes (40 experiments left)"), odd)
    assert shown is not None and shown.seconds < 1.5 * steady.seconds  # ... what is shown not
    assert raw.seconds > 3 * shown.seconds


def test_the_parts_add_up_to_what_it_says() -> None:
    events = campaign()
    eta = estimate(items("Screen changes (2 experiments left)"), events)
    assert eta is not None
    text = eta_text(eta, finished=False)
    found = re.search(r"\((.*) = (\S+)(?:, estimated .+? ago)?;", text)
    assert found, text
    parts, total = found.group(1).split(" + "), found.group(2)

    def seconds(part: str) -> float:
        m = re.match(r"(\d+) \w[\w ]* × (\S+)", part)
        if m:
            return int(m.group(1)) * to_s(m.group(2))
        return to_s(part.split()[0])

    assert abs(sum(seconds(p) for p in parts) - to_s(total)) <= len(parts)  # rounding
    assert to_s(total) == to_s(clock(eta.seconds + eta.ago))
    assert eta.held_s + eta.items_s + eta.running_s == pytest.approx(eta.seconds + eta.ago)


def to_s(text: str) -> float:
    if ":" in text:
        m, s = text.split(":")
        return int(m) * 60 + int(s)
    return float(text)


def test_one_experiment_is_singular() -> None:
    eta = Eta(25.0, 0.0, 25.0, 5.0, 20.0, experiments=1, held_s=25.0)
    text = eta_text(eta, finished=False)
    assert "1 experiment × 25 s" in text and "1 experiments" not in text
    two = eta_text(Eta(50.0, 1.0, 25.0, 5.0, 20.0, experiments=1, held_s=25.0, items_s=25.0), False)
    assert "1 open todo × 25 s each" in two and "1 open todos" not in two


def test_a_minutes_budget_bounds_the_time_left_and_says_so() -> None:
    """A run ends by its minutes budget (the wrap-up at the warning): the time left is at most
    what the budget leaves, said beside what the open todos hold - a real-vLLM campaign given 45
    minutes was told 40 minutes left when 6 were."""
    events = [at(0, "todo", todos=items("Screen changes (40 experiments left)"))]
    for i, n in enumerate((39, 38, 37, 36)):
        events += screened(25 * i + 1, n)
    todos = items("Screen changes (36 experiments left)")
    unbounded = estimate(todos, events)
    assert unbounded is not None and unbounded.seconds > 600
    state = fold([at(0, "run_started", goal="g", limits={"max_minutes": 5.0})])
    left = budget_left_s(state, events)
    assert left == pytest.approx(5 * 60 - 98)  # the latest event is at 98 s
    eta = estimate(todos, events, budget_s=left)
    assert eta is not None and eta.seconds == pytest.approx(202.0)
    assert eta.planned_s == pytest.approx(unbounded.seconds)
    text = eta_text(eta, finished=False)
    assert text.startswith("about 3 min left (the minutes budget ends first; the open todos hold")
    assert clock(unbounded.seconds + unbounded.ago) in text, text
    # a plan shorter than what the budget leaves is the figure, as without a budget
    roomy = fold([at(0, "run_started", goal="g", limits={"max_minutes": 600.0})])
    assert estimate(todos, events, budget_s=budget_left_s(roomy, events)) == unbounded
    # resumed: the earlier session's minutes count, the time between sessions does not
    resumed = [
        at(0, "run_started", goal="g", limits={"max_minutes": 5.0}),
        at(30, "run_finished", status="stopped", exit_code=1, reason="x", session_minutes=0.5),
        at(100, "run_resumed"),
        at(160, "todo", todos=todos),
    ]
    assert budget_left_s(fold(resumed), resumed) == pytest.approx(300 - 30 - 60)
