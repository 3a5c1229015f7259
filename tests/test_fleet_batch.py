"""Planning in batches for a fleet (agent/brains/autopilot/batch.py), offline against the
simulator's truth: k free slots give k independent experiments, what the next decisions read
stays serial, and the batched campaign still finds the optimum. And the [fleet] config."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from agent.brains.autopilot.batch import plan_batch, reused_launch
from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.history import History, Launch, Measurement
from agent.brains.autopilot.offline import sim_truth
from agent.brains.autopilot.planner import Experiment, Finish, Planner, Settings
from sim.space import DEFAULT_LEVELS, default_space
from tools.domain import lab_truth
from tools.domain.config import ConfigError, load_config
from tools.domain.space import SearchSpace

LEVELS = tuple(DEFAULT_LEVELS)
SPACE = SearchSpace.parse(default_space(), check=engine_check("sim"))
OPT_CONFIG, OPT = lab_truth.optimum(default_space())
TRUTH = sim_truth()


def planner() -> Planner:
    return Planner(SPACE, Settings(levels=LEVELS))


def measure(h: History, e: Experiment, rng: random.Random) -> None:
    """A trial as the fleet controller records it: a launch unless it measures a launched
    configuration again (reused_launch), the truth with 1.5 % noise."""
    got = TRUTH(e.config, e.levels)
    if isinstance(got, str):
        h.launches.append(Launch(e.config, ok=False, reason=got))
        return
    launch = reused_launch(h, e)
    if launch is None:
        h.launches.append(Launch(e.config))
        launch = len(h.launches) - 1
    per = {c: v * rng.gauss(1, 0.015) for c, v in got.items()}
    h.measurements.append(Measurement(e.config, launch, per, e.purpose))


def fleet_campaign(slots: int, seed: int) -> tuple[History, Finish, list[list[Experiment]]]:
    """The controller's loop with `slots` boxes; trials end in a random order."""
    p, h, rng = planner(), History(SPACE), random.Random(seed)
    in_flight: list[Experiment] = []
    batches: list[list[Experiment]] = []
    for _ in range(500):
        steps = plan_batch(p, h, in_flight, slots - len(in_flight))
        if steps and isinstance(steps[0], Finish):
            return h, steps[0], batches
        started = [s for s in steps if isinstance(s, Experiment)]
        if started:
            batches.append(started)
        in_flight += started
        assert in_flight, "nothing in flight and nothing to start"
        measure(h, in_flight.pop(rng.randrange(len(in_flight))), rng)
    raise AssertionError("the campaign did not conclude")


def test_first_batch_is_the_baseline_and_its_repeat_on_two_boxes() -> None:
    steps = plan_batch(planner(), History(SPACE), [], 3)
    assert [s.purpose for s in steps if isinstance(s, Experiment)] == ["baseline", "noise"]
    # nothing else while the A/A pair is in flight: everything after it reads the noise floor
    assert plan_batch(planner(), History(SPACE), [*steps], 1) == []  # type: ignore[list-item]


def test_k_free_slots_give_k_screens_of_different_neighbours() -> None:
    p, h, rng = planner(), History(SPACE), random.Random(0)
    for e in plan_batch(p, h, [], 2):
        assert isinstance(e, Experiment)
        measure(h, e, rng)
    steps = plan_batch(p, h, [], 3)
    assert len(steps) == 3
    assert all(isinstance(s, Experiment) and s.purpose == "screen" for s in steps)
    assert len({h.key(s.config) for s in steps if isinstance(s, Experiment)}) == 3
    # with those three in flight, one more slot gets a fourth neighbour, not one of them
    more = plan_batch(p, h, [s for s in steps if isinstance(s, Experiment)], 1)
    assert len(more) == 1 and isinstance(more[0], Experiment)
    assert h.key(more[0].config) not in {h.key(s.config) for s in steps}  # type: ignore[union-attr]


# one seed in the fast suite (a few seconds: the planner is asked k+1 times per trial); more in
# the slow stage
@pytest.mark.parametrize(
    "seed", [0, *(pytest.param(s, marks=pytest.mark.slow) for s in range(1, 4))]
)
def test_a_batched_campaign_on_three_boxes_finds_the_optimum(seed: int) -> None:
    h, finish, batches = fleet_campaign(3, seed)
    assert finish.best is not None and not finish.failed
    assert lab_truth.config_value(finish.best) >= 0.98 * OPT
    assert max(len(b) for b in batches) == 3  # the fleet was used in parallel
    assert h.launches_used() <= Settings(levels=LEVELS).max_launches
    assert any(m.purpose == "validate" for m in h.measurements)  # a launch kept to re-validate
    # one re-validation at a time: never in a batch with anything else
    assert all(len(b) == 1 for b in batches if any(e.purpose == "validate" for e in b))


def test_fleet_config_is_validated_with_one_line_errors(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[server]\nengine = "sim"\n[fleet]\naddress = "ray://head:10001"\n')
    fleet = load_config(path).fleet
    assert fleet is not None and fleet.address == "ray://head:10001"
    assert fleet.resources == {"box": 1.0}
    for bad, word in [
        ('address = "http://head"', "ray://host:port"),
        ("max_trials = 0", "max_trials"),
        ("resources = { GPU = 0 }", "GPU"),
        ('engine = "dask"', "engine"),
        ("workers = 3", "workers"),
    ]:
        path.write_text(f'[server]\nengine = "sim"\n[fleet]\n{bad}\n')
        with pytest.raises(ConfigError) as err:
            load_config(path)
        assert word in str(err.value) and "\n" not in str(err.value)
