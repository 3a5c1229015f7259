"""Ask and tell: the one way a coordinator drives the autopilot's planner (issue 30.4), as Ray
Tune's searchers are driven through `suggest` and `on_trial_complete`.

    search = AskTell(planner)                   # or AskTell(planner, history) to go on from one
    step = search.suggest()                     # one box: the next Experiment, or the Finish
    steps = search.suggest_batch(k)             # a fleet: up to k to start now (batch.py)
    search.placed(step)                         # a fleet: placed on a box, in flight
    search.tell(step, Measured((Sweep({1: 92.6, 8: 410.0}),)))   # what came back
    search.conclusion()                         # the Finish from what was told, whatever is left

The contract:
- `suggest` and `suggest_batch` read only the History (the planner is pure): asking twice without
  a tell in between gives the same answer; asking never changes anything.
- `tell` records one outcome of one suggested experiment through the History's writer (history.py)
  and nothing else: `Started` (one box: its server is up and serving, the experiment in flight),
  `NotStarted` (the launch failed: the reason), `Broken` (it started and could not be measured),
  `Measured` (its sweep, in the groups of levels it was benchmarked in); a duet (one box, the
  experiment's server up) `Beside` (the server beside it started, or why not) and then `Dueted`
  (its rounds: the two launches measured in turn, the comparison the conclusion reads). A fleet
  tells `placed`
  (the experiment in flight on a box) and `cancelled` (no longer in flight, nothing learned: a
  trial lost and placed again, or cancelled by a stop). The experiments in flight are the
  History's (`in_flight`): the planner reads them as it reads what was measured - on one box the
  one in flight is measured next (Planner.decide), on a fleet they count as launched and not
  measured (batch.plan_batch). A measurement is on the server up now when that is
  the experiment's configuration (one box); else it reuses the launch it counts as measuring again
  (batch.reused_launch: a fleet's trial measuring a screened configuration again) or is a launch
  of its own. The launch's index is returned.
- `needs_launch`: on one box, whether the experiment starts a server or measures the one up now.

Who asks and tells: the one-box brain asks every turn and tells through its run's events (observe.py
rebuilds the History from the fold with the same writer, so a resumed or replayed run asks the
same question; `resume` names the experiment the server up was launched for, from the `planned`
event the brain recorded with its start_server call); the fleet controller and the offline models
(offline.simulate for the efficiency study, benchmarks/fleet_speedup.py) ask and tell here. A
`plan` tool for a model (issue 26) would build an AskTell on its run's History and answer with
`suggest()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from agent.brains.autopilot.batch import plan_batch, reused_launch
from agent.brains.autopilot.history import Duet, History
from agent.brains.autopilot.launch_plan import recorded_step
from agent.brains.autopilot.planner import Experiment, Finish, Planner, Step
from state.sweeps import continued


@dataclass(frozen=True)
class Started:
    """One box: the experiment's server is up and serving (measured next)."""


@dataclass(frozen=True)
class NotStarted:
    """The experiment's launch failed to start; `reason` is its one line."""

    reason: str


@dataclass(frozen=True)
class Broken:
    """The experiment's server started but could not be measured; `reason` is its one line."""

    reason: str


