"""The contrary bundle (issue 50): the changes that did not win alone, launched together on the
baseline - not on the best, since a small win adopted first may be what spoils them.

Every other stage builds on what won alone; the bundle stage (bundles.py) takes the changes that
were within the noise, and on the best. A combination whose parts each lose alone beyond the noise
(a draft length that loses at the default batch settings and wins with a larger CUDA-graph batch)
is launched by none of them. One launch of every such change together tests every interaction
among them at once (group testing); it is read against the additive model as the bundle stage
reads its own: a residual beyond a clear margin means an interaction is there, and the bundle
without each part that loses alone (the worst first) is launched while the model expects the rest
to beat the best by more than the floor. At most MAX_CONTRARY launches a campaign. A bundle a
known start failure explains is read as failed, not launched (bundles.next_of).

Which value of a flag is a part cannot be read from screens when its values screen within the
noise of each other (a flat part beside flat values; any part at 4 % noise): the one that lost
the most is then a draw. So once every other stage is spent (late), while launches are spare, up
to FRESH more bundles each take of every flag a value no contrary bundle held yet - the next
draw, where the stage would have concluded with launches unused."""

from __future__ import annotations

import math

from agent.brains.autopilot.bundles import apply_changes, next_of
from agent.brains.autopilot.combine import changes
from agent.brains.autopilot.reading import Reading
from agent.brains.autopilot.steps import Experiment
from tools.domain.space import Flags, same

WIDE = 0.12  # a change that lost by up to this alone may still be a part of an interaction
MAX_CONTRARY = 3  # contrary-bundle launches at most, before the late ones
FRESH = 3  # late bundles of values no contrary bundle held yet, at most


def parts(r: Reading, fresh: bool = False) -> list[tuple[float, Flags, str]]:
    """One change per flag from the baseline: a value that did not win alone (at most the floor
    above its reference) and lost by at most WIDE - of each flag's such values the one that lost
    the most (a value that ties or wins a little may be the decoy that blocks the others), best
    first. `fresh`: of each flag a value no contrary bundle held yet first, where it has one."""
    base = r.space.baseline
    floor = r.objective_noise
    out: list[tuple[float, Flags, str]] = []
    seen: set[str] = set()
    held = [c for c in r.h.configs() if any(m.purpose == "contrary" for m in r.h.of(c))]

    def bundled(change: Flags) -> bool:
        return fresh and any(all(same(c.get(f, False), v) for f, v in change.items()) for c in held)

    for ratio, change, what in sorted(changes(r, base, WIDE), key=lambda x: (bundled(x[1]), x[0])):
        if ratio > 1 + floor:
            continue  # a winner: the search built on it already
        flags = set(change)
        if flags & seen:
            continue
        seen |= flags
        out.append((ratio, change, what))
    return sorted(out, key=lambda x: -x[0])


def early(r: Reading, inc: Flags) -> Experiment | None:
    """The contrary bundle ahead of the one-factor stage, once a third of the budget is spent:
    the changes screened by then are what it combines, and the rest of the budget can follow
    what it finds."""
    if r.h.launches_used() < r.settings.max_launches // 3:
        return None
    return contrary(r, inc)


def late(r: Reading, inc: Flags) -> Experiment | None:
    """Once every other stage is spent: the contrary bundle and its read-back, then bundles of
    the values no contrary bundle held yet (see the module docstring)."""
    return contrary(r, inc) or contrary(r, inc, fresh=True)


def contrary(r: Reading, inc: Flags, fresh: bool = False) -> Experiment | None:
    """The next contrary bundle to launch, or None (see the module docstring)."""
    h, base = r.h, r.space.baseline
    used = [c for c in h.configs() if any(m.purpose == "contrary" for m in h.of(c))]
    if len(used) >= MAX_CONTRARY + (FRESH if fresh else 0):
        return None
    found = parts(r, fresh)
    if len(found) < 2:
        return None
    full = apply_changes(r, base, [change for _, change, _ in found])
    if full is None or r.space.key(full) == r.space.key(inc):
        return None
    first = (
        f"combine the {len(found)} changes that did not win alone, on the baseline "
        f"({'; '.join(w for _, _, w in found)}): an interaction whose parts lose alone"
    )
    # stop: no interaction beyond a clear margin (the parts lose together as they did alone);
    # target: what the rest must beat the baseline by to beat the best by more than the floor
    stop = math.log(1 + r.clear_margin)
    ahead = math.log(max(r.value(inc), 1e-9) / max(r.value(base), 1e-9))
    target = ahead + math.log(1 + r.objective_noise)
    words = (first, "the changes that did not win alone")
    return next_of(r, base, full, found, stop, target, "contrary", words)
