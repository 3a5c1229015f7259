"""Planning in batches for a fleet: with k free slots, up to k experiments that do not depend on
each other's outcome - and, on boxes that would otherwise wait, the screens the planner will ask
for next if the full sweeps in flight come out as their screens predict.

The planner stays sequential and pure (the batch adds nothing to it): the experiments in flight are
the History's own state (History.in_flight: each trial placed and not come back, told through
AskTell.placed), and `plan_batch` asks the planner's `next_step` again on a copy where each of them
(and every one proposed so far in this batch) counts as launched and not measured yet (`pending`:
a launch recorded for it, or the launch it measures again). Such a configuration is "tried", so the
next screen is the next neighbour. Three what-ifs stand in for results not in yet, so that the
planner reads past them: a baseline sweep or A/A repeat in flight counts as swept (zeros: nothing is
decided from them, only screens run beside them), a re-validation or launch pair as measured at the
estimate it has (the next one to validate), and - screening ahead - a confirmation as its screen
predicts (`predicted`). On a fleet the planner's chain (screen -> confirm -> move the
best -> its neighbours) is the critical path; the batch shapes it:

- the baseline and its A/A repeat start together (two boxes give the A/A pair across boxes, so
  the noise floor includes box-to-box variance); screens of the baseline's neighbours may run
  beside them (a screen reads nothing of the noise floor), nothing else until both are measured;
- the leaders are confirmed in parallel: every screen not swept yet that the planner would
  confirm were it the latest measurement gets its full sweep at once - on one box only the
  latest is looked at;
- screens ahead while a confirmation is pending (`ahead`): a neighbour of the current best would
  be stale if the confirmation moves the best, so free boxes screen what the planner asks for
  next were each pending full sweep to come out as its screen predicts (`predicted`): the
  neighbours of the predicted best, or the family member tuned next. If the prediction holds,
  they are the next screens, started a confirmation earlier; if not, a box that would have
  waited did wasted work (a launch of the budget). Only screens: a confirmation, and whatever
  reads the noise floor or the leader, waits for what it reads;
- the re-validations (the winner, the challenger: fresh launches of two configurations) run
  together and alone, and nothing starts until they are measured;
- the launch pairs (the baseline then the winner, the winner then the baseline: conclude.pair) run
  one launch at a time, alone: a pair measured on two boxes at once would compare the boxes, and a
  trial beside it would load the box it shares. The controller places a pair's second launch on the
  node of its first (fleet_controller: `pin`);
- on a fleet that proves in crossovers (Settings.crossover) a crossover's period is its two halves
  placed together (the baseline and the winner at once, `conclude.partner`), one period at a time,
  beside other work: a re-validation of the challenger, and - while exploring - screens and
  confirmations. While exploring, two boxes free at once while no confirmation is in flight (the
  leader stands) begin the leader's crossovers before more screens, and two boxes left over
  after the batch do too (`conclude.crossing`, which keeps the budget to prove another leader).
  The controller swaps the boxes for a crossover's second period.

`plan_batch(..., screen_ahead=False)` holds the free boxes instead (the previous batch, kept for
benchmarks/fleet_speedup.py's comparison).
"""

from __future__ import annotations

import math

from agent.brains.autopilot import conclude
from agent.brains.autopilot.history import History, Measurement
from agent.brains.autopilot.planner import Experiment, Finish, Planner, Step
from agent.brains.autopilot.steps import CROSS, FIRST, MOVES_BEST, PARTIAL, SERIAL


def pending(
    h: History, experiments: list[Experiment], levels: tuple[int, ...], guess: bool = False
) -> History:
    """`h` with each experiment launched and not measured; a pending baseline sweep counts as
    swept (placeholder zeros: nothing is decided from them, the batch stops after the A/A).
    `guess`: a pending full sweep that may move the best counts as measured as `predicted`."""
    out = h.copy()
    for e in experiments:
        launch = reused_launch(out, e)
        if launch is None:
            launch = out.launched(e.config)
        sweep: dict[int, float] | None = None
        if e.purpose in FIRST:
            sweep = dict.fromkeys(levels, 0.0)
        elif e.purpose in (*SERIAL, *CROSS):  # at the value it has: the next one to validate
            now = h.estimate(e.config)
            sweep = {c: now.get(c, 0.0) for c in levels}
        elif guess and e.purpose in MOVES_BEST:
            sweep = predicted(h, e, levels)
        if sweep is not None:
            out.measured(e.config, launch, sweep, e.label)
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


def plan_batch(planner: Planner, h: History, free: int, screen_ahead: bool = True) -> list[Step]:
    """Up to `free` experiments to start now beside those in flight (h.in_flight); [Finish] when
    nothing is in flight and the planner concludes; [] when the next decision must wait for a
    trial in flight."""
    levels, in_flight = planner.settings.levels, list(h.in_flight)
    serial = any(e.purpose in SERIAL for e in in_flight)
    if serial and not planner.settings.crossover:
        return []
    if not serial and free >= 2 and not any(e.purpose in MOVES_BEST for e in in_flight):
        early = crossing(planner, h, in_flight, free)  # the leader stands: its proof first
        if early:
            return list(early)
    out: list[Experiment] = [] if serial else leaders(planner, h, in_flight, free, screen_ahead)
    while len(out) < free:
        busy = [*in_flight, *out]
        step = planner.next_step(pending(h, busy, levels))
        if isinstance(step, Finish):
            return [step] if not busy else list(out)
        if serial and step.purpose not in CROSS:
            break  # beside a validation in flight only a crossover's period starts
        confirming = any(e.purpose in MOVES_BEST for e in busy)
        if any(same(step, e, h) for e in busy) or (step.purpose in PARTIAL and confirming):
            # it waits for something in flight, or it is a neighbour of a best that a pending
            # confirmation may move: screen ahead of the confirmation instead (or hold)
            if confirming and screen_ahead:
                out += ahead(planner, h, busy, free - len(out))
            break
        if any(e.purpose in FIRST for e in busy) and step.purpose not in (*FIRST, "screen"):
            break  # the A/A pair gives the noise floor: only screens run beside it
        if step.purpose in SERIAL and any(e.purpose not in (*SERIAL, *CROSS) for e in busy):
            break  # validate on a quiet fleet: the leader must not move under it
        if busy and (step.purpose == "pair" or any(e.purpose == "pair" for e in busy)):
            break  # a launch pair's two launches one after the other, each alone on the fleet
        if step.purpose in CROSS:  # both halves of a period at once, one period at a time
            if free - len(out) < 2 or any(e.purpose in CROSS for e in busy):
                break
            out += [step, conclude.partner(step)]
            continue
        out.append(step)
    return [*out, *crossing(planner, h, [*in_flight, *out], free - len(out))]


