"""Precision where the objective reads (issue 26, item 3): an objective at one level gets no
averaging over levels, so the precision stages measure that level only - a fraction of a full
sweep's time - until the comparison's floor at that level meets the target, within the time the
full sweeps would have spent. Reading.precision counts every sample at the objective's level.
An objective over every level (the geometric mean) is measured as before: full sweeps."""

from __future__ import annotations

from dataclasses import replace

from agent.brains.autopilot import precision
from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.history import History, Launch, Objective
from agent.brains.autopilot.planner import Experiment, Planner, Settings
from agent.brains.autopilot.reading import Reading
from agent.brains.autopilot.steps import FLOOR_SWEEP, WAVES_SWEEP, groups
from sim.space import DEFAULT_LEVELS, default_space
from tools.domain import stats
from tools.domain.space import Flags, SearchSpace

SPACE = SearchSpace.parse(default_space(), check=engine_check("sim"))
LEVELS = tuple(DEFAULT_LEVELS)
BASE = SPACE.baseline
AT_C1 = Objective("level", 1)
# the A/A pair differs by about 3 % at most levels: a floor of about 5 % on one sweep against one
WOBBLE = (1.0, 1.03, 0.97, 1.03, 0.97, 1.03, 0.97, 1.0)
A: Flags = {**BASE, "--cuda-graph-max-bs": 256}
B: Flags = {**A, "--attention-backend": "triton"}


def planner(objective: Objective) -> Planner:
    return Planner(SPACE, Settings(levels=LEVELS, objective=objective))


def after_aa(running: int | None = 0) -> History:
    h = History(SPACE, [Launch(BASE)], running=running)
    h.measured(BASE, 0, {c: 100.0 for c in LEVELS}, "baseline")
    h.measured(BASE, 0, {c: 100.0 * f for c, f in zip(LEVELS, WOBBLE, strict=True)}, "noise")
    return h


def full_sweeps_of_time(level: int, n: int) -> float:
    """How many full sweeps' time n measurements at `level` take, at a flat 100 tok/s per level:
    each level's time is its requests (the autopilot's wave rule) over its throughput."""
    requests = {c: q for cs, q in groups(LEVELS, WAVES_SWEEP, FLOOR_SWEEP, None) for c in cs}
    assert all(q is not None for q in requests.values())
    return n * requests[level] / sum(q for q in requests.values() if q is not None)


def test_a_noisy_aa_measures_the_baseline_again_at_the_objectives_level_only() -> None:
    h = after_aa()
    plan = planner(AT_C1)
    floor = Reading(SPACE, plan.settings, h).floors[1]
    assert floor is not None and 0.04 < floor < 0.07
    extra = 0
    while True:
        step = plan.next_step(h)
        if not (isinstance(step, Experiment) and step.purpose == "noise"):
            break
        assert step.config == BASE and step.levels == (1,), "only the level the objective reads"
        h.measured(BASE, 0, {1: 100.0}, "noise")
        extra += 1
        assert extra <= 50, "bounded"
    samples = 2 + extra
    # the baseline's own mean at C=1 meets the 2 % target, with no more samples than that takes
    assert floor / samples**0.5 <= 0.02 < floor / (samples - 1) ** 0.5
    # and that bought less than the two extra full sweeps the geomean path may spend
    assert full_sweeps_of_time(1, extra) <= precision.MAX_BASELINE_SWEEPS - 2


def test_a_geomean_objective_still_sweeps_the_baseline_again_in_full() -> None:
    h = History(SPACE, [Launch(BASE)], running=0)
    noisy = [1.00, 1.08, 0.93, 1.06, 0.95, 1.07, 0.94, 1.05]
    h.measured(BASE, 0, {c: 100.0 for c in LEVELS}, "baseline")
    h.measured(BASE, 0, {c: 100.0 * f for c, f in zip(LEVELS, noisy, strict=True)}, "noise")
    step = planner(Objective()).next_step(h)
    assert isinstance(step, Experiment) and step.purpose == "noise" and step.levels == LEVELS


