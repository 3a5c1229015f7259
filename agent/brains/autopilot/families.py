"""Families: a switch that gates other flags (speculation and its parameters)."""

from __future__ import annotations

import itertools

from agent.brains.autopilot.core import Core
from agent.brains.autopilot.history import History
from agent.brains.autopilot.steps import Experiment, show_value
from tools.domain.space import Flags, Scalar, same

FAMILY_FLOOR = 0.8  # a family farther behind than this at every level is not tuned


class Families(Core):
    def tune_families(self, h: History, inc: Flags) -> Experiment | None:
        """A switch that gates other flags (speculation and its parameters) is a family: its
        first probe used arbitrary parameters, so one probe says little. Unless the family is far
        behind everywhere, it gets its own search on the levels where it comes closest to the
        best: first on the best's other flags, then its parameters, one or two at a time (they
        are often coupled: SGLang wants draft tokens = steps + 1 when topk is 1)."""
        if not self.settings.challenger:
            return None
        crashed = h.crashed()
        for gate, value in self.gates(inc):
            members = [
                c
                for c in h.configs()
                if same(c.get(gate, False), value) and self.allowed(c) and h.key(c) not in crashed
            ]
            scored = [(self.closeness(h, c, inc), c) for c in members]
            scored = [(sc, c) for sc, c in scored if sc[0] >= FAMILY_FLOOR]
            if not scored:
                continue
            (ratio, level), anchor = max(scored, key=lambda sc: sc[0][0])
            family = {gate, *self.gated(gate)}
            levels = self.settings.levels
            targets = (level, *[c for c in levels if c > level][:1])
            rebased = self.space.repair({**inc, **{f: anchor.get(f, False) for f in family}})
            moves = [("the family on the best's other flags", rebased)]
            moves += [(self.describe(anchor, m), m) for m in self.family_moves(anchor, family)]
            for what, cand in moves:
                if not self.space.admissible(cand) or not self.allowed(cand) or h.tried(cand):
                    continue
                if self.crash_skip(h, anchor, cand):
                    continue
                why = (
                    f"tune {gate}={show_value(value)}: it comes to {ratio:.2f}x of the best at "
                    f"C={level}; {what}"
                )
                return Experiment(cand, targets, "challenger", why, fresh=True, base=anchor)
        return None

    def family_moves(self, anchor: Flags, family: set[str]) -> list[Flags]:
        """Valid changes of one, then two, of the family's parameters."""
        params = [
            f
            for f in self.space.flags
            if f in family and self.space.active(f, anchor) and not self.gated(f)
        ]
        options = [self.space.flags[f] for f in params]
        out: list[tuple[int, Flags]] = []
        for combo in itertools.product(*options):
            cand = {**anchor, **dict(zip(params, combo, strict=True))}
            distance = len(self.space.diff(anchor, cand))
            if 1 <= distance <= 2 and self.space.admissible(cand):
                out.append((distance, cand))
        return [c for _, c in sorted(out, key=lambda dc: dc[0])]

    def describe(self, base: Flags, cand: Flags) -> str:
        return ", ".join(
            f"{f} {show_value(base.get(f, False))} -> {show_value(v)}"
            for f, v in self.space.diff(base, cand).items()
        )

    def gates(self, inc: Flags) -> list[tuple[str, Scalar]]:
        """(flag, value) switches that turn on gated flags, other than what the best has."""
        out: list[tuple[str, Scalar]] = []
        for flag, candidates in self.space.flags.items():
            if not self.gated(flag):
                continue
            out += [(flag, v) for v in candidates if v is not False and not same(v, inc.get(flag))]
        return out

    def closeness(self, h: History, config: Flags, inc: Flags) -> tuple[float, int]:
        """(the best per-level ratio to the best configuration, the level where it is)."""
        a, b = h.estimate(config), h.estimate(inc)
        ratios = [(a[c] / b[c], c) for c in a if b.get(c, 0) > 0]
        return max(ratios, default=(0.0, 0))
