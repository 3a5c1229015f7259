"""Ask and tell (agent/brains/autopilot/ask_tell.py, issue 30.4): the coordinators - the one-box
brain, the fleet controller, the offline study and the fleet model - ask the planner for the next
experiments and tell it outcomes only through AskTell; a tell records through the History's writer
exactly what the outcome says; asking changes nothing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agent.brains.autopilot.ask_tell import (
    AskTell,
    Beside,
    Broken,
    Dueted,
    Measured,
    NotStarted,
    Started,
    Sweep,
)
from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.history import Objective
from agent.brains.autopilot.offline import sim_truth, simulate
from agent.brains.autopilot.planner import Experiment, Finish, Planner, Settings
from sim.space import DEFAULT_LEVELS, default_space
from tools.domain.space import SearchSpace

ROOT = Path(__file__).resolve().parent.parent
COORDINATORS = [
    ROOT / "agent" / "brains" / "autopilot" / "brain.py",
    ROOT / "agent" / "brains" / "autopilot" / "narrate.py",
    ROOT / "agent" / "brains" / "autopilot" / "offline.py",
    ROOT / "agent" / "fleet" / "controller.py",
    ROOT / "agent" / "fleet" / "resume.py",
    ROOT / "benchmarks" / "efficiency.py",
    ROOT / "benchmarks" / "fleet_speedup.py",
]
# what only AskTell calls: the planner's decisions, the batch planner, the History's writer
INSIDE = {"decide", "next_step", "plan_batch", "reused_launch", "record_trial"}
WRITERS = {"launched", "measured", "measured_more", "broke", "serving_nothing", "started", "ended"}
# the planner's own conclusion (AskTell.conclusion); "finish" alone also names a run's or a
# campaign's end, so only a call on something named planner counts
PLANNER_ONLY = {"finish"}
LEVELS = tuple(DEFAULT_LEVELS)
SPACE = SearchSpace.parse(default_space(), check=engine_check("sim"))
BASE = SPACE.baseline
FA3 = SPACE.complete({**BASE, "--attention-backend": "fa3"})


def reaches_in(source: str) -> list[tuple[int, str]]:
    """(line, name) of each call that reaches past AskTell into the planner or the History."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in INSIDE | WRITERS:
                found.append((node.lineno, name))
            elif name in PLANNER_ONLY and isinstance(f, ast.Attribute):
                owner = f.value  # planner.finish or self.planner.finish
                who = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
                if who == "planner":
                    found.append((node.lineno, name))
    return found


def test_the_coordinators_ask_and_tell_only_through_ask_tell() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name}()"
        for path in COORDINATORS
        for line, name in reaches_in(path.read_text())
    ]
    assert not offenders, "ask and tell through AskTell:\n" + "\n".join(offenders)


def test_the_scan_sees_a_coordinator_reach_in() -> None:
    code = (
        "s = planner.decide(h)\nb = plan_batch(p, h, [], 2)\nh.launched(c)\nok = search.suggest()\n"
        "f = self.planner.finish(h)\ng = planner.finish(h)\nself.finish(step)\nagent.finish(1)\n"
    )
    assert reaches_in(code) == [
        (1, "decide"),
        (2, "plan_batch"),
        (3, "launched"),
        (5, "finish"),
        (6, "finish"),
    ]


def search() -> AskTell:
    return AskTell(Planner(SPACE, Settings(levels=LEVELS)))


def test_asking_changes_nothing_and_gives_the_same_answer() -> None:
    s = search()
    first = s.suggest()
    assert isinstance(first, Experiment) and first.purpose == "baseline"
    assert s.suggest() == first and s.suggest_batch(3) == s.suggest_batch(3)
    assert s.history.launches == [] and s.history.measurements == []