def crossing(planner: Planner, h: History, busy: list[Experiment], free: int) -> list[Experiment]:
    """On a fleet that proves in crossovers, while exploring: two free boxes begin the leader's
    crossovers (conclude.crossing: a period's two halves); none beside the A/A pair, a
    validation or another crossover period."""
    if not planner.settings.crossover or free < 2:
        return []
    if any(e.purpose in (*FIRST, *SERIAL, *CROSS) for e in busy):
        return []
    step = conclude.crossing(planner.read(h))
    return [] if step is None else [step, conclude.partner(step)]


def ahead(planner: Planner, h: History, busy: list[Experiment], free: int) -> list[Experiment]:
    """Up to `free` screens for boxes that would otherwise wait for the full sweeps in flight:
    the planner's next steps were each of those sweeps to come out as its screen predicts. Only
    screens (a confirmation waits for what it reads); none when a sweep cannot be predicted."""
    levels, out = planner.settings.levels, list[Experiment]()
    sweeps = [e for e in busy if e.purpose in MOVES_BEST]
    if free < 1 or any(predicted(h, e, levels) is None for e in sweeps):
        return []
    while len(out) < free:
        step = planner.next_step(pending(h, [*busy, *out], levels, guess=True))
        if not isinstance(step, Experiment) or step.purpose not in PARTIAL:
            break
        if any(h.key(step.config) == h.key(e.config) for e in [*busy, *out]):
            break
        out.append(step)
    return out


def predicted(h: History, e: Experiment, levels: tuple[int, ...]) -> dict[int, float] | None:
    """The full sweep of `e` as measured so far predicts it: its measured levels as they are;
    each other level from the nearest swept configuration (fewest flags apart: the best a
    neighbour was screened from, the family member a challenger was tuned from) at the ratio
    of the nearest measured level (on a log scale)."""
    got = h.estimate(e.config)
    if all(c in got for c in levels):
        return {c: got[c] for c in levels}
    swept = [c for c in h.configs() if h.swept(c, levels) and h.key(c) != h.key(e.config)]
    if not got or not swept:
        return None
    near = min(swept, key=lambda c: len(h.space.diff(c, e.config)))  # the first measured wins
    ref = h.estimate(near)
    known = {c: got[c] / ref[c] for c in got if ref.get(c, 0) > 0}
    if not known:
        return None
    out = {}
    for c in levels:
        nearest = min(known, key=lambda k: abs(math.log(max(k, 1) / max(c, 1))))
        out[c] = got[c] if c in got else ref[c] * known[nearest]
    return out


def leaders(
    planner: Planner, h: History, in_flight: list[Experiment], free: int, everyone: bool = True
) -> list[Experiment]:
    """The confirmations of every screen not swept yet that the planner would confirm were it
    the latest measurement, latest first: the leaders, swept in parallel. On one box each screen
    is judged as it is measured; on a fleet several end between two decisions, and a screen run
    ahead (`ahead`) ends before the sweep it was run ahead of. A screen nothing in flight
    sweeps; none beside the A/A. Not `everyone`: only the screens since the last full sweep
    (the previous batch, which ran no screen ahead of a confirmation)."""
    levels, out = planner.settings.levels, list[Experiment]()
    if any(e.purpose in FIRST for e in in_flight):
        return []
    r = planner.read(h)
    inc, noise = r.incumbent, r.objective_noise
    judged: set[str] = set()
    full = [
        i
        for i, m in enumerate(h.measurements)
        if set(levels) <= set(m.per_level) and m.purpose not in FIRST
    ]
    since = -1 if everyone or not full else full[-1]
    for i in range(len(h.measurements) - 1, since, -1):
        if len(out) >= free:
            break
        m = h.measurements[i]
        key = h.key(m.config)
        busy = [*in_flight, *out]
        if (
            m.purpose not in PARTIAL
            or key in judged
            or h.swept(m.config, levels)
            or any(h.key(e.config) == key for e in busy)
        ):
            continue
        judged.add(key)
        ratio, wins = r.compare(m.config, inc, tuple(m.per_level))
        if (ratio is None or ratio < 1 - noise) and not wins:
            continue  # screening.confirm would not sweep it (a cheap test before asking)
        moved = [*h.measurements[:i], *h.measurements[i + 1 :], m]  # as if measured last
        asked = History(h.space, list(h.launches), moved, None, dict(h.broken))
        step = planner.next_step(pending(asked, busy, levels))
        if isinstance(step, Experiment) and step.purpose == "confirm" and same_config(step, m, h):
            out.append(step)
    return out


def same_config(e: Experiment, m: Measurement, h: History) -> bool:
    return h.key(e.config) == h.key(m.config)