@dataclass(frozen=True)
class Sweep:
    """One group of levels benchmarked: throughput per level, SLO met per level, result ids,
    and the floor per level its results carry ((tok/s, bound): tools/domain/physics.py)."""

    per_level: dict[int, float]
    slo_ok: dict[int, bool] | None = None
    ids: tuple[str, ...] = ()
    floors: dict[int, tuple[float, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Measured:
    """The experiment's sweep, one Sweep per group of levels it ran in (none: the launch only);
    `label` names it (default: the experiment's purpose)."""

    sweeps: tuple[Sweep, ...]
    label: str | None = None


@dataclass(frozen=True)
class Beside:
    """A duet: the server beside the experiment's (its `base`) was launched; `reason`: why it did
    not start ("": it did)."""

    reason: str = ""


@dataclass(frozen=True)
class Dueted:
    """A duet of the experiment (its server up, B) against the server beside it (A): each
    round's throughput per level on each (a, b), in order; `looks`: its most rounds."""

    rounds: tuple[tuple[dict[int, float], dict[int, float]], ...]
    looks: int


Outcome = Started | NotStarted | Broken | Measured | Beside | Dueted


class AskTell:
    """The planner and the History it reads (a new one when none is given); `planner` may be
    replaced between asks (the supervisor's directives change its settings)."""

    def __init__(self, planner: Planner, history: History | None = None) -> None:
        self.planner = planner
        self.history = History(planner.space) if history is None else history

    # --- ask -------------------------------------------------------------------------------------
    def suggest(self) -> Step:
        """One box: the next experiment - the one in flight, when its server is up and not
        measured yet (Planner.decide) - or the conclusion."""
        return self.planner.decide(self.history)

    def suggest_batch(self, free: int, screen_ahead: bool = True) -> list[Step]:
        """A fleet: up to `free` experiments to start beside those in flight (told `placed`);
        [Finish] when nothing is in flight and the planner concludes; [] when the next decision
        waits (batch.plan_batch)."""
        return plan_batch(self.planner, self.history, free, screen_ahead)

    def conclusion(self) -> Finish:
        """The conclusion from what was told so far, whatever is left to do."""
        return self.planner.finish(self.history)

    def needs_launch(self, step: Experiment) -> bool:
        """One box: whether `step` starts a server (another configuration is up, or it asks for
        a fresh launch and the one up was measured already) rather than measuring the one up."""
        h = self.history
        return h.running_key() != h.key(step.config) or (step.fresh and not h.running_fresh())

    def resume(self, recorded: dict[str, Any] | None = None) -> None:
        """A History rebuilt from a one-box log (observe.py) has the launch of the server up;
        when that server is the last launch and was not measured yet, the experiment it was
        launched for is told in flight. `recorded`: that launch's `planned` event (the autopilot
        records why it starts each server: launch_plan.py), read as it is while the settings it
        was planned under (the directives, the wrap-up) still hold. Without one - a log from
        before the `planned` events, a model's run, or settings changed since - it is
        re-derived: the planner's step on the History before that launch (it is pure). A launch
        it would not make now names none: the planner reads it as launched. The launches the
        minutes left pay for (Settings.launches_fit) count that launch as started: before it, it
        was one more - else the one launch that fit would be read as one too many, and concluded
        on unmeasured."""
        h = self.history
        if h.in_flight or not h.running_fresh() or h.running != len(h.launches) - 1:
            return
        told = recorded_step(recorded, self.planner.settings) if recorded else None
        if told is not None and h.key(told.config) == h.running_key():
            h.started(told)
            return
        before = History(
            h.space, h.launches[:-1], h.measurements, None, h.broken, duets=h.duets, side=h.side
        )
        planner, fit = self.planner, self.planner.settings.launches_fit
        if fit is not None:
            planner = Planner(planner.space, replace(planner.settings, launches_fit=fit + 1))
        step = planner.next_step(before)
        if isinstance(step, Experiment) and h.key(step.config) == h.running_key():
            h.started(step)

    # --- tell ------------------------------------------------------------------------------------
    def placed(self, step: Experiment) -> None:
        """A fleet: `step` is placed on a box, in flight until its outcome is told."""
        self.history.started(step)

    def cancelled(self, step: Experiment) -> None:
        """`step` is no longer in flight and nothing is learned from it: a fleet's trial lost
        with its node (placed again), or cancelled by a stop or a budget."""
        self.history.ended(step)

    def tell(self, step: Experiment, outcome: Outcome) -> int:
        """Record what came of `step` (see the module docstring); the index of its launch."""
        h = self.history
        if isinstance(outcome, Beside):  # the duet is still to measure: in flight
            assert step.base is not None, "a server beside is a duet's"
            h.side_launched(step.base, ok=not outcome.reason, reason=outcome.reason)
            return h.running if h.running is not None else -1
        h.ended(step)
        if isinstance(outcome, Dueted):
            return self._dueted(step, outcome)
        if isinstance(outcome, Started):
            launch = h.launched(step.config, serving=True)
            h.started(step)
            return launch
        if isinstance(outcome, NotStarted):
            return h.launched(step.config, ok=False, reason=outcome.reason, serving=True)
        if isinstance(outcome, Broken):
            launch = h.launched(step.config)
            h.broke(launch, outcome.reason)
            return launch
        launch = self._launch_of(step)
        for sweep in outcome.sweeps:
            h.floored(step.config, sweep.floors)

        label = step.purpose if outcome.label is None else outcome.label
        for i, sweep in enumerate(outcome.sweeps):  # its calls by groups of levels, merged by
            # the one rule (state.sweeps.continued); the first begins a sweep: a trial measures anew
            index = continued(h.measurements, launch, label, sweep.per_level) if i else None
            if index is None:
                h.measured(step.config, launch, sweep.per_level, label, sweep.slo_ok, sweep.ids)
            else:
                h.measured_more(index, sweep.per_level, sweep.slo_ok, sweep.ids)
        return launch

    def _dueted(self, step: Experiment, outcome: Dueted) -> int:
        """Each round's blocks as measurements of the two launches (as observe.py records a
        duet's results), the Duet, and the server beside stopped."""
        h = self.history
        side, launch = h.side.launch, h.running
        assert side is not None and launch is not None and step.base is not None
        for a, b in outcome.rounds:
            h.measured(h.launches[side].config, side, a, "duet")
            h.measured(step.config, launch, b, "duet")
        h.dueted(Duet(h.launches[side].config, step.config, outcome.rounds, outcome.looks))
        h.side_gone()
        return launch

    def _launch_of(self, step: Experiment) -> int:
        """The launch a measurement of `step` is on: the server up now when it is this
        configuration; else the launch it measures again (reused_launch), or a new one."""
        h = self.history
        if h.running is not None and h.running_key() == h.key(step.config):
            return h.running
        reused = reused_launch(h, step)
        return h.launched(step.config) if reused is None else reused
