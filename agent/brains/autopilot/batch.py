"""Planning in batches for a fleet: with k free slots, up to k experiments that do not depend on
each other's outcome.

The planner stays sequential and pure (planner.py is not changed): `plan_batch` asks its
`next_step` again on a History where every experiment in flight - and every one proposed so far
in this batch - counts as launched and not measured yet. Such a configuration is "tried", so the
next screen is the next neighbour, and a screen's confirmation is only proposed once the screen
is measured. What the next decisions read stays serial:

- the baseline and its A/A repeat (proposed together: two boxes give the A/A pair across boxes,
  so the noise floor includes box-to-box variance), and nothing else until both are measured;
- a re-validation: one at a time, and exploring stops once one is proposed.
"""

from __future__ import annotations

from agent.brains.autopilot.history import History, Launch, Measurement
from agent.brains.autopilot.planner import Experiment, Finish, Planner, Step

FIRST = ("baseline", "noise")  # everything after them reads the noise floor
SERIAL = ("validate",)  # the leader may change with each one


def pending(h: History, experiments: list[Experiment], levels: tuple[int, ...]) -> History:
    """`h` with each experiment launched and not measured; a pending baseline sweep counts as
    swept (placeholder zeros: nothing is decided from them, the batch stops after the A/A)."""
    out = History(h.space, list(h.launches), list(h.measurements), None, dict(h.broken))
    for e in experiments:
        launch = reused_launch(out, e)
        if launch is None:
            out.launches.append(Launch(e.config))
            launch = len(out.launches) - 1
        if e.purpose in FIRST:
            zeros = dict.fromkeys(levels, 0.0)
            out.measurements.append(Measurement(e.config, launch, zeros, e.purpose))
    return out


def reused_launch(h: History, e: Experiment) -> int | None:
    """The launch an experiment counts as measuring again: on one box the planner measures a
    screened configuration (or the baseline's A/A repeat) again on the same server, with no new
    launch; a trial launches afresh, but it counts against the launch budget as that measurement
    would. A fresh experiment (re-validation) is a launch of its own."""
    if e.fresh:
        return None
    key = h.key(e.config)
    found = [i for i, launch in enumerate(h.launches) if launch.ok and h.key(launch.config) == key]
    return found[-1] if found else None


def same(a: Experiment, b: Experiment, h: History) -> bool:
    return a.purpose == b.purpose and h.key(a.config) == h.key(b.config)


def plan_batch(planner: Planner, h: History, in_flight: list[Experiment], free: int) -> list[Step]:
    """Up to `free` experiments to start now; [Finish] when nothing is in flight and the planner
    concludes; [] when the next decision must wait for a trial in flight."""
    levels = planner.settings.levels
    if any(e.purpose in (*FIRST, *SERIAL) for e in in_flight):
        return []
    out: list[Experiment] = []
    while len(out) < free:
        step = planner.next_step(pending(h, [*in_flight, *out], levels))
        if isinstance(step, Finish):
            return [step] if not in_flight and not out else list(out)
        if any(same(step, e, h) for e in [*in_flight, *out]):
            break  # it waits for something in flight
        if step.purpose in SERIAL and (in_flight or out):
            break  # validate on a quiet fleet: the leader must not move under it
        out.append(step)
        if step.purpose in SERIAL or (step.purpose == "noise"):
            break
    return list(out)
