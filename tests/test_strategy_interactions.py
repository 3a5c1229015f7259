"""Interactions: after the one-factor screens the planner pairs the changes that did well (not
only the winners), and a surrogate proposes when that path is exhausted; every launch says why."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from agent.brains.autopilot import combine
from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.history import History, Objective
from agent.brains.autopilot.offline import Noise, sim_truth, simulate
from agent.brains.autopilot.planner import Experiment, Planner, Settings, Step
from agent.brains.autopilot.reading import Reading
from sim.space import load_lab
from tools.domain.space import SearchSpace

LAB = load_lab("interactions")
SPACE = SearchSpace.parse(
    LAB.space, check=engine_check("sim", "python -m sim " + " ".join(LAB.base))
)
LEVELS = tuple(LAB.levels)
PAIR = ("--enable-two-batch-overlap", "--enable-dp-attention")


def planner() -> Planner:
    return Planner(SPACE, Settings(levels=LEVELS, objective=Objective()))


@dataclass(frozen=True)
class Recorder(Planner):
    """The planner, keeping every step it decided."""

    seen: list[Step] = field(default_factory=list)

    def decide(self, h: History) -> Step:
        step = super().decide(h)
        self.seen.append(step)
        return step


@pytest.mark.parametrize("seed", [0, 2])
def test_the_interaction_pair_is_found_and_each_launch_says_why(seed: int) -> None:
    truth = sim_truth(max_tokens=128, base=LAB.base)
    p = Recorder(SPACE, Settings(levels=LEVELS, objective=Objective()))
    _, finish = simulate(p, truth, seed=seed, noise=Noise(0.02, 0.03, 0.005))
    assert finish.best is not None and all(finish.best[f] for f in PAIR)
    experiments = [s for s in p.seen if isinstance(s, Experiment)]
    assert all(s.why for s in experiments)
    first = next(s for s in experiments if all(s.config[f] for f in PAIR))
    # as a pair of changes, or one factor from a best that already had the other part
    assert first.why.startswith(("combine two changes that did well alone", "one factor")), (
        first.why
    )
    assert PAIR[0] in first.why or PAIR[1] in first.why


def test_pairs_combine_changes_that_did_not_win_alone() -> None:
    """Two changes each within the noise of the best (no win alone) are screened together."""
    base = SPACE.baseline
    tbo, dp = {**base, PAIR[0]: True}, {**base, PAIR[1]: True}
    h = History(SPACE)
    per = {c: 100.0 for c in LEVELS}
    for i, config in enumerate([base, tbo, dp]):
        h.launched(config)
        h.measured(config, i, dict(per), "baseline" if i == 0 else "confirm")
    h.measured(base, 0, {c: 100.5 for c in LEVELS}, "noise")
    r = Reading(SPACE, planner().settings, h)
    assert r.incumbent == base  # neither won alone
    step = combine.pairs(r, base)
    assert isinstance(step, Experiment) and all(step.config[f] for f in PAIR)
    assert step.why.startswith("combine two changes that did well alone")


def test_the_surrogate_proposes_from_an_additive_model() -> None:
    """With the one-factor and pair paths spent, the surrogate's proposal combines measured
    effects into an unmeasured configuration it predicts above the best, and says so."""
    base = SPACE.baseline
    fa3 = {**base, "--attention-backend": "fa3"}
    big = {**base, "--cuda-graph-max-bs": 256}
    h = History(SPACE)
    sweeps = [(base, 100.0), (fa3, 110.0), (big, 106.0)]
    for i, (config, value) in enumerate(sweeps):
        h.launched(config)
        h.measured(config, i, {c: value for c in LEVELS}, "confirm")
    h.measured(base, 0, {c: 100.2 for c in LEVELS}, "noise")
    r = Reading(SPACE, planner().settings, h)
    step = combine.surrogate(r, r.incumbent)
    assert isinstance(step, Experiment) and step.purpose == "surrogate"
    assert step.config["--attention-backend"] == "fa3" and step.config["--cuda-graph-max-bs"] == 256
    assert "additive model" in step.why
