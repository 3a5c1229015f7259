"""The campaign strategy: given what was measured, the next experiment, or the conclusion.

A pure function of a History (no memory of its own), so a resumed or replayed run decides exactly
what the original did. `Planner.next_step` reads top to bottom as the strategy; each stage is a
plain function of what was measured (a Reading of the History), in a file cut by meaning:

1. the baseline, swept over every level, then swept again (A/A): the noise floor (here);
2. one factor at a time from the current best (screening.explore): each neighbour is launched and
   screened on a few levels, and only a promising one gets a full sweep (screening.confirm); the
   best moves as soon as a full sweep beats it, so the winners of earlier changes combine as the
   search goes on; flag values that enable a family bring the best parameters measured for it;
3. changes are learned from (reading.learned_skip): one that lost clearly at every level from
   another base is not tried again, nor one that failed to start; no configuration is launched
   twice except to re-validate;
3a. a move that failed to start once is launched again from a base without the flags suspected
   of the failure (retry.crashed_move) before it is banned;
3b. interactions (combine.pairs): when no one-factor change is left, pairs of the changes that
   did well (not only the winners) on the best; when those and the family are spent, a surrogate
   (combine.surrogate, an additive model of everything swept) proposes up to three launches;
3e. interactions of any order (bundles.bundle): when every other stage is spent and launches are
   left, the changes that were each within the noise alone are launched together on the best,
   and read against the additive model (the stage stops when nothing is expected to beat the best
   by more than the floor);
3g. the contrary bundle (contrary.contrary): the changes that did not win alone - of each flag
   the value that lost the most, down to 12 % below its reference - launched together on the
   baseline, not on the best (a small win adopted first may be what spoils them), read against
   the additive model; then without each part that loses alone while the model expects the
   rest to beat the best. Once a third of the budget is spent, ahead of the one-factor stage,
   and again when the other stages are spent (at most 3 launches), then up to 3 bundles of the
   values no contrary bundle held yet (contrary.late: which value of a flag is a part is a draw
   where its values screen within the noise): the only stage that does not build on what won
   alone;
3f. a small space searched whole (remaining.rest): when every configuration never launched fits
   in the launches left for exploring, the next of them, instead of concluding with launches to
   spare (a combination whose parts lose alone is launched by no stage above);
3c. noise-adaptive (precision.py; an objective at one level measures that level alone): an A/A
   floor above the target precision sweeps the baseline
   again; a full sweep inside the comparison's noise above the best is swept again; a start
   failure is put down to the flags that explain it (reading.crash_reason), and identical launch
   failures no flag explains end the campaign (conclude.same_failures);
3h. against physics (physics_stop.py, issue 48): once flags could add less than the noise floor
   at every level the objective reads (the best configuration without speculation is within the
   noise of the ceiling flags reach, about 80 % of the bandwidth floor), exploring stops but for
   speculation, the one lever past the floor; never where a level has no floor, another bound
   than memory, or the noise floor is not measured;
4. the challenger (families.tune): a family (speculation) that beats the best at some levels, or
   comes close, has its own parameters tuned on those levels, for a concurrency policy;
5. the winner (and the challenger) re-validated on a fresh launch (conclude.validate); then the
   conclusion (conclude.finish). On a fleet (Settings.crossover) the winner is proven in
   crossovers (conclude.cross), the challenger re-validated beside them. Figures come from
   tools/domain/stats.py (reading.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from agent.brains.autopilot import (
    bundles,
    combine,
    conclude,
    contrary,
    families,
    physics_stop,
    precision,
    remaining,
    retry,
    screening,
)
from agent.brains.autopilot.history import History
from agent.brains.autopilot.reading import Reading
from agent.brains.autopilot.steps import (
    SERIAL,
    Experiment,
    Finish,
    PolicyRange,
    Settings,
    Step,
    spread,
)
from tools.domain.space import SearchSpace

__all__ = ["Experiment", "Finish", "Planner", "PolicyRange", "Settings", "Step", "spread"]


@dataclass(frozen=True)
class Planner:
    space: SearchSpace
    settings: Settings

    def decide(self, h: History) -> Step:
        """The next step on one box: the experiment in flight (History.in_flight: its server is up
        and not measured yet) is measured next; else the strategy's next step."""
        if h.in_flight:
            return h.in_flight[-1]
        return self.next_step(h)

    def next_step(self, h: History) -> Step:
        """The strategy, stage by stage (see the module docstring)."""
        s, base, r = self.settings, self.space.baseline, self.read(h)
        # 1. the baseline over every level, then again: the A/A pair gives the noise floor
        if not h.swept(base, s.levels):
            crashed = h.crashed().get(h.key(base))
            if crashed is not None:
                why = f"the baseline does not start or cannot be measured: {crashed[1]}"
                return Finish(best=None, why=why, failed=True)
            return Experiment(base, s.levels, "baseline", "sweep the baseline over every level")
        if len(h.sweeps(base, s.levels)) < 2:
            why = "sweep the baseline again: the A/A pair gives the noise floor"
            return Experiment(base, s.levels, "noise", why)
        more = precision.baseline_again(r)  # a noisier A/A than the target: measure more
        if more is not None:
            return more
        inc = r.incumbent
        stuck = conclude.same_failures(r)
        if stuck is not None:  # the launches fail for a reason no flag explains: stop launching
            done = conclude.finish(r)
            return replace(done, why=f"{done.why}; {stuck}")
        left = r.budget_left
        validating = any(m.purpose in SERIAL for m in h.measurements)
        if not s.wrap_up and not validating:  # once validation starts, exploring is over
            # 2. a screen that may beat the best (or win some levels) gets its full sweep
            # a full sweep inside the noise of the best is swept again before deciding
            step = precision.repeat(r, inc) or screening.confirm(r, inc)
            # 2-3. else the next one-factor change from the best that nothing learned rules out;
            # 4. else the family that comes close is tuned (one launch is kept to re-validate)
            # 3b. else pairs of changes that did well, then 4., then the surrogate's proposal
            # 3g. a contrary bundle once a third of the budget is spent, ahead of the one-factor
            # stage, and again when every other stage is spent, then values it did not hold yet
            # 3h. flags spent against physics: only speculation is explored
            stop = physics_stop.spent(r) if step is None else None
            if stop is not None and left > conclude.reserved(s.max_launches):
                step = physics_stop.speculation_move(r, inc, stop)
            elif step is None and left > conclude.reserved(s.max_launches):
                step = (
                    contrary.early(r, inc)
                    or screening.explore(r, inc)
                    or retry.crashed_move(r, inc)
                    or combine.pairs(r, inc)
                    or families.tune(r, inc)
                    or combine.surrogate(r, inc)
                    or bundles.bundle(r, inc)
                    or contrary.late(r, inc)
                    or remaining.rest(r, inc)
                )
            if step is not None:
                return step
        # 5. where the host fits two servers side by side, the winner on a fresh launch against
        # the baseline in a duet first (a wrap-up that re-validated first left a real-vLLM
        # campaign no minutes for the duet), then the challenger re-validated; else re-validate
        # the winner and the challenger on fresh launches, then launch pairs (ABBA: the verdict
        # reads them), then conclude;
        # once a pair of the winner is measured, the pairs go on with it unless another leads
        # and the budget can still test that one (conclude.pairs_go_on)
        if s.crossover:  # a fleet: the challenger re-validated beside the crossovers
            crossed = conclude.cross_subject(r)
            return (
                conclude.validate(r, crossed, left, winner=False)
                or conclude.cross(r, crossed, left)
                or conclude.finish(r)
            )
        if conclude.duets(r):  # the duet launches the winner afresh: its re-validation too
            return (
                conclude.duet(r, inc, left)
                or conclude.validate(r, inc, left, winner=False)
                or conclude.finish(r)
            )
        subject = conclude.pairs_go_on(r)
        if subject is not None:
            return conclude.pair(r, subject, left) or conclude.finish(r)
        return (
            conclude.validate(r, inc, left)
            or conclude.duet(r, inc, left)
            or conclude.pair(r, inc, left)
            or conclude.finish(r)
        )

    def read(self, h: History) -> Reading:
        """What `h` says - the noise floor, the best, comparisons - under these settings."""
        return Reading(self.space, self.settings, h)

    def finish(self, h: History) -> Finish:
        """The conclusion from what was measured so far, whatever is left to do."""
        return conclude.finish(self.read(h))
