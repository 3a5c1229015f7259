"""The stop signal against physics (issue 48, agent/brains/autopilot/physics_stop.py): once the
best configuration without speculation is within the noise of the ceiling flags reach (80 % of a
memory-bound floor) at every level the objective reads, the autopilot explores speculation only.
The rule (physics.Headroom.flags_spent) on constructed data, the planner on a constructed History,
and whole campaigns on the simulator: the space whose optimum sits at that ceiling
(sim/profiles/at-the-floor.toml) and the reference lab, where it never fires."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from agent.brains.autopilot import AutopilotBrain, physics_stop
from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.history import History, Objective
from agent.brains.autopilot.offline import Noise, sim_floors, sim_truth, simulate
from agent.brains.autopilot.planner import Experiment, Planner, Settings
from agent.brains.autopilot.steps import PARTIAL
from agent.report import write_report
from agent.session import Limits, make_agent, start
from sim.space import load_lab
from state.events import read_events
from tests.autopilot_world import lab, world
from tools.domain.config import Config
from tools.domain.physics import headroom_of
from tools.domain.space import Flags, SearchSpace
from tools.servers.profiles import SIM
from tools.servers.speculation import speculative_flags

SPEC = ("--speculative-algorithm", "--speculative-num-steps")


def test_the_rule_fires_only_when_every_level_is_memory_bound_and_within_the_noise() -> None:
    near = headroom_of({1: (0.79, "memory"), 2: (0.785, "memory")}, 0.02)
    assert near.flags_spent  # 0.80 / 0.785 - 1 = 1.9 % < 2 %
    assert "flags could still add at most 1.9% (C=2)" in near.spent_line()
    assert not headroom_of({1: (0.79, "memory"), 2: (0.70, "memory")}, 0.02).flags_spent
    assert not headroom_of({1: (0.79, "memory")}, None).flags_spent  # the noise unknown
    # a level of another bound has no ceiling: the report's flags_done reads memory levels only
    mixed = headroom_of({1: (0.79, "memory"), 250: (0.30, "compute")}, 0.02)
    assert mixed.flags_done and not mixed.flags_spent
    assert headroom_of({1: (1.6, "memory")}, 0.02).flags_spent  # past the ceiling: 0 left
    assert not headroom_of({}, 0.02).flags_spent


SPACE = SearchSpace.parse(
    {
        "--knob": [False, True],
        "--other": [1, 2, 4],
        "--speculative-algorithm": [False, "EAGLE3"],
        "--speculative-num-steps": [1, 3],
        "requires": {"--speculative-num-steps": {"--speculative-algorithm": "EAGLE3"}},
        "baseline": {
            "--knob": False,
            "--other": 1,
            "--speculative-algorithm": False,
            "--speculative-num-steps": False,
        },
    }
)
BASE = SPACE.baseline
LEVELS = (1, 8)
FLOORS = {1: (200.0, "memory"), 8: (1500.0, "memory")}


def campaign(knob: dict[int, float], floors: dict[int, tuple[float, str]] | None) -> History:
    """The baseline swept twice, then --knob swept twice at about `knob`: a noise floor of
    about 2 %."""
    h = History(SPACE)
    best = {**BASE, "--knob": True}
    for config, per in ((BASE, {1: 120.0, 8: 900.0}), (BASE, {1: 123.0, 8: 918.0})):
        h.launched(config)
        h.measured(config, len(h.launches) - 1, per, "baseline")
        h.floored(config, floors or {})
    for scale in (1.0, 1.01):
        h.launched(best)
        h.measured(best, len(h.launches) - 1, {c: v * scale for c, v in knob.items()}, "confirm")
        h.floored(best, floors or {})
    return h


def next_of(h: History) -> Experiment:
    settings = Settings(levels=LEVELS, speculative=SPEC)
    step = Planner(SPACE, settings).next_step(h)
    assert isinstance(step, Experiment)
    return step


def test_at_the_ceiling_the_planner_explores_speculation_only() -> None:
    h = campaign({1: 163.0, 8: 1220.0}, FLOORS)  # 81.9 % and 81.7 % of the floor
    step = next_of(h)
    assert step.purpose in PARTIAL
    assert set(SPACE.diff({**BASE, "--knob": True}, step.config)) <= set(SPEC)
    assert step.why.startswith("against physics, flags are spent")


def test_below_the_ceiling_or_without_floors_it_explores_flags() -> None:
    for h in (
        campaign({1: 150.0, 8: 1220.0}, FLOORS),  # C=1 at 75 %: flags could add 6.7 %
        campaign({1: 163.0, 8: 1220.0}, None),  # the box is not described
        campaign({1: 163.0, 8: 1220.0}, {1: FLOORS[1], 8: (1500.0, "compute")}),
    ):
        step = next_of(h)
        assert "--other" in SPACE.diff({**BASE, "--knob": True}, step.config)
        assert physics_stop.spent(Planner(SPACE, Settings(levels=LEVELS)).read(h)) is None


def test_one_sweep_at_the_ceiling_is_not_enough_to_stop() -> None:
    """A share is taken down by the noise of its mean: one sweep at 80 % of the floor may be a
    lucky one of a configuration short of the ceiling (on at-the-floor, one seed of ten stopped
    at 0.75 of the gain when it was not)."""
    h = History(SPACE)
    for per in ({1: 120.0, 8: 900.0}, {1: 123.0, 8: 918.0}):
        h.launched(BASE)
        h.measured(BASE, len(h.launches) - 1, per, "baseline")
        h.floored(BASE, FLOORS)
    best = {**BASE, "--knob": True}
    h.launched(best)
    h.measured(best, len(h.launches) - 1, {1: 160.0, 8: 1200.0}, "confirm")
    h.floored(best, FLOORS)
    r = Planner(SPACE, Settings(levels=LEVELS, speculative=SPEC)).read(h)
    shares = physics_stop.best_shares(r)
    assert shares[1][0] == pytest.approx(0.80 / (1 + r.level_noise / 2**0.5))
    assert physics_stop.spent(r) is None


def test_an_objective_at_one_level_reads_that_level_alone() -> None:
    h = campaign({1: 163.0, 8: 1000.0}, FLOORS)  # C=8 at 67 %, outside the objective
    assert physics_stop.spent(Planner(SPACE, Settings(levels=LEVELS)).read(h)) is None
    one = Settings(levels=LEVELS, objective=Objective("level", 1), speculative=SPEC)
    assert physics_stop.spent(Planner(SPACE, one).read(h)) is not None


def test_a_speculative_configuration_past_the_floor_does_not_spend_the_flags() -> None:
    h = campaign({1: 150.0, 8: 1190.0}, FLOORS)
    spec = {
        **BASE,
        "--knob": True,
        "--speculative-algorithm": "EAGLE3",
        "--speculative-num-steps": 3,
    }
    for _ in range(2):
        h.launched(spec)
        h.measured(spec, len(h.launches) - 1, {1: 300.0, 8: 1600.0}, "confirm")
        h.floored(spec, FLOORS)
    settings = Settings(levels=LEVELS, speculative=SPEC)
    assert physics_stop.spent(Planner(SPACE, settings).read(h)) is None


def run(name: str, seed: int, floors: bool) -> tuple[History, Flags | None, Settings]:
    lab = load_lab(name, None)
    command = shlex.join(["python", "-m", "sim", *lab.base])
    space = SearchSpace.parse(lab.space, check=engine_check("sim", command))
    kind = (lab.objective or {}).get("kind", "geomean")
    objective = Objective(str(kind), (lab.objective or {}).get("level"))
    spec = speculative_flags(SIM, space.flags, space.requires)
    settings = Settings(levels=tuple(lab.levels), objective=objective, speculative=spec)
    told = sim_floors(max_tokens=128, base=lab.base) if floors else None
    h, finish = simulate(
        Planner(space, settings),
        sim_truth(max_tokens=128, base=lab.base),
        seed=seed,
        noise=Noise(level=0.02, screen=0.03, launch=0.005),
        floors=told,
    )
    return h, finish.best, settings


def test_on_a_space_whose_optimum_sits_at_the_ceiling_it_saves_launches() -> None:
    from sim.truth import level_throughput, model_of

    lab = load_lab("at-the-floor", None)
    with_floor, best, settings = run("at-the-floor", 0, floors=True)
    blind, blind_best, _ = run("at-the-floor", 0, floors=False)
    assert with_floor.launches_used() < blind.launches_used()

    def value(c: Flags | None) -> float:
        return level_throughput(model_of(c or {}, lab.base), 1, 512, 128)

    assert value(best) >= 0.98 * value(blind_best)
    # once the signal is on, what is explored changes speculation alone
    stopped = physics_stop.spent(Planner(blind.space, settings).read(with_floor))
    assert stopped is not None


def test_the_reference_lab_never_fires_the_same_campaign() -> None:
    """The built-in lab's best shares are 10-19 % of the floor: the floors change nothing."""
    with_floor, best, _ = run("default", 0, floors=True)
    blind, blind_best, _ = run("default", 0, floors=False)
    assert [x.config for x in with_floor.launches] == [x.config for x in blind.launches]
    assert best == blind_best
    assert with_floor.floors and not blind.floors


