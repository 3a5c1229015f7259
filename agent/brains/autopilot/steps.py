"""What the planner proposes: an experiment (launch and/or measure a configuration) or the
conclusion; and its settings."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from agent.brains.autopilot.history import Objective
from agent.brains.autopilot.purposes import Purpose, of_group
from tools.domain import stats
from tools.domain.engines import Parallelism
from tools.domain.space import Flags


@dataclass(frozen=True)
class Settings:
    levels: tuple[int, ...]
    objective: Objective = field(default_factory=Objective)
    screen_levels: tuple[int, ...] = ()  # () = lowest, middle and highest level
    max_launches: int = 40
    excluded: tuple[str, ...] = ()  # flags held at their baseline value ("skip speculation")
    # the space's flags of speculation (tools.servers.speculation.speculative_flags): the one
    # lever past the floor, which the stop signal against physics leaves open (physics_stop.py)
    speculative: tuple[str, ...] = ()
    wrap_up: bool = False  # no new candidates: validate and conclude
    # launches the minutes left can still pay for (a wrap-up on the minutes budget: brain.py's
    # launches_that_fit); None: only max_launches counts
    launches_fit: int | None = None
    challenger: bool = True  # tune a per-level challenger for a concurrency policy
    target_noise: float = 0.02  # the objective's precision to reach before deciding
    requests_per_level: int | None = None  # [bench] requests_per_level; None: the wave rule
    min_level_s: float | None = None  # the least a level lasts (Engine.level_minimum); None: none
    max_tokens: int = 512  # [bench] max_tokens: a request's output, to time a level in seconds
    # [server] side_by_side: the host runs two servers at once, so the winner is proven in a duet
    # with the baseline beside it (conclude.duet) rather than in launch pairs
    side_by_side: bool = False
    # a fleet of two boxes or more: the winner is proven in crossovers (conclude.cross: it and
    # the baseline at once on two boxes, then swapped), beside other work, not in launch pairs
    crossover: bool = False
    # the run engine's [parallelism] (its profile's spellings of the GPU count, a user's profile
    # file's too), for "fewer GPUs at the same value"; None: every built-in profile's spellings
    parallelism: Parallelism | None = None

    def one_level(self) -> int | None:
        """The level the objective reads alone (kind 'level', an SLO at one level), or None: it
        reads several."""
        level = stats.read_level(self.objective.kind, self.objective.level)
        return level if level in self.levels else None

    def screens(self) -> tuple[int, ...]:
        if (level := self.one_level()) is not None:
            return (level,)
        return self.screen_levels or spread(self.levels)


# the purposes' groups, as the fleet's batch planner (batch.py) orders them (purposes.KINDS)
FIRST = of_group("first")  # everything after them reads the noise floor
SERIAL = of_group("serial")  # the leader may change with each one; a pair's launches alone
PARTIAL = of_group("partial")  # a few levels, from the best
MOVES_BEST = of_group("moves_best")  # a full sweep that may move the best
CROSS = of_group("cross")  # a crossover's halves: two boxes at once, beside others


@dataclass(frozen=True)
class Experiment:
    config: Flags
    levels: tuple[int, ...]
    purpose: Purpose
    why: str
    fresh: bool = False  # on a launch not measured yet, even if this config is running
    base: Flags | None = None  # what it is compared against
    # a full sweep's measurement of the objective's level alone (precision where it reads):
    # that level runs the requests it runs in a full sweep
    at_level: bool = False
    period: int = 0  # a crossover's period (its two halves share it); 0: not a crossover

    @property
    def full(self) -> bool:
        return self.purpose not in PARTIAL

    @property
    def label(self) -> str:
        """Its measurement's label: the purpose, with a crossover's period (`cross-P03`)."""
        return f"cross-P{self.period:02d}" if self.period else self.purpose


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
    paired: stats.Paired | None = None  # the winner against the baseline in launch pairs
    established: bool = True  # False: the decision deploys the baseline, `best` is not proven


Step = Experiment | Finish

# requests per level: waves x the group's top level, at least a floor (low levels are cheap, and
# a few waves there keep their noise down)
WAVES_SWEEP, WAVES_SCREEN = 2, 1
FLOOR_SWEEP, FLOOR_SCREEN = 30, 10


def groups(
    levels: tuple[int, ...], waves: int, floor: int, fixed: int | None
) -> list[tuple[tuple[int, ...], int | None]]:
    """Levels grouped so that one request count suits each group (each level runs at least
    `waves` waves of its group's top level). A configured requests_per_level is used as given."""
    if fixed is not None:
        return [(levels, fixed)]
    out: list[list[int]] = []
    for c in sorted(levels):
        if out and c <= 4 * out[-1][0]:
            out[-1].append(c)
        else:
            out.append([c])
    return [(tuple(g), max(waves * g[-1], floor)) for g in out]


def sweep_requests(levels: tuple[int, ...], fixed: int | None) -> dict[int, int]:
    """Each level's request count in a full sweep over `levels`."""
    out: dict[int, int] = {}
    for group, requests in groups(levels, WAVES_SWEEP, FLOOR_SWEEP, fixed):
        for c in group:
            out[c] = requests if requests is not None else FLOOR_SWEEP
    return out


def request_groups(
    step: Experiment, levels: tuple[int, ...], fixed: int | None
) -> list[tuple[tuple[int, ...], int | None]]:
    """How a step's levels are benchmarked: (levels, requests per level) per call. A
    measurement at the objective's level runs what that level runs in a full sweep over
    `levels` (so its samples are like the sweeps' own)."""
    if step.at_level:
        each = sweep_requests(levels, fixed)
        return [((c,), fixed if fixed is not None else each[c]) for c in step.levels]
    waves, floor = (WAVES_SWEEP, FLOOR_SWEEP) if step.full else (WAVES_SCREEN, FLOOR_SCREEN)
    return groups(step.levels, waves, floor, fixed)


def spread(levels: tuple[int, ...]) -> tuple[int, ...]:
    """Lowest, highest and the level nearest their geometric middle."""
    ordered = sorted(levels)
    if len(ordered) <= 3:
        return tuple(ordered)
    lo, hi = ordered[0], ordered[-1]
    middle = math.sqrt(max(lo, 1) * hi)
    mid = min(ordered[1:-1], key=lambda c: abs(math.log(c / middle)))
    return (lo, mid, hi)


def levels_text(levels: list[int] | tuple[int, ...]) -> str:
    return ",".join(str(c) for c in levels)


def show_value(value: object) -> str:
    return "off" if value is False else "on" if value is True else str(value)
