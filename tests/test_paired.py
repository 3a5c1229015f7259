"""Decisions that survive a drifting machine (issue 29, items 1 and 3): the winner is measured
against the baseline in launch pairs (baseline, winner, baseline, winner), and the conclusion
claims only what the pairs show - a paired gain with its interval, or "not established" with
what it would take. The harness: the planner on the simulator's truth (offline.simulate) on a
box whose speed steps during the campaign."""

from __future__ import annotations

import re

import pytest

from agent.brains.autopilot import conclude
from agent.brains.autopilot.history import History, Launch, Objective
from agent.brains.autopilot.offline import Noise, sim_truth, simulate
from agent.brains.autopilot.planner import Experiment, Finish, Planner, Settings
from sim.space import DEFAULT_LEVELS, default_space
from agent.brains.autopilot.engine_limits import engine_check
from tools.domain import stats
from tools.domain.space import Flags, SearchSpace

SPACE = SearchSpace.parse(default_space(), check=engine_check("sim"))
LEVELS = tuple(DEFAULT_LEVELS)
BASE = SPACE.baseline
TRUTH = sim_truth(max_tokens=128)


def planner(max_launches: int = 40) -> Planner:
    return Planner(SPACE, Settings(levels=LEVELS, objective=Objective(), max_launches=max_launches))


def truth_ratio(config: Flags) -> float:
    """The paired truth: the objective of `config` over the baseline's, on a box that does not
    move (a drift common to both launches of a pair cancels)."""
    a, b = TRUTH(config, LEVELS), TRUTH(BASE, LEVELS)
    assert not isinstance(a, str) and not isinstance(b, str)
    return stats.geomean(a.values()) / stats.geomean(b.values())


def claimed(finish: Finish) -> float | None:
    """The gain the conclusion claims, as a ratio; None: it claims none ("not established", or
    no candidate beat the baseline)."""
    if finish.why.startswith("not established") or finish.why.startswith("no candidate"):
        return None
    found = re.search(r"beats the baseline by ([+-]\d+\.\d)%", finish.why)
    assert found is not None, finish.why
    return 1 + float(found.group(1)) / 100


def step_at(sweeps: int, before: float, after: float):  # type: ignore[no-untyped-def]
    return lambda measured: before if measured < sweeps else after


# --- the fast harness: a campaign on a box that drifts -------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [(0.5, 1.0), (0.8, 1.0), (1.0, 0.6)],
    ids=["slow-then-fast", "a-little-slow-then-fast", "fast-then-slow"],
)
def test_a_campaign_on_a_drifting_box_claims_no_more_than_the_paired_truth(
    before: float, after: float
) -> None:
    """The baseline and its A/A pair are measured on a box at `before` of its speed, everything
    after at `after`: a ratio of the candidates' sweeps to the baseline's reads the drift (2x
    for the first), the pairs do not. The claim is within 15 % of the paired truth of the pick,
    or none."""
    h, finish = simulate(planner(), TRUTH, seed=3, noise=Noise(), drift=step_at(2, before, after))
    assert finish.best is not None
    gain = claimed(finish)
    if gain is not None:
        truth = truth_ratio(finish.best)
        assert abs(gain / truth - 1) <= 0.15, (gain, truth, finish.why)
        assert finish.paired is not None and finish.paired.wins
    if h.key(finish.best) != h.key(BASE):  # a pick other than the baseline was measured in pairs
        pairs = [m for m in h.measurements if m.purpose == "pair"]
        order = [h.key(m.config) == h.key(BASE) for m in pairs]
        assert order[:4] == [True, False, True, False], order
        assert len({m.launch for m in pairs}) == len(pairs)  # each on a fresh launch


def test_a_quiet_box_establishes_the_gain_in_pairs() -> None:
    h, finish = simulate(planner(), TRUTH, seed=3, noise=Noise())
    gain = claimed(finish)
    assert finish.best is not None and gain is not None, finish.why
    assert abs(gain / truth_ratio(finish.best) - 1) <= 0.15
    p = finish.paired
    assert p is not None and p.wins and p.n >= conclude.MIN_PAIRS
    assert "paired (95 % interval" in finish.why and "launch pairs" in finish.why