async def test_the_autopilot_says_where_flags_stopped_and_the_report_shows_it(
    tmp_path: Path,
) -> None:
    """Through the real loop and the real todo and recommend tools, on at-the-floor (the fast
    stand-in of tests/autopilot_world.py, its benchmark events carrying each level's floor):
    the narration says once why exploring stops, the launches planned under the signal carry
    it in their `planned` event and change speculation alone when they explore, the todo list
    says so, and the report shows where it stopped."""
    found = load_lab("at-the-floor", None)
    base = lab()
    command = shlex.join([sys.executable, "-m", "sim", *found.base])
    config = Config.model_validate(
        {
            **base.model_dump(),
            "server": {**base.server.model_dump(), "command": command},
            "bench": {**base.bench.model_dump(), "concurrency": found.levels},
            "search": found.space,
            "objective": {"kind": "level", "level": 1},
        }
    )
    run = start("beat baseline", config, "autopilot", tmp_path, None, Limits(max_steps=400))
    agent = make_agent(run, AutopilotBrain(config), config, tools=world(0, base=found.base))
    try:
        assert await agent.run_loop() == 0
    finally:
        if agent.ctx.hosts is not None:
            await agent.ctx.hosts.close()
    plans = list(run.state.plans.values())
    stopped = [p for p in plans if p.get("physics")]
    assert stopped and stopped[0]["physics"].startswith("against physics, flags are spent")
    assert stopped == plans[len(plans) - len(stopped) :]  # once on, it stays on
    space = SearchSpace.parse(config.search)
    spec = set(speculative_flags(SIM, space.flags, space.requires))
    for p in stopped:
        if p["purpose"] in PARTIAL:
            assert set(space.diff(p["base"], p["flags"])) <= spec, p
    said = [
        b["text"]
        for m in run.state.messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "text" and "Exploring stops but for speculation" in b["text"]
    ]
    assert len(said) == 1
    todos = [
        e["todos"] for e in read_events(run.path / "events.jsonl").events if e["type"] == "todo"
    ]
    assert any("stopped against physics" in t["content"] for ts in todos for t in ts)
    write_report(run)
    assert "The autopilot stopped exploring flags" in (run.path / "report.md").read_text()
    run.close()
