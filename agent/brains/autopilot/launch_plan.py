"""Why the autopilot started a server, as the run records it (issue 45, "the purpose on the
launch"): with each start_server call it makes for an experiment, the one-box brain returns the
experiment (Turn.plans) and the loop records it beside the message as a `planned` event
{call, purpose, why, flags, levels, fresh, base, at_level ..., under} (docs/events.md); the fold
keeps it by call id (RunState.plans). AskTell.resume reads it back for the server up, where it
used to re-derive it from the planner."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from agent.brains.autopilot.purposes import purpose_of
from agent.brains.autopilot.steps import Experiment, Settings

# the record's names for the experiment's fields where they differ (flags, as events name them)
NAMES = {"config": "flags"}


def plan_record(step: Experiment, settings: Settings) -> dict[str, Any]:
    """The `planned` event's fields for a launch of `step` (but `call`): every field of the
    experiment (`config` as `flags`), and the settings it was planned under that the directives
    and the wrap-up change (`under`)."""
    record: dict[str, Any] = {}
    for f in fields(Experiment):
        value = getattr(step, f.name)
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, dict):
            value = dict(value)
        record[NAMES.get(f.name, f.name)] = value
    return {**record, "under": planned_under(settings)}


def planned_under(settings: Settings) -> dict[str, Any]:
    """The settings the supervisor's directives and the budget's wrap-up change."""
    o = settings.objective
    return {
        "wrap_up": settings.wrap_up,
        "excluded": sorted(settings.excluded),
        "objective": {"kind": o.kind, "level": o.level},
    }


def recorded_step(plan: dict[str, Any], settings: Settings) -> Experiment | None:
    """The experiment a `planned` event records (a field it lacks: its default); None when it
    was planned under other settings than these (the planner might not make it now) or is not a
    record this code wrote."""
    purpose = purpose_of(str(plan.get("purpose")))
    if purpose is None or plan.get("under") != planned_under(settings):
        return None
    try:
        given = {
            f.name: plan[NAMES.get(f.name, f.name)]
            for f in fields(Experiment)
            if NAMES.get(f.name, f.name) in plan
        }
        given["config"] = dict(given["config"])
        given["levels"] = tuple(int(c) for c in given["levels"])
        given["purpose"], given["why"] = purpose, str(given.get("why") or "")
        if given.get("base") is not None:
            given["base"] = dict(given["base"])
        return Experiment(**given)
    except (KeyError, TypeError, ValueError):
        return None