def campaign_near_a_tie() -> History:
    """The baseline (A/A and measured at C=1 until its mean is precise), then A (+10 % at C=1)
    as the best, then B, really 3 % above A at C=1, whose one full sweep read 1 % below A."""
    h = after_aa()
    for _ in range(6):
        h.measured(BASE, 0, {1: 100.0}, "noise")
    h.launched(A, serving=True)
    h.measured(A, 1, {c: 110.0 for c in LEVELS}, "confirm")
    h.launched(B, serving=True)
    h.measured(B, 2, {c: 108.9 for c in LEVELS}, "confirm")
    return h


def test_a_candidate_inside_one_sweeps_floor_is_resolved_by_repeats_at_its_level() -> None:
    plan = planner(AT_C1)
    h = campaign_near_a_tie()
    r = Reading(SPACE, plan.settings, h)
    assert r.incumbent == A
    # one sweep against one: the 1 % gap is well inside the comparison's floor
    assert r.precision(B, A) > 0.03
    repeats = 0
    while True:
        step = plan.next_step(h)
        if not (isinstance(step, Experiment) and step.purpose == "repeat"):
            break
        assert step.config == B and step.levels == (1,), "the repeat measures C=1 alone"
        h.measured(B, 2, {1: 113.3}, "repeat")
        repeats += 1
        assert repeats <= 50, "bounded"
    r = Reading(SPACE, plan.settings, h)
    assert r.incumbent == B, "the repeats at C=1 found the better configuration"
    # more samples than the full-sweep path's two extra sweeps, in less time than they take
    assert repeats > precision.MAX_SWEEPS - 1
    assert full_sweeps_of_time(1, repeats) <= precision.MAX_SWEEPS - 1
    # every sample at C=1 counts, one formula: a one-level repeat as a full sweep does
    floor = r.objective_noise
    assert r.precision(B, A) == stats.floor_of_means(floor, 1 + repeats, 1)
    # it stopped because B's own mean met the target (A, on an older launch, is what it is)
    assert floor / (1 + repeats) ** 0.5 <= 0.02


def test_a_geomean_objective_still_repeats_full_sweeps() -> None:
    """The same history under the geometric mean: the repeat, if any, is a full sweep, and the
    floor of a comparison counts full sweeps only."""
    plan = planner(Objective())
    h = campaign_near_a_tie()
    r = Reading(SPACE, plan.settings, h)
    floor = r.objective_noise
    # one-level measurements are not sweeps of a geomean: the baseline counts its two
    assert r.precision(A, BASE) == stats.floor_of_means(floor, 1, 2)
    step = precision.repeat(r, r.incumbent)
    assert step is None or step.levels == LEVELS


def test_a_level_minimum_makes_a_level_alone_cost_more_of_a_sweep() -> None:
    """On a real engine every level lasts at least its minimum (5 s): C=1's few requests take
    that long, not their own time, so measuring it alone costs a larger share of a sweep - and
    the time of the extra full sweeps buys fewer such measurements."""
    h = after_aa()
    settings = Settings(levels=LEVELS, objective=AT_C1, max_tokens=64)
    plain = Reading(SPACE, settings, h)
    cost = precision.level_cost(plain, 1)
    assert cost is not None
    # no minimum: requests x 64 tokens at about 100 tok/s - C=1's 30 requests about 19 s
    assert abs(cost - full_sweeps_of_time(1, 1)) < 0.05 * cost
    # a minimum under every level's own time changes nothing
    short = Reading(SPACE, replace(settings, min_level_s=1.0), h)
    assert precision.level_cost(short, 1) == cost
    # a minimum above every level's own time sets them all: an equal share each
    long = Reading(SPACE, replace(settings, min_level_s=3600.0), h)
    assert precision.level_cost(long, 1) == 1 / len(LEVELS)
    assert precision.level_budget(long, 1, 2) == 2 * len(LEVELS)
    assert precision.level_budget(long, 1, 2) < precision.level_budget(plain, 1, 2)
