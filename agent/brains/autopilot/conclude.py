"""The end of a campaign: re-validation on fresh launches, the winner, the concurrency policy."""

from __future__ import annotations

from agent.brains.autopilot.core import Core
from agent.brains.autopilot.history import History
from agent.brains.autopilot.steps import Experiment, Finish, PolicyRange
from tools.domain.space import Flags

MAX_VALIDATIONS = 3  # re-validation launches at most (a shuffle among near-ties must end)


class Conclusion(Core):
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
