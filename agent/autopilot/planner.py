"""The campaign strategy: given what was measured, the next experiment, or the conclusion.

A pure function of a History (no memory of its own), so a resumed or replayed run decides exactly
what the original did. The discipline, in order:

1. the baseline, swept over every level, then swept again (A/A): the noise floor;
2. one factor at a time from the current best: each neighbour is launched and screened on a few
   levels, and only a promising one gets a full sweep; the best moves as soon as a full sweep beats
   it, so the winners of earlier changes combine as the search goes on; flag values that enable a
   family (speculation) bring the best parameters measured for it so far;
3. changes are learned from: one that lost clearly at every level from another base is not tried
   again, nor one that failed to start; no configuration is launched twice except to re-validate;
4. the challenger: a configuration that beats the best at some levels (speculation at low
   concurrency) has its own parameters tuned on those levels, for a concurrency policy;
5. the winner (and the challenger) re-validated on a fresh launch; then the conclusion.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from agent.autopilot.history import History, Objective, geomean_ratio
from agent.search import Flags, Scalar, SearchSpace, same

MAX_VALIDATIONS = 3  # re-validation launches at most (a shuffle among near-ties must end)
FAMILY_FLOOR = 0.8  # a family farther behind than this at every level is not tuned


@dataclass(frozen=True)
class Settings:
    levels: tuple[int, ...]
    objective: Objective = field(default_factory=Objective)
    screen_levels: tuple[int, ...] = ()  # () = lowest, middle and highest level
    max_launches: int = 40
    excluded: tuple[str, ...] = ()  # flags held at their baseline value ("skip speculation")
    wrap_up: bool = False  # no new candidates: validate and conclude
    challenger: bool = True  # tune a per-level challenger for a concurrency policy

    def screens(self) -> tuple[int, ...]:
        if self.objective.kind == "level" and self.objective.level in self.levels:
            return (self.objective.level,)
        return self.screen_levels or spread(self.levels)


@dataclass(frozen=True)
class Experiment:
    config: Flags
    levels: tuple[int, ...]
    purpose: str  # baseline | noise | screen | confirm | challenger | validate
    why: str
    fresh: bool = False  # on a launch not measured yet, even if this config is running
    base: Flags | None = None  # what it is compared against

    @property
    def full(self) -> bool:
        return self.purpose not in ("screen", "challenger")


@dataclass(frozen=True)
class PolicyRange:
    from_concurrency: int
    to_concurrency: int | None  # None: and above
    config: Flags


@dataclass(frozen=True)
class Finish:
    best: Flags | None
    why: str
    value: float = 0.0
    baseline_value: float = 0.0
    policy: tuple[PolicyRange, ...] = ()
    crossover: tuple[int, ...] = ()
    failed: bool = False


Step = Experiment | Finish


@dataclass
class Planner:
    space: SearchSpace
    settings: Settings
    _notes: list[str] = field(default_factory=list)

    # --- the decision ---------------------------------------------------------------------------
    def decide(self, h: History) -> Step:
        """The next step. A server launched for an experiment and not measured yet is that
        experiment still: deciding again without its launch names it (the planner is pure)."""
        if h.running_fresh() and h.running == len(h.launches) - 1:
            before = History(self.space, h.launches[:-1], h.measurements, None, h.broken)
            step = self._decide(before)
            if isinstance(step, Experiment) and h.key(step.config) == h.running_key():
                return step
        return self._decide(h)

    def _decide(self, h: History) -> Step:
        s, b, levels = self.settings, self.space.baseline, self.settings.levels
        crashed = h.crashed()
        if not h.swept(b, levels):
            if h.key(b) in crashed:
                why = f"the baseline does not start or cannot be measured: {crashed[h.key(b)][1]}"
                return Finish(best=None, why=why, failed=True)
            return Experiment(b, levels, "baseline", "sweep the baseline over every level")
        if len(h.sweeps(b, levels)) < 2:
            return Experiment(
                b, levels, "noise", "sweep the baseline again: the A/A pair gives the noise floor"
            )
        inc = self.incumbent(h)
        left = s.max_launches - h.launches_used()
        validating = any(m.purpose == "validate" for m in h.measurements)
        if not s.wrap_up and not validating:  # once validation starts, exploring is over
            step = self.confirm(h, inc)
            if step is None and left > 1:  # one launch is kept for the re-validation
                step = self.explore(h, inc) or self.tune_families(h, inc)
            if step is not None:
                return step
        return self.validate(h, inc, left) or self.finish(h)

    # --- who leads ------------------------------------------------------------------------------
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
        """The best configuration swept over every level (the baseline until one beats it)."""
        best, best_value = self.space.baseline, self.value(h, self.space.baseline)
        for config in self.swept_configs(h):
            value = self.value(h, config)
            if value > best_value:
                best, best_value = config, value
        return best

    def noise(self, h: History) -> tuple[float, float]:
        per_level, per_objective, _ = h.noise(self.settings.levels, self.settings.objective)
        return per_level, per_objective

    # --- screening and confirmation -------------------------------------------------------------
    def confirm(self, h: History, inc: Flags) -> Experiment | None:
        """The latest measurement was a screen: sweep it fully if it may beat the best on the
        objective (within the objective's noise of it, or above), or - for the policy - if it
        wins some level beyond the noise and is the best of its family there so far."""
        if not h.measurements:
            return None
        last = h.measurements[-1]
        levels = self.settings.levels
        if h.swept(last.config, levels) or not self.allowed(last.config):
            return None
        screened = tuple(last.per_level)
        ratio, wins = self.compare(h, last.config, inc, screened)
        _, noise_obj = self.noise(h)
        if ratio >= 1 - noise_obj:
            why = f"the screen is within the noise of the best or above ({ratio:.3f}x): confirm"
            return Experiment(last.config, levels, "confirm", why, base=inc)
        if not wins or not self.settings.challenger:
            return None
        rival = self.challenger(h, inc)
        if rival is not None and last.purpose == "challenger":
            rival_ratio, _ = self.compare(h, last.config, rival[0], screened)
            if rival_ratio <= 1:
                return None  # it wins there, but the family already has a better member
        why = f"it wins at C={_levels(wins)}: confirm, it may set the concurrency policy"
        return Experiment(last.config, levels, "confirm", why, base=inc)

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

    # --- one factor at a time -------------------------------------------------------------------
    def explore(self, h: History, inc: Flags) -> Experiment | None:
        prefer = self.best_known(h)
        moves = [
            (f"{f} {_v(inc.get(f))} -> {_v(v)}", c)
            for f, v, c in self.space.neighbours(inc, prefer)
        ]
        for gate in self.space.flags:  # coupled parameters of a family that is on: two at once
            if self.gated(gate) and inc.get(gate, False) is not False:
                family = set(self.gated(gate))
                moves += [
                    (self.describe(inc, c), c)
                    for c in self.family_moves(inc, family)
                    if len(self.space.diff(inc, c)) == 2
                ]
        for what, cand in moves:
            if not self.allowed(cand) or h.tried(cand) or self.learned_skip(h, inc, cand):
                continue
            why = f"one factor from the best: {what}"
            return Experiment(cand, self.settings.screens(), "screen", why, fresh=True, base=inc)
        return None

    def best_known(self, h: History) -> Flags:
        """For each flag, its value in the best configuration that gives it (by objective):
        what a family brings along when it is switched on from a new base."""
        out: Flags = {}
        ranked = sorted(self.swept_configs(h), key=lambda c: -self.value(h, c))
        for config in ranked:
            for flag, value in config.items():
                if value is not False:
                    out.setdefault(flag, value)
        return out

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

    # --- the challenger: a concurrency policy ----------------------------------------------------
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
                    f"tune {gate}={_v(value)}: it comes to {ratio:.2f}x of the best at "
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
            f"{f} {_v(base.get(f, False))} -> {_v(v)}"
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

    def gated(self, flag: str) -> list[str]:
        return [f for f, rule in self.space.requires.items() if flag in rule]

    def closeness(self, h: History, config: Flags, inc: Flags) -> tuple[float, int]:
        """(the best per-level ratio to the best configuration, the level where it is)."""
        a, b = h.estimate(config), h.estimate(inc)
        ratios = [(a[c] / b[c], c) for c in a if b.get(c, 0) > 0]
        return max(ratios, default=(0.0, 0))

    # --- the end --------------------------------------------------------------------------------
    def validated(self, h: History, config: Flags) -> bool:
        return len({m.launch for m in h.sweeps(config, self.settings.levels)}) >= 2

    def validate(self, h: History, inc: Flags, left: int) -> Experiment | None:
        levels = self.settings.levels
        done = sum(1 for c in h.configs() if self.validated(h, c) and c != self.space.baseline)
        if left < 1 or done >= MAX_VALIDATIONS:
            return None
        if not self.validated(h, inc):
            return Experiment(
                inc, levels, "validate", "re-validate the winner on a fresh launch", fresh=True
            )
        found = self.challenger(h, inc) if self.settings.challenger else None
        if found is not None and not self.validated(h, found[0]):
            return Experiment(
                found[0],
                levels,
                "validate",
                "re-validate the challenger on a fresh launch",
                fresh=True,
            )
        return None

    def finish(self, h: History) -> Finish:
        inc = self.incumbent(h)
        value, base_value = self.value(h, inc), self.value(h, self.space.baseline)
        policy, crossover = self.policy(h, inc)
        gain = value / base_value - 1 if base_value > 0 else 0.0
        _, noise_obj = self.noise(h)
        if h.key(inc) == h.key(self.space.baseline):
            why = "no candidate beat the baseline by more than the noise floor"
        elif gain <= noise_obj:
            why = f"the best beats the baseline by {gain:+.1%}, within the noise floor"
        else:
            why = f"the best beats the baseline by {gain:+.1%} (noise floor {noise_obj:.1%})"
        return Finish(inc, why, value, base_value, policy, crossover)

    def policy(self, h: History, inc: Flags) -> tuple[tuple[PolicyRange, ...], tuple[int, ...]]:
        levels = self.settings.levels
        found = self.challenger(h, inc) if self.settings.challenger else None
        owner = [inc] * len(levels)
        if found is not None:
            owner = [found[0] if c in found[1] else inc for c in levels]
        ranges: list[PolicyRange] = []
        crossover: list[int] = []
        for i, c in enumerate(levels):
            if ranges and h.key(ranges[-1].config) == h.key(owner[i]):
                continue
            if ranges:
                last = ranges[-1]
                ranges[-1] = PolicyRange(last.from_concurrency, levels[i - 1], last.config)
                crossover.append(c)
            ranges.append(PolicyRange(c, None, owner[i]))
        return tuple(ranges), tuple(crossover)


def spread(levels: tuple[int, ...]) -> tuple[int, ...]:
    """Lowest, highest and the level nearest their geometric middle."""
    ordered = sorted(levels)
    if len(ordered) <= 3:
        return tuple(ordered)
    lo, hi = ordered[0], ordered[-1]
    middle = math.sqrt(max(lo, 1) * hi)
    mid = min(ordered[1:-1], key=lambda c: abs(math.log(c / middle)))
    return (lo, mid, hi)


def _levels(levels: list[int] | tuple[int, ...]) -> str:
    return ",".join(str(c) for c in levels)


def _v(value: object) -> str:
    return "off" if value is False else "on" if value is True else str(value)
