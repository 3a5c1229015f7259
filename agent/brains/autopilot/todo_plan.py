"""The todo list the autopilot keeps, as the reference campaign did: one item per stage, the
current one in_progress, the rest pending or done - derived from where the campaign stands."""

from __future__ import annotations

from typing import Any

from agent.brains.autopilot import conclude, families, physics_stop, screening
from agent.brains.autopilot.history import History
from agent.brains.autopilot.planner import Experiment, Finish, Planner, Step
from agent.brains.autopilot.purposes import KINDS, Purpose, of_todo
from agent.brains.autopilot.reading import gated
from state.sweeps import count
from tools.domain.space import Flags

ORDER = ("cleanup", "baseline", "noise", "explore", "family", "validate", "report")
# the partial measurements of the explore item: a screen done there marks it done
SCREENS = tuple(p for p in of_todo("explore") if KINDS[p].group == "partial")


def stage(purpose: Purpose | None, default: str) -> str:
    """A purpose's todo item (purposes.KINDS), `default` for a label of no purpose."""
    return default if purpose is None else KINDS[purpose].todo


def plan(planner: Planner) -> dict[str, tuple[str, str]]:
    """id -> (content, priority)."""
    s, space = planner.settings, planner.space
    levels = ",".join(map(str, s.levels))
    screens = ",".join(map(str, s.screens()))
    gates = [f for f in space.flags if gated(space, f)]
    family = (
        f"Tune {', '.join(gates)} and its parameters on the levels where it comes closest to "
        "the best; find the crossover"
        if gates
        else "Find where the contenders cross (no gated flag family in this space)"
    )
    return {
        "cleanup": ("Kill leftover servers of this run", "medium"),
        "baseline": (f"Start the baseline and sweep it at C={levels}", "high"),
        "noise": ("Sweep the baseline again (A/A) to measure the noise floor", "high"),
        "explore": (
            f"Screen one-factor changes from the current best at C={screens}; confirm the "
            "promising ones with a full sweep",
            "high",
        ),
        "family": (family, "medium"),
        "validate": (
            "Re-validate the winner on a fresh launch, then against the baseline "
            + ("in a duet, side by side" if s.side_by_side else "in launch pairs"),
            "high",
        ),
        "report": ("Recommend the config and concurrency policy, kill the servers, report", "high"),
    }


def stage_of(step: Step, h: History) -> str:
    if isinstance(step, Finish):
        return "report"
    assert isinstance(step, Experiment)
    if step.purpose == "confirm" and h.measurements:
        return stage(h.measurements[-1].purpose, "explore")
    return KINDS[step.purpose].todo


def todos(
    planner: Planner, h: History, current: str | None, done: bool = False
) -> list[dict[str, Any]]:
    """The whole list: stages before `current` completed (cancelled when nothing happened in
    them), `current` in_progress, later ones pending - but the family's cancelled as soon as the
    supervisor dropped it (`agent say "skip speculation"`: it will not run, and a pending item
    would say it might); with done=True every stage is closed."""
    items = plan(planner)
    used = {stage(m.purpose, "") for m in h.measurements} | {"cleanup", "report"}
    screened = any(m.purpose in SCREENS for m in h.measurements)
    used |= {"explore"} if screened else set()
    at = len(ORDER) if done or current is None else ORDER.index(current)
    spent = physics_stop.spent(planner.read(h)) is not None
    out = []
    for i, key in enumerate(ORDER):
        content, priority = items[key]
        if i < at:
            status = "completed" if key in used else "cancelled"
            if status == "cancelled":
                content += " - " + why_skipped(key, planner)
        elif i == at:
            status = "in_progress"
        elif key == "family" and dropped_by_supervisor(planner):
            status = "cancelled"
            content += " - " + why_skipped(key, planner)
        else:
            status = "pending"
        if key == "explore" and spent:  # the stop signal: the why is in the narration
            content += " - stopped against physics: flags could add less than the noise"
        elif key == "explore" and status != "cancelled" and i >= at:
            content += explore_left(planner, h)
        if key == "family" and status != "cancelled" and i >= at:
            content += family_left(planner, h)
        if key == "validate" and i >= at:
            content += validate_left(planner, h)
        out.append({"id": key, "content": content, "status": status, "priority": priority})
    return out


def explore_left(planner: Planner, h: History) -> str:
    """The explore item's count: the one-factor changes from the current best still to screen
    (each a launch and a screen)."""
    r = planner.read(h)
    return exploring_left(planner, h, [c for _, c in screening.untried(r, r.incumbent)])


def family_left(planner: Planner, h: History) -> str:
    """The family item's count: the members families.tune would screen from here (none before
    the family comes close: the item then says no count)."""
    r = planner.read(h)
    return exploring_left(planner, h, [e.config for e in families.moves(r, r.incumbent)])


def exploring_left(planner: Planner, h: History, configs: list[Flags]) -> str:
    """An exploring item's " (N experiments left)": its distinct configurations still to
    screen, within the launches exploring has left (those kept for the end stage aside) - what
    the supervisor's time-left estimate (agent/view/eta.py) reads, so a long stage is not
    counted as one item."""
    s = planner.settings
    if s.wrap_up:
        return ""
    left = len({h.key(c) for c in configs})
    kept = conclude.reserved(s.max_launches)  # to re-validate, and for the launch pairs
    left = min(left, max(0, s.max_launches - h.launches_used() - kept))
    return experiments_text(left)


def experiments_text(n: int) -> str:
    return f" ({count(n, 'experiment')} left)" if n else ""


def validate_left(planner: Planner, h: History) -> str:
    """The re-validation item's " (N experiments left)": the launches the stage holds
    (conclude.launches_left), so that the time-left estimate does not cost it as one item like
    the stages before it."""
    r = planner.read(h)
    subject = conclude.pairs_go_on(r) or r.incumbent  # whom the planner's stage 5 tests
    return experiments_text(conclude.launches_left(r, subject, max(0, r.budget_left)))


def dropped_by_supervisor(planner: Planner) -> bool:
    """The supervisor held the family's gated flags at the baseline (directives.SKIP)."""
    s, space = planner.settings, planner.space
    return any(f in s.excluded for f in space.flags if gated(space, f))


def why_skipped(key: str, planner: Planner) -> str:
    """The true reason a stage was passed over: the supervisor's word before the data's."""
    if key != "family":
        return "not needed"
    s = planner.settings
    if dropped_by_supervisor(planner):
        return "skipped: the supervisor said so (agent say)"
    return "skipped: wrapping up" if s.wrap_up else "no family came close"
