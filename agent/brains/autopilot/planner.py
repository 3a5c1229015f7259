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

from agent.brains.autopilot.conclude import Conclusion
from agent.brains.autopilot.families import Families
from agent.brains.autopilot.history import History
from agent.brains.autopilot.steps import (
    Experiment,
    Finish,
    PolicyRange,
    Settings,
    Step,
    levels_text,
    show_value,
    spread,
)
from tools.domain.space import Flags

__all__ = ["Experiment", "Finish", "Planner", "PolicyRange", "Settings", "Step", "spread"]


class Planner(Families, Conclusion):
    """The strategy (see the module docstring); Core, Families and Conclusion hold its parts."""

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
        why = f"it wins at C={levels_text(wins)}: confirm, it may set the concurrency policy"
        return Experiment(last.config, levels, "confirm", why, base=inc)

    def explore(self, h: History, inc: Flags) -> Experiment | None:
        prefer = self.best_known(h)
        moves = [
            (f"{f} {show_value(inc.get(f))} -> {show_value(v)}", c)
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
