"""Planning in batches for a fleet (agent/brains/autopilot/batch.py), offline against the
simulator's truth: k free slots give k independent experiments, what the next decisions read
stays serial, boxes that would wait for a confirmation screen ahead of it, and the batched
campaign still finds the optimum. And the [fleet] config."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from agent.brains.autopilot.ask_tell import AskTell, Measured, NotStarted, Sweep
from agent.brains.autopilot.batch import plan_batch, predicted
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
    configuration again (reused_launch), the truth with 1.5 % noise: told through AskTell."""
    got = TRUTH(e.config, e.levels)
    search = AskTell(planner(), h)
    if isinstance(got, str):
        search.tell(e, NotStarted(got))
    else:
        search.tell(e, Measured((Sweep({c: v * rng.gauss(1, 0.015) for c, v in got.items()}),)))


def flying(h: History, experiments: list[Experiment]) -> History:
    """`h` with `experiments` in flight (placed and not come back), as the controller tells them."""
    out = History(h.space, list(h.launches), list(h.measurements), h.running, dict(h.broken))
    for e in experiments:
        out.started(e)
    return out


Call = tuple[list[Experiment], list[Experiment], str]  # (in flight, started, the best's key)


def fleet_campaign(
    slots: int, seed: int, timed: bool = False
) -> tuple[History, Finish, list[list[Experiment]], list[Call]]:
    """The controller's loop with `slots` boxes; trials end in a random order, or `timed`: when
    their time is up (a screen 9 s, a full sweep 25 s, +-10 %, as in the lab)."""
    p, h, rng = planner(), History(SPACE), random.Random(seed)
    in_flight: list[Experiment] = []
    ends: list[float] = []
    now = 0.0
    batches: list[list[Experiment]] = []
    calls: list[Call] = []
    for _ in range(500):
        steps = plan_batch(p, flying(h, in_flight), slots - len(in_flight))
        if steps and isinstance(steps[0], Finish):
            return h, steps[0], batches, calls
        started = [s for s in steps if isinstance(s, Experiment)]
        calls.append((list(in_flight), started, h.key(p.read(h).incumbent)))
        if started:
            batches.append(started)
        in_flight += started
        ends += [now + (25.0 if s.full else 9.0) * rng.uniform(0.9, 1.1) for s in started]
        assert in_flight, "nothing in flight and nothing to start"
        i = ends.index(min(ends)) if timed else rng.randrange(len(in_flight))
        now = max(now, ends.pop(i))
        measure(h, in_flight.pop(i), rng)
    raise AssertionError("the campaign did not conclude")


def measured(h: History, purpose: str) -> list[Measurement]:
    return [m for m in h.measurements if m.purpose == purpose]


def test_first_batch_is_the_a_a_pair_and_a_screen_beside_it() -> None:
    steps = plan_batch(planner(), History(SPACE), 3)
    assert [s.purpose for s in steps if isinstance(s, Experiment)] == [
        "baseline",
        "noise",
        "screen",
    ]
    # a screen does not read the noise floor; a confirmation would: none while the A/A runs
    p, h, rng = planner(), History(SPACE), random.Random(0)
    pair = [s for s in steps[:2] if isinstance(s, Experiment)]
    screen = steps[2]
    for _ in range(4):
        assert isinstance(screen, Experiment) and screen.purpose == "screen"
        measure(h, screen, rng)  # screens end one after another beside the A/A
        nxt = plan_batch(p, flying(h, pair), 1)
        if not nxt:
            break
        assert len(nxt) == 1
        screen = nxt[0]


