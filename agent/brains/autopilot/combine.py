"""Interactions (stage 3b of the strategy): once the one-factor path is exhausted, the changes that
did well - a win, or within the noise of their reference, not only the winners - are combined in
pairs on the best, the most promising pair first. A pair whose parts gain little alone and much
together (llama.cpp's --parallel 4 with --flash-attn on) is invisible to one factor at a time.

When no pair is left, a small surrogate proposes the next configuration: an additive model of the
objective's log over every measured configuration (each change's mean effect from the pairs that
differ in it alone), the best unmeasured configuration it predicts above the best - once per model
state, so it earns each launch or stops."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

from agent.brains.autopilot.families import describe
from agent.brains.autopilot.reading import Reading
from agent.brains.autopilot.steps import Experiment
from tools.domain.space import Flags, SearchSpace, same

MAX_CHANGES = 5  # the best changes that are paired (10 pairs at most)
SURROGATE_LAUNCHES = 3  # model-proposed launches at most


def changes(r: Reading, inc: Flags, margin: float | None = None) -> list[tuple[float, Flags, str]]:
    """(ratio to its reference, the change, what it is) for every one-root change measured from
    a swept configuration that did well - beat its reference or did not lose clearly - and is
    not already in the best; best first, one entry per change."""
    h, space = r.h, r.space
    floor = 1 - (r.clear_margin if margin is None else margin)  # "did well": no clear loss
    found: dict[str, tuple[float, Flags, str]] = {}
    crashed = h.crashed()
    for config in h.configs():
        if not r.allowed(config) or h.key(config) in crashed:
            continue
        for ref in r.swept_configs:
            change = space.diff(ref, config)
            if not change or len(r.roots(change)) != 1:
                continue
            if all(same(inc.get(f, False), v) for f, v in change.items()):
                continue  # already in the best
            ratio, _ = r.compare(config, ref, tuple(config_levels(r, config)))
            if ratio is None or ratio < floor:
                continue
            key = repr(sorted(change.items(), key=lambda fv: fv[0]))
            if key not in found or ratio > found[key][0]:
                found[key] = (ratio, change, describe(space, ref, config))
    return sorted(found.values(), key=lambda x: -x[0])


def config_levels(r: Reading, config: Flags) -> list[int]:
    return sorted(r.h.estimate(config))


def pairs(r: Reading, inc: Flags) -> Experiment | None:
    """The next untried pair of changes that did well, applied together to the best."""
    space, h = r.space, r.h
    good = changes(r, inc)[:MAX_CHANGES]
    ranked = sorted(
        itertools.combinations(good, 2), key=lambda ab: -(math.log(ab[0][0]) + math.log(ab[1][0]))
    )
    for (ra, a, wa), (rb, b, wb) in ranked:
        if set(a) & set(b):
            continue  # two values of one flag are not a pair
        if ra * rb < 1 - r.clear_margin:
            continue  # together, were they independent, clearly behind: not promising
        cand = space.repair({**inc, **a, **b})
        if len(r.roots(space.diff(inc, cand))) < 2:
            continue
        if not space.admissible(cand) or not r.allowed(cand) or h.tried(cand):
            continue
        if r.learned_skip(inc, cand):
            continue
        why = (
            f"combine two changes that did well alone ({wa}: {ra:.3f}x; {wb}: {rb:.3f}x) - "
            "their parts may gain little and the pair much"
        )
        return Experiment(cand, r.settings.screens(), "screen", why, fresh=True, base=inc)
    return None


def surrogate(r: Reading, inc: Flags) -> Experiment | None:
    """The best unmeasured configuration an additive model of log(objective) predicts above the
    best, from what was swept (at most SURROGATE_LAUNCHES proposals)."""
    space, h = r.space, r.h
    used = sum(1 for launch in h.launches if _proposed(r, launch.config))
    if used >= SURROGATE_LAUNCHES or len(r.swept_configs) < 3:
        return None
    effects = _effects(r)
    if not effects:
        return None
    if r.value(inc) <= 0:
        return None
    scored: list[tuple[float, Flags]] = []
    for cand in valid_configs(space):  # the engine's own check only for the best predictions, below
        change = space.diff(inc, cand)
        if not change or not r.allowed(cand):
            continue
        keys = [(flag, repr(value), repr(inc.get(flag, False))) for flag, value in change.items()]
        if all(k in effects for k in keys):  # a change never measured: the model knows nothing
            gain = sum(effects[k] for k in keys)
            if gain > math.log(1 + r.objective_noise):
                scored.append((gain, cand))
    scored.sort(key=lambda gc: -gc[0])
    best = next(
        (
            (gain, cand)
            for gain, cand in scored
            if not h.tried(cand) and space.admissible(cand) and not r.learned_skip(inc, cand)
        ),
        None,
    )
    if best is None:
        return None
    why = (
        f"surrogate: an additive model of everything measured predicts {math.exp(best[0]):.3f}x "
        f"of the best for {describe(space, inc, best[1])}"
    )
    return Experiment(best[1], r.settings.screens(), "surrogate", why, fresh=True, base=inc)


def valid_configs(space: SearchSpace) -> Iterator[Flags]:
    """Every configuration the space's own rules allow (no engine check: that is per call), one
    at a time in the grid's order (a caller that needs a few stops early)."""
    names = list(space.flags)
    options = [
        (*space.flags[f], False)
        if f in space.requires and False not in space.flags[f]
        else space.flags[f]
        for f in names
    ]
    for combo in itertools.product(*options):
        config = dict(zip(names, combo, strict=True))
        if space.is_valid(config):
            yield config


def _effects(r: Reading) -> dict[tuple[str, str, str], float]:
    """(flag, new value, old value) -> mean log-ratio of the objective over swept pairs that
    differ in that flag alone."""
    space = r.space
    sums: dict[tuple[str, str, str], list[float]] = {}
    swept = r.swept_configs
    for a, b in itertools.permutations(swept, 2):
        change = space.diff(a, b)
        if len(change) != 1:
            continue
        ((flag, value),) = change.items()
        va, vb = r.value(a), r.value(b)
        if va > 0 and vb > 0:
            sums.setdefault((flag, repr(value), repr(a.get(flag, False))), []).append(
                math.log(vb / va)
            )
    return {k: sum(v) / len(v) for k, v in sums.items()}


def _proposed(r: Reading, config: Flags) -> bool:
    """A launch the surrogate proposed: its screen says so."""
    return any(m.purpose == "surrogate" for m in r.h.of(config))
