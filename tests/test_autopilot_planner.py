"""The planner against the simulator's truth (no servers): it reaches the optimum, cheaply, with
discipline - and it is a pure function of what was measured."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.history import History, Launch, Objective
from agent.brains.autopilot.offline import Noise, sim_truth, simulate
from agent.brains.autopilot.planner import Experiment, Finish, Planner, Settings
from agent.brains.autopilot.steps import PARTIAL
from sim import truth
from sim.space import DEFAULT_LEVELS, default_space
from tools.domain import lab_truth
from tools.domain.space import Flags, SearchSpace

LEVELS = tuple(DEFAULT_LEVELS)
SPACE = SearchSpace.parse(default_space(), check=engine_check("sim"))
GRID = len(SPACE.enumerate())
OPT_CONFIG, OPT = lab_truth.optimum(default_space())


def planner(**settings: object) -> Planner:
    return Planner(SPACE, Settings(levels=LEVELS, **settings))  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(10))
def test_reaches_the_optimum_with_a_quarter_of_the_grid(seed: int) -> None:
    h, finish = simulate(planner(), sim_truth(), seed=seed)
    assert finish.best is not None and not finish.failed
    assert lab_truth.config_value(finish.best) >= 0.98 * OPT
    assert h.launches_used() <= GRID // 4
    assert finish.baseline_value > 0 and finish.value > finish.baseline_value


def _truth_crossover(low: Flags, high: Flags) -> int | None:
    a, b = truth.throughput(low, LEVELS), truth.throughput(high, LEVELS)
    return next((c for c in LEVELS if b[c] >= a[c]), None)


@pytest.mark.parametrize("seed", range(5))
def test_policy_crossover_is_right_within_one_level(seed: int) -> None:
    _, finish = simulate(planner(), sim_truth(), seed=seed)
    assert len(finish.policy) >= 2, "speculation wins at one stream in the lab: a policy"
    low, high = finish.policy[0].config, finish.policy[-1].config
    assert low["--speculative-algorithm"] == "EAGLE3" and not high["--speculative-algorithm"]
    measured = finish.crossover[-1]
    real = _truth_crossover(low, high)
    assert real is not None
    assert abs(LEVELS.index(measured) - LEVELS.index(real)) <= 1
    assert finish.policy[-1].to_concurrency is None
    assert finish.policy[0].from_concurrency == LEVELS[0]


def test_never_relaunches_a_config_except_to_revalidate() -> None:
    h, finish = simulate(planner(), sim_truth(), seed=3)
    counts = Counter(h.key(launch.config) for launch in h.launches)
    again = [k for k, n in counts.items() if n > 1]
    assert again, "the winner is re-validated on a fresh launch"
    assert finish.best is not None and h.key(finish.best) in again
    for key in again:  # re-validation, or the launch pairs of the winner and the baseline
        assert any(
            m.label in ("validate", "pair") for m in h.measurements if h.key(m.config) == key
        )
    assert h.measurements[1].label == "noise"  # the A/A pair comes right after the baseline


def test_learns_from_crashes() -> None:
    real = sim_truth()

    def fa3_crashes(config: Flags, levels: Sequence[int]) -> dict[int, float] | str:
        if config["--attention-backend"] == "fa3":
            return "failed to start: fa3 kernels not built for this GPU"
        return real(config, levels)

    h, finish = simulate(planner(), fa3_crashes, seed=1)
    crashed = [launch for launch in h.launches if "fa3 kernels" in launch.reason]
    # retried once on a base that differs elsewhere, then banned everywhere
    assert len(crashed) == 2, "the change is retried once from another base, then not again"
    assert SPACE.diff(crashed[0].config, crashed[1].config), "the retry is on another base"
    assert "fa3 kernels" in next(iter(h.crashed().values()))[1]
    assert finish.best is not None and finish.best["--attention-backend"] != "fa3"


def test_skip_speculation_and_wrap_up() -> None:
    h, finish = simulate(planner(excluded=("--speculative-algorithm",)), sim_truth(), seed=2)
    assert all(not launch.config["--speculative-algorithm"] for launch in h.launches)
    assert len(finish.policy) <= 1 or all(
        not r.config["--speculative-algorithm"] for r in finish.policy
    )
    h, finish = simulate(planner(wrap_up=True), sim_truth(), seed=2)
    assert [m.label for m in h.measurements] == ["baseline", "noise", "validate"]
    assert finish.best == SPACE.baseline


def test_focus_on_one_level_finds_that_levels_best() -> None:
    objective = Objective(kind="level", level=1)
    h, finish = simulate(planner(objective=objective), sim_truth(), seed=4)
    assert finish.best is not None
    best_at_1 = max(truth.throughput(c, [1])[1] for c in SPACE.enumerate())
    assert truth.throughput(finish.best, [1])[1] >= 0.95 * best_at_1
    screens = [m for m in h.measurements if m.label in ("screen",)]
    assert screens and all(set(m.per_level) == {1} for m in screens)


def test_the_planner_is_a_pure_function_of_the_history() -> None:
    h, _ = simulate(planner(), sim_truth(), seed=5)
    for cut in range(len(h.measurements)):
        prefix = History(SPACE, h.launches, h.measurements[:cut], running=None)
        assert planner().decide(prefix) == planner().decide(prefix)


def test_baseline_that_does_not_start_ends_the_campaign() -> None:
    h = History(SPACE, [Launch(SPACE.baseline, ok=False, reason="CUDA out of memory")])
    step = planner().decide(h)
    assert isinstance(step, Finish) and step.failed and "CUDA out of memory" in step.why


def test_screens_are_cheap_and_confirmations_full() -> None:
    h, _ = simulate(planner(), sim_truth(), seed=6, noise=Noise(level=0.005, screen=0.01))
    for m in h.measurements:
        if m.purpose in PARTIAL:
            assert len(m.per_level) <= 3
        else:
            assert tuple(m.per_level) == LEVELS


def test_first_steps() -> None:
    p = planner()
    step = p.decide(History(SPACE))
    assert isinstance(step, Experiment) and step.purpose == "baseline"
    assert step.config == SPACE.baseline and step.levels == LEVELS
    h = History(SPACE, [Launch(SPACE.baseline)], running=0)
    h.measured(SPACE.baseline, 0, dict.fromkeys(LEVELS, 100.0))
    step = p.decide(h)
    assert isinstance(step, Experiment) and step.purpose == "noise" and not step.fresh
