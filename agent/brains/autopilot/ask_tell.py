"""Ask and tell: the one way a coordinator drives the autopilot's planner (issue 30.4), as Ray
Tune's searchers are driven through `suggest` and `on_trial_complete`.

    search = AskTell(planner)                   # or AskTell(planner, history) to go on from one
    step = search.suggest()                     # one box: the next Experiment, or the Finish
    steps = search.suggest_batch(in_flight, k)  # a fleet: up to k to start now (batch.py)
    search.tell(step, Measured((Sweep({1: 92.6, 8: 410.0}),)))   # what came back
    search.conclusion()                         # the Finish from what was told, whatever is left

The contract:
- `suggest` and `suggest_batch` read only the History (the planner is pure): asking twice without
  a tell in between gives the same answer; asking never changes anything.
- `tell` records one outcome of one suggested experiment through the History's writer (history.py)
  and nothing else: `Started` (one box: its server is up and serving), `NotStarted` (the launch
  failed: the reason), `Broken` (it started and could not be measured), `Measured` (its sweep, in
  the groups of levels it was benchmarked in). A measurement is on the server up now when that is
  the experiment's configuration (one box); else it reuses the launch it counts as measuring again
  (batch.reused_launch: a fleet's trial measuring a screened configuration again) or is a launch
  of its own. The launch's index is returned.
- `needs_launch`: on one box, whether the experiment starts a server or measures the one up now.

Who asks and tells: the one-box brain asks every turn and tells through its run's events (observe.py
rebuilds the History from the fold with the same writer, so a resumed or replayed run asks the
same question); the fleet controller and the offline models (offline.simulate for the efficiency
study, benchmarks/fleet_speedup.py) ask and tell here. A `plan` tool for a model (issue 26) would
build an AskTell on its run's History and answer with `suggest()`.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.brains.autopilot.batch import plan_batch, reused_launch
from agent.brains.autopilot.history import History
from agent.brains.autopilot.planner import Experiment, Finish, Planner, Step


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
    """One group of levels benchmarked: throughput per level, SLO met per level, result ids."""

    per_level: dict[int, float]
    slo_ok: dict[int, bool] | None = None
    ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Measured:
    """The experiment's sweep, one Sweep per group of levels it ran in (none: the launch only);
    `label` names it (default: the experiment's purpose)."""

    sweeps: tuple[Sweep, ...]
    label: str | None = None


Outcome = Started | NotStarted | Broken | Measured


class AskTell:
    """The planner and the History it reads (a new one when none is given); `planner` may be
    replaced between asks (the supervisor's directives change its settings)."""

    def __init__(self, planner: Planner, history: History | None = None) -> None:
        self.planner = planner
        self.history = History(planner.space) if history is None else history

    # --- ask -------------------------------------------------------------------------------------
    def suggest(self) -> Step:
        """One box: the next experiment, or the conclusion (a server launched for an experiment
        and not measured yet is that experiment still: Planner.decide)."""
        return self.planner.decide(self.history)

    def suggest_batch(
        self, in_flight: list[Experiment], free: int, screen_ahead: bool = True
    ) -> list[Step]:
        """A fleet: up to `free` experiments to start beside `in_flight`; [Finish] when nothing is
        in flight and the planner concludes; [] when the next decision waits (batch.plan_batch)."""
        return plan_batch(self.planner, self.history, in_flight, free, screen_ahead)

    def conclusion(self) -> Finish:
        """The conclusion from what was told so far, whatever is left to do."""
        return self.planner.finish(self.history)

    def needs_launch(self, step: Experiment) -> bool:
        """One box: whether `step` starts a server (another configuration is up, or it asks for
        a fresh launch and the one up was measured already) rather than measuring the one up."""
        h = self.history
        return h.running_key() != h.key(step.config) or (step.fresh and not h.running_fresh())

    # --- tell ------------------------------------------------------------------------------------
    def tell(self, step: Experiment, outcome: Outcome) -> int:
        """Record what came of `step` (see the module docstring); the index of its launch."""
        h = self.history
        if isinstance(outcome, Started):
            return h.launched(step.config, serving=True)
        if isinstance(outcome, NotStarted):
            return h.launched(step.config, ok=False, reason=outcome.reason, serving=True)
        if isinstance(outcome, Broken):
            launch = h.launched(step.config)
            h.broke(launch, outcome.reason)
            return launch
        launch = self._launch_of(step)
        label = step.purpose if outcome.label is None else outcome.label
        for i, sweep in enumerate(outcome.sweeps):  # a sweep split by groups of levels is one
            if i == 0:
                h.measured(step.config, launch, sweep.per_level, label, sweep.slo_ok, sweep.ids)
            else:
                h.measured_more(sweep.per_level, sweep.slo_ok, sweep.ids)
        return launch

    def _launch_of(self, step: Experiment) -> int:
        """The launch a measurement of `step` is on: the server up now when it is this
        configuration; else the launch it measures again (reused_launch), or a new one."""
        h = self.history
        if h.running is not None and h.running_key() == h.key(step.config):
            return h.running
        reused = reused_launch(h, step)
        return h.launched(step.config) if reused is None else reused
