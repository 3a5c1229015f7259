"""Planning in batches for a fleet: with k free slots, up to k experiments that do not depend on
each other's outcome.

The planner stays sequential and pure (planner.py is not changed): `plan_batch` asks its
`next_step` again on a History where every experiment in flight - and every one proposed so far
in this batch - counts as launched and not measured yet. Such a configuration is "tried", so the
next screen is the next neighbour. On a fleet the planner's chain (screen -> confirm -> move the
best -> its neighbours) is the critical path; the batch shapes it:

- the baseline and its A/A repeat start together (two boxes give the A/A pair across boxes, so
  the noise floor includes box-to-box variance); screens of the baseline's neighbours may run
  beside them (a screen reads nothing of the noise floor), nothing else until both are measured;
- the leaders are confirmed in parallel: every screen measured since the best last had a chance
  to move (the last confirmation, repeat or re-validation) that the planner would confirm were it
  the latest measurement gets its full sweep at once - on one box only the latest is looked at;
- speculative work is held while a confirmation is pending: a new screen is a neighbour of the
  current best, which the confirmation may move, making the screen stale (measured from a base
  that is no longer the best). Free boxes wait for the confirmation rather than spend a trial;
- the re-validations (the winner, the challenger: fresh launches of two configurations) run
  together and alone, and nothing starts until they are measured.
"""

from __future__ import annotations

from agent.brains.autopilot.history import History, Launch, Measurement
from agent.brains.autopilot.planner import Experiment, Finish, Planner, Step

FIRST = ("baseline", "noise")  # everything after them reads the noise floor
SERIAL = ("validate",)  # the leader may change with each one
PARTIAL = ("screen", "challenger", "surrogate")  # a few levels, from the current best
MOVES_BEST = ("confirm", "repeat")  # a full sweep that may move the best


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
        elif e.purpose in SERIAL:  # validated at the value it has: the next one to validate
            now = h.estimate(e.config)
            sweep = {c: now.get(c, 0.0) for c in levels}
            out.measurements.append(Measurement(e.config, launch, sweep, e.purpose))
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


def record_trial(h: History, e: Experiment, got: dict[int, float] | str) -> None:
    """A finished trial into the history as the fleet controller counts it: a failed launch
    (`got` is the reason), or a measurement on reused_launch's launch or a new one."""
    if isinstance(got, str):
        h.launches.append(Launch(e.config, ok=False, reason=got))
        return
    launch = reused_launch(h, e)
    if launch is None:
        h.launches.append(Launch(e.config))
        launch = len(h.launches) - 1
    h.measurements.append(Measurement(e.config, launch, got, e.purpose))


def same(a: Experiment, b: Experiment, h: History) -> bool:
    return a.purpose == b.purpose and h.key(a.config) == h.key(b.config)


def plan_batch(planner: Planner, h: History, in_flight: list[Experiment], free: int) -> list[Step]:
    """Up to `free` experiments to start now; [Finish] when nothing is in flight and the planner
    concludes; [] when the next decision must wait for a trial in flight."""
    levels = planner.settings.levels
    if any(e.purpose in SERIAL for e in in_flight):
        return []
    out: list[Experiment] = leaders(planner, h, in_flight, free)
    while len(out) < free:
        busy = [*in_flight, *out]
        step = planner.next_step(pending(h, busy, levels))
        if isinstance(step, Finish):
            return [step] if not busy else list(out)
        if any(same(step, e, h) for e in busy):
            break  # it waits for something in flight
        if any(e.purpose in FIRST for e in busy) and step.purpose not in (*FIRST, "screen"):
            break  # the A/A pair gives the noise floor: only screens run beside it
        if step.purpose in SERIAL and any(e.purpose not in SERIAL for e in busy):
            break  # validate on a quiet fleet: the leader must not move under it
        if step.purpose in PARTIAL and any(e.purpose in MOVES_BEST for e in busy):
            break  # a neighbour of a best that a pending confirmation may move: hold it
        out.append(step)
    return list(out)


def leaders(
    planner: Planner, h: History, in_flight: list[Experiment], free: int
) -> list[Experiment]:
    """The confirmations of every screen since the best last had a chance to move (the current
    neighbourhood) that the planner would confirm were it the latest measurement, latest first:
    the leaders, swept in parallel. A screen nothing in flight sweeps; none beside the A/A."""
    levels, out = planner.settings.levels, list[Experiment]()
    if any(e.purpose in FIRST for e in in_flight):
        return []
    moved_best = [
        i
        for i, m in enumerate(h.measurements)
        if set(levels) <= set(m.per_level) and m.purpose not in FIRST
    ]
    for i in range(len(h.measurements) - 1, moved_best[-1] if moved_best else -1, -1):
        if len(out) >= free:
            break
        m = h.measurements[i]
        busy = [*in_flight, *out]
        if (
            m.purpose not in PARTIAL
            or h.swept(m.config, levels)
            or any(h.key(e.config) == h.key(m.config) for e in busy)
        ):
            continue
        moved = [*h.measurements[:i], *h.measurements[i + 1 :], m]  # as if measured last
        asked = History(h.space, list(h.launches), moved, None, dict(h.broken))
        step = planner.next_step(pending(asked, busy, levels))
        if isinstance(step, Experiment) and step.purpose == "confirm" and same_config(step, m, h):
            out.append(step)
    return out


def same_config(e: Experiment, m: Measurement, h: History) -> bool:
    return h.key(e.config) == h.key(m.config)