def test_each_outcome_is_recorded_as_it_says() -> None:
    s = search()
    screen = Experiment(FA3, (1, 8), "screen", "a neighbour", fresh=True)  # a launch each time
    assert s.tell(screen, NotStarted("refused: no fa3 here")) == 0
    assert s.history.crashed()[SPACE.key(FA3)][1] == "refused: no fa3 here"
    assert s.tell(screen, Broken("the benchmark never answered")) == 1
    assert s.history.launches[1].ok and s.history.broken == {1: "the benchmark never answered"}
    # a sweep in two groups of levels is one measurement, its ids in order, its purpose its label
    two = Measured((Sweep({8: 400.0}, {8: True}, ("r1",)), Sweep({1: 90.0}, {1: False}, ("r2",))))
    assert s.tell(screen, two) == 2
    m = s.history.measurements[-1]
    assert (m.per_level, m.slo_ok, m.ids, m.label) == (
        {1: 90.0, 8: 400.0},
        {1: False, 8: True},
        ("r1", "r2"),
        "screen",
    )


def test_a_measurement_is_on_the_server_up_or_the_launch_it_measures_again() -> None:
    s = search()
    screen = Experiment(FA3, (1, 8), "screen", "a neighbour", fresh=True)
    confirm = Experiment(FA3, LEVELS, "confirm", "it may win")
    validate = Experiment(FA3, LEVELS, "validate", "again, fresh", fresh=True)
    # one box: started, measured on it; the confirmation measures the same server again
    assert s.needs_launch(screen)
    up = s.tell(screen, Started())
    assert s.history.running == up and not s.needs_launch(screen)  # up and not measured yet
    assert s.tell(screen, Measured((Sweep({1: 90.0, 8: 400.0}),))) == up
    assert not s.needs_launch(confirm) and s.needs_launch(validate)  # fresh: a new server
    assert s.tell(confirm, Measured((Sweep(dict.fromkeys(LEVELS, 1.0)),), "confirm-L01")) == up
    # a fleet (no server up): a confirmation reuses the launch, a fresh one is a launch
    s.history.serving_nothing()
    assert s.tell(confirm, Measured((Sweep(dict.fromkeys(LEVELS, 1.0)),))) == up
    assert s.tell(validate, Measured((Sweep(dict.fromkeys(LEVELS, 1.0)),))) == up + 1
    assert [m.launch for m in s.history.measurements] == [up, up, up, up + 1]
    assert s.history.measurements[1].label == "confirm-L01"


def test_a_campaign_asked_and_told_concludes_as_simulate_does() -> None:
    """simulate through a given AskTell and through a bare planner: the same History and end."""
    s = search()
    h, finish = simulate(s, sim_truth(), seed=3)
    h2, finish2 = simulate(Planner(SPACE, Settings(levels=LEVELS)), sim_truth(), seed=3)
    assert h is s.history and isinstance(finish, Finish) and finish == finish2
    assert h.measurements == h2.measurements and h.launches == h2.launches
    assert s.suggest() == finish and s.conclusion().best == finish.best


def test_one_box_the_experiment_in_flight_is_state_and_measured_next() -> None:
    """Told started, an experiment is in the History's in_flight (no re-planning names it): it is
    what is asked next, whatever the planner would propose now; measured, it is no longer."""
    s = search()
    screen = Experiment(FA3, (1, 8), "screen", "a neighbour told by hand", fresh=True)
    up = s.tell(screen, Started())
    assert s.history.in_flight == [screen] and s.history.running == up
    assert s.suggest() == screen  # the planner alone would sweep the baseline first
    assert s.planner.next_step(s.history) != screen
    s.tell(screen, Measured((Sweep({1: 90.0, 8: 400.0}),)))
    assert s.history.in_flight == [] and s.suggest() != screen


def test_a_fresh_launch_with_nothing_in_flight_is_read_as_launched() -> None:
    """The planner does not re-plan a launch not measured yet: with no experiment in flight, a
    History's server up and unmeasured is a launch like any other - its configuration tried, so
    the next screen is another neighbour (decide is next_step)."""
    s = search()
    for value in (100.0, 100.5):  # the baseline and its A/A repeat, on one server
        step = s.suggest()
        assert isinstance(step, Experiment) and step.purpose in ("baseline", "noise")
        s.tell(step, Started()) if s.needs_launch(step) else None
        s.tell(step, Measured((Sweep(dict.fromkeys(LEVELS, value)),)))
    screen = s.suggest()
    assert isinstance(screen, Experiment) and screen.purpose == "screen"
    s.history.launched(screen.config, serving=True)  # by hand: no experiment told in flight
    assert s.history.in_flight == []
    nxt = s.suggest()
    assert nxt == s.planner.next_step(s.history) and nxt != screen


