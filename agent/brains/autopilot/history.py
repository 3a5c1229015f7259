"""What a campaign has measured so far: launches (and the crashes among them) and benchmarks.

The planner reads nothing else. The brain rebuilds a History from the run's fold every turn, the
fleet controller from its trials, and the efficiency study from the simulator's truth, so all drive
the same planner. The methods under "recording" are the only writers of a History's launches,
measurements, running server, broken launches and experiments in flight
(tests/test_history_writer.py checks the tree).

The experiments in flight are state, as Optuna's GridSampler reads finished and running trials from
one storage: each experiment started and not measured (nor broken, nor failed to start) yet, with
its purpose - on one box the one whose server is up (`started` after `launched(..., serving=True)`),
on a fleet every trial placed. The planner reads them (Planner.decide: the one-box experiment in
flight is measured next; batch.plan_batch: what is in flight counts as launched). One re-derivation
is left: a one-box log does not record what a server was launched for, so after a rebuild from the
events AskTell.resume names it as the planner did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.brains.autopilot.purposes import Purpose, purpose_of
from tools.domain import stats
from tools.domain.objective import objective_value
from tools.domain.space import Flags, SearchSpace

if TYPE_CHECKING:  # steps.py reads this module's Objective
    from agent.brains.autopilot.steps import Experiment


@dataclass(frozen=True)
class Objective:
    """What the campaign maximises (tools.domain.config.ObjectiveConfig, minus the SLO limits, which
    are already folded into each measurement's `slo_ok`)."""

    kind: str = "geomean"
    level: int | None = None

    def value(
        self,
        per_level: Mapping[int, float],
        slo_ok: Mapping[int, bool] | None = None,
        levels: Iterable[int] | None = None,
    ) -> float:
        keep = set(levels) if levels is not None else set(per_level)
        subset = {c: v for c, v in per_level.items() if c in keep}
        one = stats.read_level(self.kind, self.level)
        if one is not None and one not in subset:
            return 0.0
        return objective_value(subset, self.kind, self.level, slo_ok)

    def depends_on(self, levels: Iterable[int]) -> tuple[int, ...]:
        """The levels that move the objective."""
        levels = tuple(sorted(levels))
        if (one := stats.read_level(self.kind, self.level)) is not None:
            return (one,)
        return levels


@dataclass(frozen=True)
class Launch:
    config: Flags
    ok: bool = True
    reason: str = ""  # why it failed to start (one line), when not ok


@dataclass(frozen=True)
class Measurement:
    config: Flags
    launch: int  # index of the launch whose server was measured
    per_level: dict[int, float]
    label: str = ""
    slo_ok: dict[int, bool] | None = None
    ids: tuple[str, ...] = ()  # the benchmark results it was read from

    @property
    def purpose(self) -> Purpose | None:
        """The purpose its label's first word names (None: a label of no purpose)."""
        return purpose_of(self.label.split("-", 1)[0])


@dataclass(frozen=True)
class Duet:
    """A duet (tools/duet.py): `a`, on a server of its own beside the campaign's, against `b`;
    each round's throughput per level on each (a, b); `looks`: its most rounds, the looks its
    interval is valid over."""

    a: Flags
    b: Flags
    rounds: tuple[tuple[dict[int, float], dict[int, float]], ...]
    looks: int


@dataclass
class Side:
    """The server beside the campaign's, for a duet: the launch it serves (one of `launches`,
    not the campaign's running server), and why a duet could not be made (then none is tried
    again), with the launches that failed to start (each counts in the budget)."""

    launch: int | None = None
    failed: str = ""
    failed_launches: int = 0


@dataclass
class History:
    space: SearchSpace
    launches: list[Launch] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    running: int | None = None  # the launch whose server is up now
    broken: dict[int, str] = field(default_factory=dict)  # launch -> why its benchmarks failed
    in_flight: list[Experiment] = field(default_factory=list)  # started, no outcome yet, in order
    duets: list[Duet] = field(default_factory=list)
    side: Side = field(default_factory=Side)
    # per configuration (its key), the floor of each level its results carry, the latest:
    # (tok/s, bound) as tools/domain/physics.py computed it; none where no box was described
    floors: dict[str, dict[int, tuple[float, str]]] = field(default_factory=dict)

    # --- recording: the only writers ------------------------------------------------------------
    def launched(
        self, config: Flags, ok: bool = True, reason: str = "", serving: bool = False
    ) -> int:
        """A launch (failed to start when not `ok`, with its one-line `reason`); its index.
        `serving`: its server is the one up now (none is, when it failed)."""
        self.launches.append(Launch(config, ok=ok, reason=reason))
        index = len(self.launches) - 1
        if serving:
            self.running = index if ok else None
        return index

    def started(self, experiment: Experiment) -> None:
        """`experiment` is in flight: on one box its server (the launch just recorded) is up and
        measured next; on a fleet it is placed on a box. Until its outcome is told (`ended`)."""
        self.in_flight.append(experiment)

    def ended(self, experiment: Experiment) -> None:
        """`experiment` is no longer in flight: measured, broken, failed to start, or cancelled
        (the first equal one, in the order started; none when it was not in flight)."""
        if experiment in self.in_flight:
            self.in_flight.remove(experiment)

    def serving_nothing(self) -> None:
        """No server of this campaign is up (killed, died, or its launch was cut short)."""
        self.running = None

    def measured(
        self,
        config: Flags,
        launch: int,
        per_level: dict[int, float],
        label: str = "",
        slo_ok: dict[int, bool] | None = None,
        ids: tuple[str, ...] = (),
    ) -> None:
        """A benchmark of `launch`: a new measurement."""
        self.measurements.append(Measurement(config, launch, per_level, label, slo_ok, ids))

    def measured_more(
        self,
        index: int,
        per_level: dict[int, float],
        slo_ok: dict[int, bool] | None,
        ids: tuple[str, ...],
    ) -> None:
        """More levels of measurement `index`'s sweep (a sweep split into calls by groups of
        levels; state.sweeps.continued says which): its levels, SLO verdicts and result ids
        merged in."""
        last = self.measurements[index]
        both = dict(sorted({**last.per_level, **per_level}.items()))
        slo_both = {**(last.slo_ok or {}), **(slo_ok or {})} if slo_ok is not None else None
        self.measurements[index] = Measurement(
            last.config, last.launch, both, last.label, slo_both, (*last.ids, *ids)
        )

    def floored(
        self, config: Mapping[str, object], floors: Mapping[int, tuple[float, str]]
    ) -> None:
        """A benchmark of `config` carried these floors per level (the latest win)."""
        if floors:
            self.floors.setdefault(self.key(config), {}).update(floors)

    def broke(self, launch: int, reason: str) -> None:
        """`launch` started but its server could not be measured (the first reason is kept)."""
        self.broken.setdefault(launch, reason)

    def side_launched(self, config: Flags, ok: bool, reason: str = "") -> None:
        """The server beside the campaign's was launched with `config`: a launch that is not the
        one running; when it failed to start, no duet is tried again (a failed launch of the
        baseline is not recorded as one: the baseline itself is fine)."""
        if ok:
            self.launches.append(Launch(config))
            self.side.launch = len(self.launches) - 1
        else:
            self.side.failed_launches += 1
            self.side.failed = f"the server beside it did not start: {reason or 'no reason'}"

    def side_gone(self) -> None:
        self.side.launch = None

    def no_duet(self, reason: str) -> None:
        """A duet could not be measured (`reason`): the comparison falls back to launch pairs."""
        self.side.failed = reason

    def dueted(self, duet: Duet) -> None:
        """A duet measured (its rounds as tools/duet.py saved them)."""
        self.duets.append(duet)

    def copy(self) -> History:
        """A History to record hypothetical work into, leaving this one as it is; no server up
        and nothing in flight."""
        return History(
            self.space,
            list(self.launches),
            list(self.measurements),
            None,
            dict(self.broken),
            duets=list(self.duets),
            side=Side(None, self.side.failed, self.side.failed_launches),
            floors={k: dict(v) for k, v in self.floors.items()},
        )

    # --- identity -------------------------------------------------------------------------------
    def key(self, config: Mapping[str, object]) -> str:
        return self.space.key(config)

    def tried(self, config: Mapping[str, object]) -> bool:
        k = self.key(config)
        return any(self.key(launch.config) == k for launch in self.launches)

    def crashed(self) -> dict[str, tuple[Flags, str]]:
        """Configurations that failed to start, or whose server could not be measured (the
        baseline gets a second launch first: without it there is no campaign)."""
        out: dict[str, tuple[Flags, str]] = {}
        base = self.key(self.space.baseline)
        broken: dict[str, int] = {}
        for i, launch in enumerate(self.launches):
            key = self.key(launch.config)
            if not launch.ok:
                out.setdefault(key, (launch.config, launch.reason))
            elif i in self.broken and not self._measured_launch(i):
                broken[key] = broken.get(key, 0) + 1
                if key != base or broken[key] >= 2:
                    out.setdefault(key, (launch.config, self.broken[i]))
        return out

    def _measured_launch(self, index: int) -> bool:
        return any(m.launch == index for m in self.measurements)

    def running_key(self) -> str | None:
        if self.running is None:
            return None
        return self.key(self.launches[self.running].config)

    def running_fresh(self) -> bool:
        """The running server has not been measured yet."""
        return self.running is not None and not self._measured_launch(self.running)

    # --- estimates ------------------------------------------------------------------------------
    def of(self, config: Mapping[str, object]) -> list[Measurement]:
        k = self.key(config)
        return [m for m in self.measurements if self.key(m.config) == k]

    def configs(self) -> list[Flags]:
        """Every measured configuration, in the order first measured."""
        seen: dict[str, Flags] = {}
        for m in self.measurements:
            seen.setdefault(self.key(m.config), m.config)
        return list(seen.values())

    def estimate(self, config: Mapping[str, object]) -> dict[int, float]:
        """Mean throughput per level over every measurement of the configuration (a failed
        level counts as 0), as compare, recommend and the report average it."""
        return stats.mean_sweep(m.per_level for m in self.of(config))

    def slo_ok(self, config: Mapping[str, object]) -> dict[int, bool] | None:
        """A level meets the SLO when every measurement of it did."""
        out: dict[int, bool] = {}
        for m in self.of(config):
            if m.slo_ok is None:
                return None
            for level, ok in m.slo_ok.items():
                out[level] = out.get(level, True) and ok
        return out

    def swept(self, config: Mapping[str, object], levels: Iterable[int]) -> bool:
        need = set(levels)
        return any(need <= set(m.per_level) for m in self.of(config))

    def sweeps(self, config: Mapping[str, object], levels: Iterable[int]) -> list[Measurement]:
        need = set(levels)
        return [m for m in self.of(config) if need <= set(m.per_level)]

    def launches_used(self) -> int:
        """The campaign's launches, and those of the server beside it for a duet."""
        return len(self.launches) + self.side.failed_launches

    def duet_of(self, a: Mapping[str, object], b: Mapping[str, object]) -> Duet | None:
        """The latest duet of `b` against `a` with a round measured (None: none)."""
        ka, kb = self.key(a), self.key(b)
        found = [d for d in self.duets if (self.key(d.a), self.key(d.b)) == (ka, kb) and d.rounds]
        return found[-1] if found else None

    def repeats(self, levels: Iterable[int]) -> list[list[dict[int, float]]]:
        """The full sweeps (over all of `levels`) of each configuration swept more than once, in
        the order measured: what tools.domain.stats reads the noise floor from. Full sweeps are
        measured the same way (same levels, same requests each); a screen, with fewer requests
        per level, is biased against them - tools.bench.results.repeats pairs like with like too.
        """
        levels = tuple(levels)
        each = ([m.per_level for m in self.sweeps(c, levels)] for c in self.configs())
        return [sweeps for sweeps in each if len(sweeps) >= 2]