def test_k_free_slots_give_k_screens_of_different_neighbours() -> None:
    p, h, rng = planner(), History(SPACE), random.Random(0)
    for e in plan_batch(p, h, 2):
        assert isinstance(e, Experiment)
        measure(h, e, rng)
    steps = plan_batch(p, h, 3)
    assert len(steps) == 3
    assert all(isinstance(s, Experiment) and s.purpose == "screen" for s in steps)
    assert len({h.key(s.config) for s in steps if isinstance(s, Experiment)}) == 3
    # with those three in flight, one more slot gets a fourth neighbour, not one of them
    more = plan_batch(p, flying(h, [s for s in steps if isinstance(s, Experiment)]), 1)
    assert len(more) == 1 and isinstance(more[0], Experiment)
    assert h.key(more[0].config) not in {h.key(s.config) for s in steps}  # type: ignore[union-attr]


def first_screens() -> tuple[Planner, History, list[Experiment], random.Random]:
    """The A/A pair and the first three screens of the default space measured."""
    p, h, rng = planner(), History(SPACE), random.Random(0)
    for e in plan_batch(p, h, 2):
        measure(h, e, rng)  # type: ignore[arg-type]
    screens = [s for s in plan_batch(p, h, 3) if isinstance(s, Experiment)]
    for s in screens:
        measure(h, s, rng)
    return p, h, screens, rng


def test_promising_screens_are_confirmed_together_and_screens_run_ahead() -> None:
    """Two screens that may beat the best, measured one after the other: both are confirmed at
    once (on one box only the latest would be looked at). The free boxes do not screen the
    current best's neighbours (a confirmation that wins makes them stale) but those of the
    best the screens predict; the previous batch held them."""
    p, h, screens, _ = first_screens()
    inc = p.read(h).incumbent
    r = p.read(h)
    promising = [
        s for s in screens if (r.compare(s.config, inc, s.levels)[0] or 0) >= 1 - r.objective_noise
    ]
    assert len(promising) >= 2, "the default space's first screens: fa3 and another may win"
    held = plan_batch(p, h, 3, screen_ahead=False)
    confirms = [s for s in held if isinstance(s, Experiment) and s.purpose == "confirm"]
    assert {h.key(s.config) for s in confirms} == {h.key(s.config) for s in promising}
    assert len(confirms) == len(held)  # the previous batch: the third box waits
    assert plan_batch(p, flying(h, confirms), 2, screen_ahead=False) == []
    assert plan_batch(p, h, 3)[: len(confirms)] == confirms  # now: it screens ahead
    ahead = plan_batch(p, flying(h, confirms), 2)
    assert len(ahead) == 2 and all(isinstance(s, Experiment) for s in ahead)
    # the predicted best: the confirmation whose screen did best against the best now
    best = max(confirms, key=lambda c: r.compare(c.config, inc, c.levels)[0] or 0)
    assert h.key(best.config) != h.key(inc)
    for s in ahead:
        assert isinstance(s, Experiment) and s.purpose == "screen"
        assert s.base is not None and h.key(s.base) == h.key(best.config)
        assert len(SPACE.diff(best.config, s.config)) == 1  # a neighbour of the predicted best
        assert not h.tried(s.config)


def test_a_screen_run_ahead_is_judged_when_it_ends_before_its_confirmation() -> None:
    """A screen run ahead ends before the confirmation it ran ahead of; once the confirmation
    is measured, the screen (the optimum here: fa3 with cuda-graph-max-bs 256) is confirmed -
    it is not lost behind the full sweep that ended after it."""
    p, h, _, rng = first_screens()
    confirms = [s for s in plan_batch(p, h, 3, screen_ahead=False) if isinstance(s, Experiment)]
    ahead = [s for s in plan_batch(p, flying(h, confirms), 2) if isinstance(s, Experiment)]
    for s in ahead:
        measure(h, s, rng)
    for c in confirms:
        measure(h, c, rng)
    optimum = [s for s in ahead if SPACE.key(s.config) == SPACE.key(OPT_CONFIG)]
    assert optimum, "fa3 is the predicted best; fa3 with 256 one of its first neighbours"
    nxt = [s for s in plan_batch(p, h, 3) if isinstance(s, Experiment)]
    assert ("confirm", SPACE.key(OPT_CONFIG)) in {(s.purpose, h.key(s.config)) for s in nxt}