def test_resume_names_the_experiment_the_server_up_was_launched_for() -> None:
    """A one-box log records the launch, not its purpose: resume names it in flight as the
    planner named it from the History before the launch - and only a launch it would make."""
    s = search()
    baseline = s.suggest()
    assert isinstance(baseline, Experiment)
    s.history.launched(BASE, serving=True)
    s.resume()
    assert s.history.in_flight == [baseline] and s.suggest() == baseline
    other = search()
    other.history.launched(FA3, serving=True)  # not what the planner asks first
    other.resume()
    assert other.history.in_flight == []


def test_a_fleet_places_and_cancels_through_the_history() -> None:
    """Placed, an experiment is in flight in the History and suggest_batch plans beside it (the
    baseline in flight: its A/A repeat next); cancelled, it is planned again."""
    s = search()
    first = s.suggest_batch(1)
    assert [e.purpose for e in first if isinstance(e, Experiment)] == ["baseline"]
    s.placed(first[0])  # type: ignore[arg-type]
    assert s.history.in_flight == first
    nxt = s.suggest_batch(1)
    assert [e.purpose for e in nxt if isinstance(e, Experiment)] == ["noise"]
    s.cancelled(first[0])  # type: ignore[arg-type]
    assert s.history.in_flight == [] and s.suggest_batch(1) == first


def test_a_duet_is_told_as_the_server_beside_then_its_rounds() -> None:
    """Side by side, the offline campaign proves its winner as the one-box brain does: the
    baseline told launched beside the winner's fresh server (`Beside`), then the rounds
    (`Dueted`): both launches measured each round, one Duet, the server beside gone; the
    conclusion reads the duet's rounds. A server beside that did not start makes no duet: the
    proof falls back to launch pairs."""
    settings = Settings(levels=LEVELS, side_by_side=True)
    h, finish = simulate(Planner(SPACE, settings), sim_truth(), seed=1)
    assert len(h.duets) >= 1 and h.side.launch is None
    duet = h.duets[-1]
    assert finish.best is not None and h.key(duet.b) == h.key(finish.best)
    assert h.key(duet.a) == h.key(BASE)
    rounds = [m for m in h.measurements if m.purpose == "duet"]
    assert len(rounds) == 2 * sum(len(d.rounds) for d in h.duets)  # both sides, each round
    assert len({m.launch for m in rounds[-2 * len(duet.rounds) :]}) == 2
    assert finish.paired is not None and finish.paired.unit == "duet round"
    assert finish.paired.n == len(duet.rounds) and finish.established
    # an objective at one level: each round decided on that level's ratio, as the duet tool does
    # (a round's geometric mean over the levels had stopped it before the level was proven)
    one = Settings(levels=LEVELS, side_by_side=True, objective=Objective("level", 1))
    h, finish = simulate(Planner(SPACE, one), sim_truth(), seed=1)
    assert h.duets and finish.paired is not None and finish.established
    a, b = h.duets[-1].rounds[-1]
    assert finish.paired.ratios[-1] == pytest.approx(b[1] / a[1])
    # told by hand: the winner's server up, the server beside it refused
    s = AskTell(Planner(SPACE, settings))
    step = Experiment(FA3, LEVELS, "duet", "prove it", fresh=True, base=BASE)
    s.tell(step, Started())
    s.tell(step, Beside("failed to start: out of memory"))
    assert s.history.side.launch is None and "out of memory" in s.history.side.failed
    assert s.history.in_flight == [step]  # the duet itself is still to measure
    s.tell(step, Beside())
    a = {c: 100.0 for c in LEVELS}
    b = {c: 110.0 for c in LEVELS}
    s.tell(step, Dueted(((a, b), (a, b)), 12))
    assert s.history.duets[-1].rounds == ((a, b), (a, b)) and s.history.side.launch is None
    assert not s.history.in_flight
