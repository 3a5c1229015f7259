"""The contrary bundle (agent/brains/autopilot/contrary.py, issue 50): the changes that did not win
alone - of each flag the value that lost the most, not a decoy that won a little - launched together
on the baseline, once a third of the budget is spent."""

from __future__ import annotations

from agent.brains.autopilot import bundles, contrary
from agent.brains.autopilot.history import History, Objective
from agent.brains.autopilot.planner import Settings
from agent.brains.autopilot.reading import Reading
from benchmarks import space_generator as gen
from tools.domain.space import Flags, SearchSpace

SPACE = SearchSpace.parse(gen.deceptive_pair().profile["search"])
BASE = SPACE.baseline
LEVELS = (1, 4, 16, 64)
SETTINGS = Settings(levels=LEVELS, objective=Objective(), max_launches=12)


def measured(*configs: tuple[Flags, float]) -> History:
    """The baseline swept twice (a floor of about 2 %), then each configuration launched and
    screened at `value` per level, as the one-factor stage screens its changes."""
    h = History(SPACE)
    for value in (100.0, 101.5):
        h.launched(BASE)
        h.measured(BASE, len(h.launches) - 1, dict.fromkeys(LEVELS, value), "baseline")
    for config, value in configs:
        h.launched(config)
        h.measured(config, len(h.launches) - 1, dict.fromkeys(SETTINGS.screens(), value), "screen")
    return h


def test_the_changes_that_lost_alone_go_together_on_the_baseline_not_the_decoys() -> None:
    h = measured(
        ({**BASE, "--part-a": "mid"}, 101.5),  # a decoy: a small win alone, inside the floor
        ({**BASE, "--part-a": "high"}, 95.0),  # the parts: each loses beyond the noise
        ({**BASE, "--part-b": True}, 95.0),
        ({**BASE, "--knob-a": True}, 104.0),  # a winner: the other stages build on it
    )
    r = Reading(SPACE, SETTINGS, h)
    inc = {**BASE, "--knob-a": True}
    step = contrary.contrary(r, inc)
    assert step is not None and step.purpose == "contrary" and step.base == BASE
    assert SPACE.diff(BASE, step.config) == {"--part-a": "high", "--part-b": True}
    assert step.levels == SETTINGS.screens()
    assert contrary.early(r, inc) == step  # 6 launches of 12: a third is spent


def test_not_before_a_third_of_the_budget_and_not_again_once_measured_flat() -> None:
    h = measured(({**BASE, "--part-a": "high"}, 95.0), ({**BASE, "--part-b": True}, 95.0))
    r = Reading(SPACE, Settings(levels=LEVELS, objective=Objective(), max_launches=40), h)
    assert contrary.early(r, BASE) is None  # 3 launches of 40
    both = {**BASE, "--part-a": "high", "--part-b": True}
    h.launched(both)  # together as the additive model expects: no interaction, nothing more
    h.measured(both, len(h.launches) - 1, dict.fromkeys(LEVELS, 90.25), "contrary")
    assert contrary.contrary(Reading(SPACE, SETTINGS, h), BASE) is None


def test_a_bundle_a_known_failure_explains_is_not_launched_but_read_as_failed() -> None:
    """A bundle a crash already explains would teach nothing: it is read as failed, and the
    bundle without each part is launched instead (the worst first)."""
    h = measured(
        ({**BASE, "--part-a": "high"}, 95.0),
        ({**BASE, "--part-b": True}, 95.0),
        ({**BASE, "--knob-b": True}, 94.0),
    )
    h.launched({**BASE, "--part-b": True, "--knob-b": True}, ok=False, reason="OOM")
    step = contrary.contrary(Reading(SPACE, SETTINGS, h), BASE)
    assert step is not None and "would fail to start" in step.why
    assert SPACE.diff(BASE, step.config) == {"--part-a": "high", "--part-b": True}


def test_a_bundle_that_failed_to_start_is_tried_without_each_part() -> None:
    """The bundle stage after its bundle crashed: the bundle is what a known failure explains
    now, yet the stage goes on to it without each part, to find which (it stopped there)."""
    inc = {**BASE, "--knob-a": True}
    h = measured((inc, 104.0))
    h.measured(inc, len(h.launches) - 1, dict.fromkeys(LEVELS, 104.0), "confirm")  # in full
    for flag, value in (("--part-b", True), ("--knob-b", True), ("--knob-c", True)):
        near = {**inc, flag: value}  # within the noise of the best
        h.launched(near)
        h.measured(near, len(h.launches) - 1, dict.fromkeys(SETTINGS.screens(), 103.5), "screen")
    r = Reading(SPACE, SETTINGS, h)
    step = bundles.bundle(r, inc)
    assert step is not None and step.purpose == "bundle"
    h.launched(step.config, ok=False, reason="OOM")
    after = bundles.bundle(Reading(SPACE, SETTINGS, h), inc)
    assert after is not None and after.purpose == "bundle" and "failed to start" in after.why
    assert len(SPACE.diff(inc, after.config)) == len(SPACE.diff(inc, step.config)) - 1


def test_once_the_stages_are_spent_another_value_of_a_flag_goes_in_a_fresh_bundle() -> None:
    """Which value of a flag is a part is a draw where its values screen within the noise: after
    the bundle of the values that lost the most read flat, the late stage launches one of the
    values no contrary bundle held yet (a switch keeps its one value), and stops when none is
    left."""
    h = measured(
        ({**BASE, "--part-a": "mid"}, 97.0),
        ({**BASE, "--part-a": "high"}, 95.0),
        ({**BASE, "--part-b": True}, 95.0),
    )
    first = {**BASE, "--part-a": "high", "--part-b": True}
    h.launched(first)  # together as the additive model expects: no interaction among them
    h.measured(first, len(h.launches) - 1, dict.fromkeys(LEVELS, 90.25), "contrary")
    r = Reading(SPACE, SETTINGS, h)
    assert contrary.contrary(r, BASE) is None
    step = contrary.late(r, BASE)
    assert step is not None and step.purpose == "contrary" and step.base == BASE
    assert SPACE.diff(BASE, step.config) == {"--part-a": "mid", "--part-b": True}
    h.launched(step.config)
    h.measured(step.config, len(h.launches) - 1, dict.fromkeys(LEVELS, 92.15), "contrary")
    assert contrary.late(Reading(SPACE, SETTINGS, h), BASE) is None
