"""Families (stage 4 of the strategy): a switch that gates other flags - speculation and its
parameters. Its first probe used arbitrary parameters, so one probe says little: unless the family
is far behind everywhere, it gets its own search on the levels where it comes closest to the best,
which finds the challenger of a concurrency policy."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from agent.brains.autopilot.reading import Reading, gated
from agent.brains.autopilot.steps import Experiment, show_value
from tools.domain import stats
from tools.domain.space import Flags, Scalar, SearchSpace, same

FAMILY_FLOOR = 0.8  # a family farther behind than this at every level is not tuned


def tune(r: Reading, inc: Flags) -> Experiment | None:
    """The next member of a family to screen where it comes closest to the best: first the family
    on the best's other flags, then its parameters, one or two at a time (they are often coupled:
    SGLang wants draft tokens = steps + 1 when topk is 1)."""
    return next(moves(r, inc), None)


def moves(r: Reading, inc: Flags) -> Iterator[Experiment]:
    """Every member `tune` would screen from here, in its order (the family stage's todo item
    counts them: todo_plan)."""
    if not r.settings.challenger:
        return
    h, space = r.h, r.space
    crashed = h.crashed()
    for gate, value in gates(space, inc):
        members = [
            c
            for c in h.configs()
            if same(c.get(gate, False), value) and r.allowed(c) and h.key(c) not in crashed
        ]
        scored = [(closeness(r, c, inc), c) for c in members]
        scored = [(sc, c) for sc, c in scored if sc[0] >= FAMILY_FLOOR]
        if not scored:
            continue
        (ratio, level), anchor = max(scored, key=lambda sc: sc[0][0])
        family = {gate, *gated(space, gate)}
        targets = (level, *[c for c in r.settings.levels if c > level][:1])
        if (one := r.settings.one_level()) is not None:
            targets = (one,)  # tuned where the objective reads, not where it is close
        rebased = space.repair({**inc, **{f: anchor.get(f, False) for f in family}})
        candidates = [("the family on the best's other flags", rebased)]
        candidates += [(describe(space, anchor, m), m) for m in family_moves(space, anchor, family)]
        for what, cand in candidates:
            if not space.admissible(cand) or not r.allowed(cand) or h.tried(cand):
                continue
            if r.crash_skip(anchor, cand):
                continue
            why = (
                f"tune {gate}={show_value(value)}: it comes to {ratio:.2f}x of the best at "
                f"C={level}; {what}"
            )
            yield Experiment(cand, targets, "challenger", why, fresh=True, base=anchor)


def family_moves(space: SearchSpace, anchor: Flags, family: set[str]) -> list[Flags]:
    """Valid changes of one, then two, of the family's parameters."""
    params = [
        f for f in space.flags if f in family and space.active(f, anchor) and not gated(space, f)
    ]
    options = [space.flags[f] for f in params]
    out: list[tuple[int, Flags]] = []
    for combo in itertools.product(*options):
        cand = {**anchor, **dict(zip(params, combo, strict=True))}
        distance = len(space.diff(anchor, cand))
        if 1 <= distance <= 2 and space.admissible(cand):
            out.append((distance, cand))
    return [c for _, c in sorted(out, key=lambda dc: dc[0])]


def describe(space: SearchSpace, base: Flags, cand: Flags) -> str:
    return ", ".join(
        f"{f} {show_value(base.get(f, False))} -> {show_value(v)}"
        for f, v in space.diff(base, cand).items()
    )


def gates(space: SearchSpace, inc: Flags) -> list[tuple[str, Scalar]]:
    """(flag, value) switches that turn on gated flags, other than what the best has."""
    out: list[tuple[str, Scalar]] = []
    for flag, candidates in space.flags.items():
        if gated(space, flag):
            out += [(flag, v) for v in candidates if v is not False and not same(v, inc.get(flag))]
    return out


def closeness(r: Reading, config: Flags, inc: Flags) -> tuple[float, int]:
    """(the best per-level ratio to the best configuration, the level where it is)."""
    ratios = stats.level_ratios(r.h.estimate(config), r.h.estimate(inc))
    return max(((ratio, c) for c, ratio in ratios.items()), default=(0.0, 0))
