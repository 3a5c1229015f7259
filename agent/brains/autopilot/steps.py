"""What the planner proposes: an experiment (launch and/or measure a configuration) or the
conclusion; and its settings."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from agent.brains.autopilot.history import Objective, Purpose
from tools.domain import stats
from tools.domain.space import Flags


@dataclass(frozen=True)
class Settings:
    levels: tuple[int, ...]
    objective: Objective = field(default_factory=Objective)
    screen_levels: tuple[int, ...] = ()  # () = lowest, middle and highest level
    max_launches: int = 40
    excluded: tuple[str, ...] = ()  # flags held at their baseline value ("skip speculation")
    wrap_up: bool = False  # no new candidates: validate and conclude
    challenger: bool = True  # tune a per-level challenger for a concurrency policy
    target_noise: float = 0.02  # the objective's precision to reach before deciding

    def screens(self) -> tuple[int, ...]:
        if self.objective.kind == "level" and self.objective.level in self.levels:
            return (self.objective.level,)
        return self.screen_levels or spread(self.levels)


# the purposes' groups, as the fleet's batch planner (batch.py) orders them
FIRST: tuple[Purpose, ...] = ("baseline", "noise")  # everything after them reads the noise floor
# the leader may change with each one; a pair's two launches are one after the other, alone
SERIAL: tuple[Purpose, ...] = ("validate", "pair")
# a few levels, from the best
PARTIAL: tuple[Purpose, ...] = ("screen", "challenger", "surrogate", "bundle")
MOVES_BEST: tuple[Purpose, ...] = ("confirm", "repeat")  # a full sweep that may move the best


@dataclass(frozen=True)
class Experiment:
    config: Flags
    levels: tuple[int, ...]
    purpose: Purpose
    why: str
    fresh: bool = False  # on a launch not measured yet, even if this config is running
    base: Flags | None = None  # what it is compared against

    @property
    def full(self) -> bool:
        return self.purpose not in PARTIAL


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


Step = Experiment | Finish


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
