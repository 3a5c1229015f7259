"""What a History says, read once per decision: which configurations are allowed, measured and
best, the noise floor, comparisons, what was learned (changes that lost everywhere, crashes), and
the challenger - the configuration that beats the best at some levels.

Every figure comes from tools/domain/stats.py, the one module of campaign statistics, so the
autopilot and compare, recommend and the report agree on the noise floor and each ratio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from agent.brains.autopilot.history import History
from agent.brains.autopilot.steps import Settings
from tools.domain import stats
from tools.domain.space import Flags, SearchSpace, same

NOISE_DEFAULT = 0.03  # what the planner plans with before a repeat measures the floor


def gated(space: SearchSpace, flag: str) -> list[str]:
    """The flags that `flag` gates (speculation's parameters for the speculative algorithm)."""
    return [f for f, rule in space.requires.items() if flag in rule]


@dataclass(frozen=True)
class Reading:
    space: SearchSpace
    settings: Settings
    h: History

    # --- which configurations, and how good ------------------------------------------------------
    def allowed(self, config: Flags) -> bool:
        base = self.space.baseline
        return all(same(config.get(f, False), base.get(f, False)) for f in self.settings.excluded)

    def value(self, config: Flags) -> float:
        h, s = self.h, self.settings
        return s.objective.value(h.estimate(config), h.slo_ok(config), s.levels)

    @cached_property
    def swept_configs(self) -> list[Flags]:
        """Allowed configurations swept over every level, in the order first measured."""
        levels = self.settings.levels
        return [c for c in self.h.configs() if self.h.swept(c, levels) and self.allowed(c)]

    @cached_property
    def incumbent(self) -> Flags:
        """The best configuration swept over every level. The baseline stays the best until a
        configuration beats it by more than the noise floor: no win smaller than the noise."""
        base = self.space.baseline
        best, best_value = base, self.value(base) * (1 + self.objective_noise)
        for config in self.swept_configs:
            value = self.value(config)
            if value > best_value and self.h.key(config) != self.h.key(base):
                best, best_value = config, value
        return best

    # --- the noise floor -------------------------------------------------------------------------
    @cached_property
    def floors(self) -> tuple[float | None, float | None]:
        """(one level's floor, the objective's floor) from every configuration swept more than once,
        as tools.domain.stats measures them; None: nothing was repeated yet, the floor is unknown.
        Both pool the differences of every level (two sweeps give one per level, too few alone),
        also for an objective that reads one level."""
        levels, objective = self.settings.levels, self.settings.objective
        repeats = self.h.repeats(levels)
        one_level = stats.objective_floor(repeats, levels, kind="level")
        return one_level, stats.objective_floor(repeats, levels, kind=objective.kind)

    @property
    def level_noise(self) -> float:
        """One level's floor to plan with: the measured one, or NOISE_DEFAULT while unknown."""
        return NOISE_DEFAULT if self.floors[0] is None else self.floors[0]

    @property
    def objective_noise(self) -> float:
        """The objective's floor to plan with: the measured one, or NOISE_DEFAULT while unknown."""
        return NOISE_DEFAULT if self.floors[1] is None else self.floors[1]

    # --- comparisons -----------------------------------------------------------------------------
    def wins(self, config: Flags, ref: Flags, levels: tuple[int, ...]) -> list[int]:
        """The levels (of `levels`, in order) where config beats ref by more than the noise."""
        ratios = stats.level_ratios(self.h.estimate(config), self.h.estimate(ref))
        return [c for c in levels if c in ratios and stats.beats(ratios[c], self.level_noise)]

    def compare(
        self, config: Flags, ref: Flags, levels: tuple[int, ...]
    ) -> tuple[float | None, list[int]]:
        """(objective ratio over `levels`, the levels where config beats ref beyond the noise).
        The ratio is None when the two share no level ref served; 0.0 when config failed one."""
        a, b = self.h.estimate(config), self.h.estimate(ref)
        common = tuple(c for c in levels if c in a and c in b)
        wins = self.wins(config, ref, common)
        objective = self.settings.objective
        if objective.kind == "geomean" or objective.level not in common:
            a_common, b_common = {c: a[c] for c in common}, {c: b[c] for c in common}
            return stats.geomean_ratio(a_common, b_common), wins
        va, vb = objective.value(a, None, common), objective.value(b, None, common)
        return (va / vb if vb > 0 else None), wins

    def challenger(self, inc: Flags) -> tuple[Flags, list[int]] | None:
        """The swept configuration that beats the best by the most, at the levels it wins."""
        ref = self.h.estimate(inc)
        best: tuple[float, Flags, list[int]] | None = None
        for config in self.swept_configs:
            if self.h.key(config) == self.h.key(inc):
                continue
            wins = self.wins(config, inc, self.settings.levels)
            est = self.h.estimate(config)
            gain = sum(math.log(est[c] / ref[c]) for c in wins)
            if wins and (best is None or gain > best[0]):
                best = (gain, config, wins)
        return None if best is None else (best[1], best[2])

    # --- what was learned ------------------------------------------------------------------------
    def learned_skip(self, base: Flags, cand: Flags) -> bool:
        """The same change lost clearly, at every level, from another base - or failed to start.
        A change that made a level fail (ratio 0) lost clearly."""
        if self.crash_skip(base, cand):
            return True
        change = self.space.diff(base, cand)
        margin = max(3 * self.objective_noise, 0.02)
        for config in self.h.configs():
            if any(not same(config.get(f, False), v) for f, v in change.items()):
                continue
            for ref in self.swept_configs:
                if self.roots(self.space.diff(ref, config)) != self.roots(change):
                    continue
                ratio, wins = self.compare(config, ref, self.settings.levels)
                if ratio is not None and ratio < 1 - margin and not wins:
                    return True
        return False

    def crash_skip(self, base: Flags, cand: Flags) -> bool:
        """The same change, from another base, failed to start: it is not tried again."""
        change = self.space.diff(base, cand)
        for config, _ in self.h.crashed().values():
            if any(self.space.diff(ref, config) == change for ref in self.swept_configs):
                return True
        return False

    def roots(self, change: Flags) -> set[str]:
        """The flags of a change that no other changed flag gates."""
        return {f for f in change if not set(self.space.requires.get(f, {})) & set(change)}
