"""The time left from what the run says of its stages' sizes: an experiment costs what one took
from launch to launch within an item, and an item that does not say how many experiments it
holds holds as many launches as the items so far did on average (the screening item: those it
launched and those it says are left) - not as long as the items so far took, which the one long
screening stage would set for every later, shorter one."""

from __future__ import annotations

from typing import Any

import pytest

from agent.view.eta import eta_text, raw_estimate


def at(t: int, type_: str, **data: Any) -> dict[str, Any]:
    return {"seq": t, "ts": f"2026-01-01T00:{t // 60:02d}:{t % 60:02d}Z", "type": type_, **data}


def todos(baseline: str, explore: str, rest: str = "pending", left: int = 0) -> list[Any]:
    count = f" ({left} experiments left)" if left else ""
    return [
        {"id": "baseline", "content": "Start the baseline", "status": baseline},
        {"id": "explore", "content": f"Screen changes{count}", "status": explore},
        {"id": "family", "content": "Tune the family", "status": rest},
        {"id": "validate", "content": "Re-validate the winner", "status": rest},
        {"id": "report", "content": "Recommend the config, report", "status": "pending"},
    ]


def launch(t: int, label: str) -> list[dict[str, Any]]:
    """A launch at t, ready 5 s later, and a sweep of 20 s."""
    return [
        at(t, "server_started", name="s"),
        at(t + 5, "server_ready", name="s", seconds=5.0),
        at(t + 6, "tool_call", id=label, name="run_benchmark", input={"label": label}),
        at(t + 26, "tool_result", id=label, name="run_benchmark", duration_s=20.0),
        at(t + 26, "benchmark", id=label, label=label),
    ]


def screening(left: int) -> list[dict[str, Any]]:
    """The baseline (one launch, 60 s with its repeat sweep), then a screening item whose
    launches come 40 s apart (a screen, the confirming sweep, the thinking in between)."""
    events = [at(0, "todo", todos=todos("in_progress", "pending", left=left + 3)), *launch(1, "b")]
    events.append(at(60, "todo", todos=todos("completed", "in_progress", left=left + 3)))
    for i in range(3):
        events += launch(61 + 40 * i, f"screen-{i}")
        events.append(at(61 + 40 * i + 30, "todo", todos=todos("completed", "in_progress",
                                                                 left=left + 2 - i)))  # fmt: skip
    return events


def test_an_experiment_costs_the_time_from_one_launch_to_the_next_within_an_item() -> None:
    events = screening(left=4)
    eta = raw_estimate(todos("completed", "in_progress", left=4), events)
    # a launch and a sweep take 25 s, but the launches came 40 s apart within the screening
    # item; the 60 s from the baseline's launch to the first screen (its A/A repeat between)
    # is no experiment's
    assert eta is not None and (eta.launch_s, eta.sweep_s) == (5.0, 20.0)
    assert eta.experiment_s == 40.0
    assert eta.held_s == 4 * 40.0
    assert "4 experiments × 40 s" in eta_text(eta, finished=False)


def test_an_item_of_unknown_size_holds_the_launches_the_items_so_far_held() -> None:
    events = screening(left=4)
    eta = raw_estimate(todos("completed", "in_progress", left=4), events)
    # the baseline item held 1 launch, the screening one 3 so far and says 4 more: 7 - a mean
    # of 4 launches of 40 s for each of the family and the re-validation
    assert eta is not None and eta.open_items == 2.0
    assert eta.item_s == pytest.approx(4 * 40.0)
    assert eta.seconds == pytest.approx(4 * 40.0 + 2 * 160.0)
    assert eta.seconds == eta.held_s + eta.items_s + eta.running_s


def test_a_long_screening_stage_does_not_make_the_later_ones_as_long() -> None:
    """Once the screening item is done (3 launches in 150 s), the re-validation item costs the
    launches of an item on average (2: the baseline's 1, the screening's 3) - not the 150 s."""
    events = screening(left=0)
    events.append(at(210, "todo", todos=todos("completed", "completed", "pending")))
    events.append(at(211, "message", role="assistant", content=[]))
    eta = raw_estimate(todos("completed", "completed", "pending"), events)
    assert eta is not None and eta.open_items == 2.0
    assert eta.item_s == pytest.approx(2 * 40.0)
    assert eta.seconds == pytest.approx(2 * 80.0)


def test_an_item_not_begun_costs_a_launch_and_a_full_sweep_per_experiment() -> None:
    """While the screening runs (launches 40 s apart, each screen one level), the re-validation
    item not begun says 4 experiments: each a launch (5 s) and a full sweep (the baseline's four
    levels, 60 s) - not the screening's 40 s. Costed at the run's launch-to-launch pace, the
    autopilot's re-validation took half again what was said (tests/sessions/autopilot/lab.jsonl:
    pair launches 23 s apart against 15 s)."""
    items = [
        {"id": "baseline", "content": "Start the baseline", "status": "completed"},
        {"id": "explore", "content": "Screen (2 experiments left)", "status": "in_progress"},
        {"id": "validate", "content": "Re-validate (4 experiments left)", "status": "pending"},
    ]
    full = {str(c): 100.0 for c in (1, 2, 4, 8)}
    events = [
        at(0, "server_started", name="s"),
        at(5, "server_ready", name="s", seconds=5.0),
        at(6, "tool_call", id="b", name="run_benchmark", input={"label": "baseline"}),
        at(66, "tool_result", id="b", name="run_benchmark", duration_s=60.0),
        at(66, "benchmark", id="b", label="baseline", summary=full),
        at(70, "todo", todos=items),
    ]
    for i in range(3):
        t, label = 71 + 40 * i, f"screen-{i}"
        events += [
            at(t, "server_started", name="s"),
            at(t + 5, "server_ready", name="s", seconds=5.0),
            at(t + 6, "tool_call", id=label, name="run_benchmark", input={"label": label}),
            at(t + 16, "tool_result", id=label, name="run_benchmark", duration_s=10.0),
            at(t + 16, "benchmark", id=label, label=label, summary={"8": 100.0}),
        ]
    eta = raw_estimate(items, events)
    assert eta is not None and (eta.experiments, eta.later) == (6, 4)
    assert (eta.experiment_s, eta.fresh_s) == (40.0, 65.0)
    assert eta.held_s == 2 * 40.0 + 4 * 65.0
    text = eta_text(eta, finished=False)
    assert "2 experiments × 40 s + 4 experiments to come × 1:05 (a launch and a full sweep)" in text
