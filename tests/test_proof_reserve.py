"""The minutes budget reserves the proof of a winner (issue 46): the wrap-up warning comes when
the minutes left are down to what this box takes for a duet (side by side) or two launch pairs,
as its own launches and sweeps measured - not only at 80 %. A real-vLLM campaign whose wrap-up
came at 80 % of 30 minutes had time for one duet round."""

from __future__ import annotations

from typing import Any

import pytest

from agent.session import Limits
from agent.supervision import Supervision, proof_reserve_minutes
from state.events import read_events
from state.run import Run
from tests.conftest import plain_config

LEVELS = {"1": 20.0, "8": 25.0}  # seconds a level took: a sweep is 45 s


def measured(run: Run, launches: int = 2) -> None:
    """`launches` servers ready in 45 s each, one sweep of 45 s on each."""
    for i in range(launches):
        run.append("server_ready", name="server", seconds=45.0)
        points = {c: {"output_throughput": 100.0, "duration": d} for c, d in LEVELS.items()}
        run.append("benchmark", id=f"b{i:03d}", server="server", summary={}, points=points)


def supervised(run: Run, minutes: float) -> Supervision:
    clock = iter([minutes * 60.0])
    return Supervision(run, lambda _run: 0, lambda: next(clock, minutes * 60.0), 0.0)


@pytest.mark.parametrize(
    ("side", "reserve"),
    [(True, (2 * 45 + (6 + 1.25) * 2 * 45 + 20) / 60), (False, (2 * 2 * (45 + 45) + 20) / 60)],
)
def test_the_reserve_is_a_proof_as_this_box_measured_it(
    make_run: Any, side: bool, reserve: float
) -> None:
    config = plain_config()
    config = config.model_copy(
        update={"server": config.server.model_copy(update={"side_by_side": side})}
    )
    run, _ = make_run(config, limits=Limits(max_minutes=30))
    assert proof_reserve_minutes(run.state) == 0.0  # nothing measured: nothing known
    measured(run)
    assert proof_reserve_minutes(run.state) == pytest.approx(reserve)


def test_the_reserve_counts_what_a_benchmark_costs_beyond_its_levels(make_run: Any) -> None:
    """A sweep as the wall clock has it: each run_benchmark call's seconds over its levels'
    measured seconds (the client's start, warm-up requests, the cache reset) scale the sweeps -
    real vLLM's calls took 1.10 times their levels' durations, and the reserve held 5 rounds of
    7 (stop 55). A call the fold cannot match to its result, or an error, counts nothing."""
    from state.fold import benchmark_overhead

    config = plain_config()
    config = config.model_copy(
        update={"server": config.server.model_copy(update={"side_by_side": True})}
    )
    run, _ = make_run(config, limits=Limits(max_minutes=30))
    points = {c: {"output_throughput": 100.0, "duration": d} for c, d in LEVELS.items()}
    for i, wall in enumerate((54.0, 63.0)):  # each sweep took 45 s by its levels
        run.append("server_ready", name="server", seconds=45.0)
        run.append("benchmark", id=f"b{i:03d}", server="server", summary={}, points=points)
        done = {"name": "run_benchmark", "text": "...", "data": {"id": f"b{i:03d}"}}
        run.append("tool_result", id=f"t{i}", duration_s=wall, **done)
    stale = {"name": "run_benchmark", "text": "x", "data": {"id": "b000"}}
    run.append("tool_result", id="t8", duration_s=500.0, **stale)  # not the latest result
    run.append("tool_result", id="t9", duration_s=500.0, **stale | {"is_error": True})
    assert benchmark_overhead(run.state) == pytest.approx((54 + 63) / 90)
    reserve = (2 * 45 + 7.25 * 2 * 45 * 1.3 + 20) / 60
    assert proof_reserve_minutes(run.state) == pytest.approx(reserve)
    plain, _ = make_run(config, limits=Limits(max_minutes=30))
    measured(plain)  # no call's wall time known: the levels' seconds
    assert benchmark_overhead(plain.state) == 1.0
    assert proof_reserve_minutes(plain.state) < reserve


def test_the_wrap_up_comes_when_the_minutes_left_hold_just_the_proof(make_run: Any) -> None:
    """A duet here takes 12.7 minutes: with 30 minutes the warning comes at 17.3 (80 %, at 24
    minutes, would leave 6); a budget of 8 minutes keeps half for exploring."""
    config = plain_config()
    config = config.model_copy(
        update={"server": config.server.model_copy(update={"side_by_side": True})}
    )
    run, _ = make_run(config, limits=Limits(max_minutes=30))
    measured(run)
    reserve = proof_reserve_minutes(run.state)
    assert supervised(run, 30 - reserve - 0.5).check() is None
    said = supervised(run, 30 - reserve + 0.1).check()
    assert said is not None and "a proof of the winner takes on this box" in said
    log = read_events(run.path / "events.jsonl").events
    warned = [e for e in log if e["type"] == "budget_warning"]
    assert len(warned) == 1 and warned[0]["reserve"] == pytest.approx(reserve, abs=0.01)

    short, _ = make_run(config, limits=Limits(max_minutes=8))
    measured(short)
    assert supervised(short, 3.9).check() is None  # the reserve is at most half the budget
    assert supervised(short, 4.1).check() is not None


@pytest.mark.parametrize("floor", [0.02, 0.05, 0.10, 0.18, 0.24, 0.30])
def test_the_duet_is_planned_for_the_rounds_a_gain_one_floor_up_needs(floor: float) -> None:
    """PROOF_ROUNDS is what the statistics ask, at any floor: a gain one noise floor beyond
    MIN_GAIN, rounds spread half the floor (as real vLLM's did: 0.087 and 0.11 in log at floors
    of 18 and 24 %), the interval valid over the duet's looks. 4 rounds, the reserve before,
    establish it at none of these floors."""
    import math

    from agent.supervision import PROOF_ROUNDS
    from tools.domain import stats

    gain = math.log((1 + floor) * (1 + stats.MIN_GAIN))
    assert stats.pairs_to_win(gain, floor / 2, 2, stats.MAX_PAIRS) == PROOF_ROUNDS
    assert stats.paired_interval(gain, floor / 2, 4, stats.MAX_PAIRS - 1)[0] < 1 + stats.MIN_GAIN
