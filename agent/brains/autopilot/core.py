"""What every part of the planner reads: which configurations are allowed, measured and best,
the noise floor, comparisons, what was learned (changes that lost everywhere, crashes), and the
challenger - the configuration that beats the best at some levels."""

from __future__ import annotations

import math
from dataclasses import dataclass

from agent.brains.autopilot.history import History, geomean_ratio
from agent.brains.autopilot.steps import Settings
from tools.domain.space import Flags, SearchSpace, same


@dataclass
class Core:
    space: SearchSpace
    settings: Settings

    def allowed(self, config: Flags) -> bool:
        base = self.space.baseline
        return all(same(config.get(f, False), base.get(f, False)) for f in self.settings.excluded)

    def value(self, h: History, config: Flags) -> float:
        return self.settings.objective.value(
            h.estimate(config), h.slo_ok(config), self.settings.levels
        )

    def swept_configs(self, h: History) -> list[Flags]:
        return [c for c in h.configs() if h.swept(c, self.settings.levels) and self.allowed(c)]

    def incumbent(self, h: History) -> Flags:
        """The best configuration swept over every level. The baseline stays the best until a
        configuration beats it by more than the noise floor: no win smaller than the noise."""
        base = self.space.baseline
        _, noise = self.noise(h)
        best, best_value = base, self.value(h, base) * (1 + noise)
        for config in self.swept_configs(h):
            value = self.value(h, config)
            if value > best_value and h.key(config) != h.key(base):
                best, best_value = config, value
        return best

    def noise(self, h: History) -> tuple[float, float]:
        per_level, per_objective, _ = h.noise(self.settings.levels, self.settings.objective)
        return per_level, per_objective

    def compare(
        self, h: History, config: Flags, ref: Flags, levels: tuple[int, ...]
    ) -> tuple[float, list[int]]:
        """(objective ratio over `levels`, the levels where config beats ref beyond the noise)."""
        a, b = h.estimate(config), h.estimate(ref)
        common = tuple(c for c in levels if c in a and c in b)
        noise, _ = self.noise(h)
        wins = [c for c in common if a[c] > b[c] * (1 + noise)]
        objective = self.settings.objective
        if objective.kind == "geomean" or objective.level not in common:
            return geomean_ratio(a, b, common), wins
        va, vb = objective.value(a, None, common), objective.value(b, None, common)
        return (va / vb if vb > 0 else 0.0), wins

    def learned_skip(self, h: History, base: Flags, cand: Flags) -> bool:
        """The same change lost clearly, at every level, from another base - or failed to start."""
        if self.crash_skip(h, base, cand):
            return True
        change = self.space.diff(base, cand)
        _, noise_obj = self.noise(h)
        margin = max(3 * noise_obj, 0.02)
        for config in h.configs():
            if any(not same(config.get(f, False), v) for f, v in change.items()):
                continue
            for ref in self.swept_configs(h):
                if self.roots(self.space.diff(ref, config)) != self.roots(change):
                    continue
                ratio, wins = self.compare(h, config, ref, self.settings.levels)
                if ratio and ratio < 1 - margin and not wins:
                    return True
        return False

    def crash_skip(self, h: History, base: Flags, cand: Flags) -> bool:
        """The same change, from another base, failed to start: it is not tried again."""
        change = self.space.diff(base, cand)
        for config, _ in h.crashed().values():
            if any(self.space.diff(ref, config) == change for ref in self.swept_configs(h)):
                return True
        return False

    def roots(self, change: Flags) -> set[str]:
        """The flags of a change that no other changed flag gates."""
        return {f for f in change if not set(self.space.requires.get(f, {})) & set(change)}

    def challenger(self, h: History, inc: Flags) -> tuple[Flags, list[int]] | None:
        """The swept configuration that beats the best by the most, at the levels it wins."""
        noise, _ = self.noise(h)
        ref = h.estimate(inc)
        best: tuple[float, Flags, list[int]] | None = None
        for config in self.swept_configs(h):
            if h.key(config) == h.key(inc):
                continue
            est = h.estimate(config)
            wins = [c for c in self.settings.levels if est[c] > ref[c] * (1 + noise)]
            gain = sum(math.log(est[c] / ref[c]) for c in wins)
            if wins and (best is None or gain > best[0]):
                best = (gain, config, wins)
        return None if best is None else (best[1], best[2])

    def gated(self, flag: str) -> list[str]:
        return [f for f, rule in self.space.requires.items() if flag in rule]