def test_a_full_sweep_is_predicted_from_its_screen_and_its_nearest_swept_relative() -> None:
    base, fa3 = SPACE.baseline, {**SPACE.baseline, "--attention-backend": "fa3"}
    swept = {c: 100.0 * c for c in LEVELS}
    measured = [
        Measurement(base, 0, swept, "baseline"),
        Measurement(fa3, 1, {1: 110.0, 10: 1000.0, 250: 22500.0}, "screen"),
    ]
    h = History(SPACE, [Launch(base), Launch(fa3)], measured)
    e = Experiment(fa3, LEVELS, "confirm", "why", base=base)
    got = predicted(h, e, LEVELS)
    assert got is not None and set(got) == set(LEVELS)
    assert got[1] == 110.0 and got[10] == 1000.0 and got[250] == 22500.0  # measured: as is
    assert got[2] == pytest.approx(200 * 1.1)  # nearest measured level on a log scale: 1
    assert got[30] == pytest.approx(3000 * 1.0)  # 10
    assert got[100] == pytest.approx(10000 * 0.9)  # 250
    unmeasured = {**base, "--cuda-graph-max-bs": 256}
    assert predicted(h, Experiment(unmeasured, LEVELS, "confirm", "why"), LEVELS) is None


# one campaign of each order in the fast suite (a second or two: the planner is asked k+1 times
# per trial); more in the slow stage
@pytest.mark.parametrize(
    ("seed", "timed"),
    [
        (0, False),
        (2, True),
        *(pytest.param(s, False, marks=pytest.mark.slow) for s in (1, 2, 3)),
        *(pytest.param(s, True, marks=pytest.mark.slow) for s in (0, 1, 3)),
    ],
)
def test_a_batched_campaign_on_three_boxes_finds_the_optimum(seed: int, timed: bool) -> None:
    h, finish, batches, calls = fleet_campaign(3, seed, timed)
    assert finish.best is not None and not finish.failed
    assert lab_truth.config_value(finish.best) >= 0.98 * OPT
    assert max(len(b) for b in batches) == 3  # the fleet was used in parallel
    assert h.launches_used() <= Settings(levels=LEVELS).max_launches
    assert measured(h, "validate")  # a launch kept to re-validate
    # the experiments of a batch are independent: no configuration twice, and a re-validation
    # is batched only with re-validations (the winner and the challenger, fresh launches)
    for b in batches:
        assert len({(e.purpose, h.key(e.config)) for e in b}) == len(b)
        if any(e.purpose == "validate" for e in b):
            assert all(e.purpose == "validate" for e in b)
    # while a confirmation runs, free boxes screen ahead of it: neighbours of the best or of a
    # configuration being confirmed (the predicted best), never of a configuration left behind;
    # nothing but screens beside the A/A pair
    ahead = 0
    for in_flight, started, best in calls:
        confirming = {h.key(e.config) for e in [*in_flight, *started] if e.purpose == "confirm"}
        for e in started:
            if confirming and e.purpose == "screen":
                # a crash retried without its suspected flags (retry.py) starts from a measured
                # configuration that lacks them, by design
                retry = e.why.startswith("retry ")
                assert e.base is not None and (h.key(e.base) in {best, *confirming} or retry)
                ahead += 1
        if any(e.purpose in ("baseline", "noise") for e in in_flight):
            assert all(e.purpose in ("noise", "screen") for e in started)
    if timed:  # a confirmation (25 s) outlasts the screens (9 s) that end beside it
        assert ahead, "no screen ran ahead of a confirmation"


def test_a_fleet_of_one_decides_as_one_box() -> None:
    """One slot: plan_batch proposes exactly what the planner does, step by step."""
    p, h, rng = planner(), History(SPACE), random.Random(1)
    for _ in range(60):
        steps = plan_batch(p, h, 1)
        step = p.next_step(h)
        assert len(steps) == 1 and steps[0] == step
        if isinstance(step, Finish):
            return
        measure(h, step, rng)
    raise AssertionError("the campaign did not conclude")


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
