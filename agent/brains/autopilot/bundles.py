"""Interactions of any order (stage 3c of the strategy, issue 26.1): once every other stage is
spent and launches are left, the changes that were each within the noise alone are launched all
together on the best - one launch tests every interaction among them at once (group testing).

Why a bundle and not a model over single changes: a k-way interaction whose parts each lose a
little alone (DeepEP, DP attention and two-batch overlap: each -1.6 %, all three +7 %) leaves no
trace in any one-factor screen, and neutral changes screen the same as its parts; no model of
the screens can rank them before a combination of them is measured (an additive surrogate
predicts a loss for every combination of them, and pairs of them lose too). The bundle is the
measurement that makes the interaction visible; the model then reads it:

- the bundle's residual against the additive model (its measured ratio to the best over the
  product of its parts' ratios) is the sum of the interactions among its parts;
- a residual inside the noise floor: nothing is expected to beat the best by more than the floor
  among these changes - the stage stops (masking by a negative interaction is not chased);
- a residual above the floor: the interaction is there; the parts that lose alone by more than
  the floor are expected to be in the way, so the bundle without each of them (the worst first)
  is launched while its expected gain - the residual times the parts it keeps - beats the best
  by more than the floor;
- a bundle that fails to start: the bundle without each part, the worst first, to find which.

A winning bundle is confirmed and becomes the best like any screen; the one-factor stage then
screens its parts' removal, which prunes the neutral ones (a tie keeps the simpler).
"""

from __future__ import annotations

import math

from agent.brains.autopilot.combine import changes
from agent.brains.autopilot.purposes import Purpose
from agent.brains.autopilot.reading import Reading
from agent.brains.autopilot.steps import Experiment
from tools.domain.space import Flags, same

MAX_BUNDLES = 4  # bundle launches at most per campaign


def parts(r: Reading, inc: Flags) -> list[tuple[float, Flags, str]]:
    """One change per flag, each within the noise alone (did not lose clearly), on flags the
    best keeps at the baseline (a flag the search already moved has its winning value), best
    first."""
    base = r.space.baseline
    out: list[tuple[float, Flags, str]] = []
    seen: set[str] = set()
    for ratio, change, what in changes(r, inc, screen_margin(r)):
        flags = set(change)
        if flags & seen:
            continue
        if any(not same(inc.get(f, False), base.get(f, False)) for f in flags):
            continue
        seen |= flags
        out.append((ratio, change, what))
    return out


def screen_margin(r: Reading) -> float:
    """A clear loss on a screen: the clear margin, widened as a geomean over the screen's fewer
    levels is noisier (by sqrt(levels / screened levels))."""
    levels, screens = r.settings.levels, r.settings.screens()
    return r.clear_margin * math.sqrt(len(levels) / max(len(screens), 1))


def bundle(r: Reading, inc: Flags) -> Experiment | None:
    """The next bundle of within-noise changes to launch on the best, or None when the model
    expects none to beat the best by more than the floor (see the module docstring)."""
    h = r.h
    used = [c for c in h.configs() if any(m.purpose == "bundle" for m in h.of(c))]
    used += [
        launch.config for launch in h.launches if not launch.ok and _was_bundle(r, launch.config)
    ]
    if len(used) >= MAX_BUNDLES:
        return None
    found = parts(r, inc)
    if len(found) < 2:
        return None
    full = apply_changes(r, inc, [change for _, change, _ in found])
    if full is None:
        return None
    first = (
        f"combine the {len(found)} changes that were each within the noise alone "
        f"({'; '.join(w for _, _, w in found)}): one launch tests every interaction among them"
    )
    what = f"the bundle of {len(found)} within-noise changes"
    floor = math.log(1 + r.objective_noise)  # no interaction above the floor: nothing to win
    return next_of(r, inc, full, found, floor, floor, "bundle", (first, what))


def next_of(
    r: Reading,
    ref: Flags,
    full: Flags,
    found: list[tuple[float, Flags, str]],
    stop: float,
    target: float,
    purpose: Purpose,
    words: tuple[str, str],
) -> Experiment | None:
    """`full`, the bundle of `found` on `ref`, until it is launched (words[0] says why); then None
    when its residual against the additive model is at most `stop` (a log), else the bundle
    without each part, the worst first - the interaction is kept, what is in its way is not -
    while the residual times the parts kept is expected to beat `ref` by more than `target` (a
    log); a bundle that failed to start, without each part, to find which - and one a known
    start failure explains (Reading.fails_like) is read as failed, not launched: it would teach
    nothing. words[1] names the bundle in the reason."""
    h = r.h
    known = None if h.tried(full) else r.fails_like(full)
    if not h.tried(full) and known is None:
        return Experiment(full, r.settings.screens(), purpose, words[0], fresh=True, base=ref)
    crashed = known is not None or h.key(full) in h.crashed()
    extra = None if crashed else residual(r, full, ref, found)
    if extra is not None and extra <= stop:
        return None
    for ratio, change, what in sorted(found, key=lambda x: x[0]):
        keep = [c for _, c, _ in found if c is not change]
        if extra is not None:
            gain = extra + sum(math.log(x) for x, c, _ in found if c is not change)
            if gain <= target:
                continue
        cand = apply_changes(r, ref, keep)
        if cand is None or h.tried(cand) or r.fails_like(cand):
            continue
        seen = (
            "would fail to start as a launch before did"
            if known is not None
            else "failed to start"
            if crashed
            else f"beat the additive model by {math.exp(extra or 0):.3f}x"
        )
        why = f"{words[1]} {seen}: without {what} ({ratio:.3f}x alone)"
        return Experiment(cand, r.settings.screens(), purpose, why, fresh=True, base=ref)
    return None


def apply_changes(r: Reading, inc: Flags, chosen: list[Flags]) -> Flags | None:
    cand = dict(inc)
    for change in chosen:
        cand.update(change)
    cand = r.space.repair(cand)
    if not r.space.admissible(cand) or not r.allowed(cand):
        return None
    return cand


def residual(
    r: Reading, cand: Flags, inc: Flags, found: list[tuple[float, Flags, str]]
) -> float | None:
    """log(measured ratio of the bundle to the best) - sum of its parts' log ratios."""
    levels = tuple(sorted(r.h.estimate(cand)))
    ratio, _ = r.compare(cand, inc, levels)
    if ratio is None or ratio <= 0:
        return None
    in_it = [x for x, c, _ in found if all(same(cand.get(f, False), v) for f, v in c.items())]
    return math.log(ratio) - sum(math.log(x) for x in in_it)


def _was_bundle(r: Reading, config: Flags) -> bool:
    """A crashed launch the bundle stage proposed: it differs from the best in two roots or more
    and no screen of another stage measured it (crashes carry no purpose)."""
    return len(r.roots(r.space.diff(r.incumbent, config))) >= 3
