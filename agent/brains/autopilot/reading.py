"""What a History says, read once per decision: which configurations are allowed, measured and
best, the noise floor, comparisons, what was learned (changes that lost everywhere, crashes), and
the challenger - the configuration that beats the best at some levels.

Every figure comes from tools/domain/stats.py, the one module of campaign statistics, so the
autopilot and compare, recommend and the report agree on the noise floor and each ratio.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property

from agent.brains.autopilot.history import History
from agent.brains.autopilot.purposes import AT_LEVEL
from agent.brains.autopilot.steps import Settings, show_value
from tools.domain import stats
from tools.domain.decision import at_level
from tools.domain.gpus import gpus_of
from tools.domain.space import Flags, SearchSpace, same

NOISE_DEFAULT = 0.03  # what the planner plans with before a repeat measures the floor
TIE = 1e-9  # objective values this close are a tie (max_load counts levels): the simpler wins


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
        configuration beats it by more than the noise of that comparison (Reading.precision):
        no win smaller than the noise."""
        base = self.space.baseline
        base_value = self.value(base)
        best, best_value = base, 0.0
        for config in self.swept_configs:
            value = self.value(config)
            if self.h.key(config) == self.h.key(base):
                continue
            if value <= base_value * (1 + self.precision(config, base)):
                continue
            tie = abs(value - best_value) <= TIE * max(value, best_value)
            if (value > best_value and not tie) or (tie and self.simpler(config, best)):
                best, best_value = config, value
        return best

    def simpler(self, a: Flags, b: Flags) -> bool:
        """a costs less than b: fewer GPUs, then fewer flags changed from the baseline."""
        base = self.space.baseline

        def cost(c: Flags) -> tuple[int, int]:
            return gpus_of(c, self.settings.parallelism), len(self.space.diff(base, c))

        return cost(a) < cost(b)

    @property
    def budget_left(self) -> int:
        """The launches the budget still allows (negative: spent beyond it): a launch the minutes
        left cannot end (Settings.launches_fit) is not started."""
        s = self.settings
        left = s.max_launches - self.h.launches_used()
        return left if s.launches_fit is None else min(left, s.launches_fit)

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

    def samples(self, config: Flags) -> int:
        """How many measurements the objective's figure for config is the mean of: its full
        sweeps; for an objective at one level, also its measurements of that level alone (the
        precision stages' repeats there, measured as a full sweep measures that level)."""
        levels, level = self.settings.levels, self.settings.one_level()
        full = [m for m in self.h.of(config) if set(levels) <= set(m.per_level)]
        if level is None:
            return len(full)
        alone = [
            m for m in self.h.of(config) if m.purpose in AT_LEVEL and set(m.per_level) == {level}
        ]
        return len(full) + len(alone)

    def precision(self, config: Flags, ref: Flags) -> float:
        """The objective's floor for config against ref, each the mean of its samples: a mean
        of n has sqrt(n) less noise (the floor is that of one sweep against one)."""
        n, m = self.samples(config), self.samples(ref)
        return stats.floor_of_means(self.objective_noise, n, m)

    @property
    def clear_margin(self) -> float:
        """A loss larger than this is clear: three objective floors, at least 2 %."""
        return max(3 * self.objective_noise, 0.02)

    # --- comparisons -----------------------------------------------------------------------------
    def wins(self, config: Flags, ref: Flags, levels: tuple[int, ...]) -> list[int]:
        """The levels (of `levels`, in order) where config beats ref by more than the noise."""
        ratios = stats.level_ratios(self.h.estimate(config), self.h.estimate(ref))
        return [c for c in levels if c in ratios and at_level(ratios[c], self.level_noise) == "win"]

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
        sa, sb = self.h.slo_ok(config), self.h.slo_ok(ref)  # (an SLO at one level reads them)
        va, vb = objective.value(a, sa, common), objective.value(b, sb, common)
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
        margin = self.clear_margin
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
        """The same change failed to start, and what is known says it fails here too."""
        return self.crash_reason(base, cand) is not None

    def crash_reason(self, base: Flags, cand: Flags) -> str | None:
        """Why base -> cand is expected to fail to start, or None. A failed change is put down
        to the smallest set of flags that explains its crashes (no configuration that started
        shares those values): the change alone at first, so it is retried once on another base
        before it is banned everywhere; a start elsewhere narrows the blame to the partner flags
        it differed in (--cache-type-v q4_0 fails only with --flash-attn off)."""
        change = self.space.diff(base, cand)
        crashes = self.crashes_of(change)
        if not crashes:
            return None
        started = self.started_with(change)
        for config, why in crashes:
            blame = self.blame(config, change, started)
            if not all(same(cand.get(f, False), config.get(f, False)) for f in blame):
                continue
            if len(crashes) == 1 and not started and blame == set(change):
                return None  # one retry on a base that differs in a suspected partner flag
            return why
        return None

    def crashes_of(self, change: Flags) -> list[tuple[Flags, str]]:
        """The crashed configurations that were this change from a swept configuration."""
        return [
            (config, why)
            for config, why in self.h.crashed().values()
            if any(self.space.diff(ref, config) == change for ref in self.swept_configs)
        ]

    def started_with(self, change: Flags) -> list[Flags]:
        """Configurations that started and carry every value of the change."""
        return [
            launch.config
            for launch in self.h.launches
            if launch.ok and all(same(launch.config.get(f, False), v) for f, v in change.items())
        ]

    def blame(self, crashed: Flags, change: Flags, started: list[Flags]) -> set[str]:
        """The smallest set of flags, the change's own and up to two partners, on which no
        started configuration agrees with the crashed one (every flag, when none is)."""
        own = set(change)
        suspects = [
            f
            for f in self.space.flags
            if f not in own
            and any(not same(s.get(f, False), crashed.get(f, False)) for s in started)
        ]
        for size in range(3):
            for extra in itertools.combinations(suspects, size):
                blame = own | set(extra)
                if not any(
                    all(same(s.get(f, False), crashed.get(f, False)) for f in blame)
                    for s in started
                ):
                    return blame
        return set(self.space.flags)

    def learned_failures(self) -> list[str]:
        """What the crashes taught, one line each: the flag values a failure is put down to."""
        out: list[str] = []
        for config, why in self.h.crashed().values():
            for ref in self.swept_configs:
                change = self.space.diff(ref, config)
                if not change or len(self.roots(change)) != 1:
                    continue
                blame = self.blame(config, change, self.started_with(change))
                words = ", ".join(
                    f"{f} {show_value(config.get(f, False))}"
                    for f in self.space.flags
                    if f in blame
                )
                line = f"fails to start with {words}: {why[:120]}"
                if line not in out:
                    out.append(line)
                break
        return out

    def fails_like(self, cand: Flags) -> str | None:
        """Why `cand` is expected to fail to start, whatever its base, or None: it has every flag
        value a failure was put down to (each crash read as a change from the swept
        configuration nearest it). For a launch of many changes at once, where crash_reason's
        one change from a base does not apply."""
        for config, why in self.h.crashed().values():
            changes = [self.space.diff(ref, config) for ref in self.swept_configs]
            changes = [c for c in changes if c]
            if not changes:
                continue
            change = min(changes, key=lambda c: len(self.roots(c)))
            blame = self.blame(config, change, self.started_with(change))
            if all(same(cand.get(f, False), config.get(f, False)) for f in blame):
                return why
        return None

    def roots(self, change: Flags) -> set[str]:
        """The flags of a change that no other changed flag gates."""
        return {f for f in change if not set(self.space.requires.get(f, {})) & set(change)}
