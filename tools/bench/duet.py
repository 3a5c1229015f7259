"""A duet: two servers up at once, measured at each level in short blocks alternated between them,
so a swing of the box - another tenant, a CPU hog, thermals - hits both alike (duet benchmarking,
Bulej et al., ICPE 2020; randomized multiple interleaved trials, Abedi and Brecht, ICPE 2017:
shared/reference/measuring.md). Launch pairs measure the two minutes apart; a duet's blocks are
seconds apart.

A round is every level once for each server, which one goes first drawn at random at each level
(a server that always went first would always take the same half of a drift). Its ratio is the
objective of B's blocks over A's (`value`: the geometric mean over the levels unless told), and
the rounds are the pairs of stats.Paired: an interval on their log ratios with their real
degrees of freedom (each level's block, where the objective is the geometric mean and the rounds
show no effect of their own: stats.Paired.blocks), anytime-valid over `max_rounds` looks, read
after every round from the second - so the duet stops as soon as it decides (B wins: every
gain under stats.MIN_GAIN excluded; or no gain worth deploying) and never peeks its way into a
false claim.

Each block is one level of tools/bench/sweep.py - the same client, deadlines, counts and prompt
rules. Each server keeps its own sweep state, so its blocks draw fresh prompts round after round
(no prefix cache answers a repeat), and both draw the same prompts in the same round.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tools.bench.schema import Point
from tools.bench.sweep import (
    Observer,
    SweepOutcome,
    SweepSpec,
    SweepState,
    close_sweep,
    start_sweep,
    sweep_level,
)
from tools.domain import stats
from tools.domain.decision import PairedOutcome, decide_paired

Side = Literal["a", "b"]
Stopped = Literal["decided", "rounds", "failed", "interrupted", "budget"]
# a round is started only where the time left holds the longest round so far this much over, and
# this many seconds beside for what follows the duet (its results saved, a recommendation)
ROUND_MARGIN = 1.25
AFTER_S = 20.0


def geomean_value(per_level: Mapping[int, float]) -> float:
    return stats.geomean(per_level.values())


@dataclass(frozen=True)
class DuetRound:
    """One round: each server's output tok/s per level (0.0: the block failed), which server went
    first at each level, B's objective over A's (0.0 where A's is 0 too: no comparison), and
    each side's points as the sweep records them (a result file's `points`)."""

    a: dict[int, float]
    b: dict[int, float]
    first: dict[int, Side]
    ratio: float
    rows: dict[Side, list[dict[str, Any]]] = field(default_factory=dict)


@dataclass
class DuetOutcome:
    """Both servers' points (every block, in measured order) and the rounds; `max_rounds` is the
    design's looks, which the interval is valid over; `by_level`: a round's ratio is the
    geometric mean of its levels' (the default objective), so its level blocks are its evidence."""

    a: SweepOutcome
    b: SweepOutcome
    max_rounds: int
    by_level: bool = True
    rounds: list[DuetRound] = field(default_factory=list)
    stopped: Stopped = "rounds"

    @property
    def verdict(self) -> PairedOutcome:
        """`win`, `no gain` (a gain of MIN_GAIN or more excluded) or `not established`."""
        return decide_paired(self.paired)

    @property
    def paired(self) -> stats.Paired:
        return paired_of(self.rounds, self.max_rounds, self.by_level)


def round_of(
    a: dict[int, float],
    b: dict[int, float],
    value: Callable[[Mapping[int, float]], float],
    first: dict[int, Side] | None = None,
    rows: dict[Side, list[dict[str, Any]]] | None = None,
) -> DuetRound:
    """A round from each side's figures per level: B's objective (`value`) over A's."""
    va, vb = value(a), value(b)
    return DuetRound(a, b, first or {}, vb / va if va > 0 else 0.0, rows or {})


def paired_of(
    rounds: Sequence[DuetRound],
    looks: int,
    by_level: bool = True,
    levels: Sequence[int] | None = None,
) -> stats.Paired:
    """B against A from a duet's rounds, valid over `looks` - the duet's own reading, and the
    autopilot's of a duet it recorded; `by_level`: each round's ratio is the geometric mean of
    its levels' (`levels`, else the round's own), whose blocks are then its evidence
    (stats.Paired.blocks)."""
    blocks = tuple(stats.level_blocks(r.a, r.b, r.a if levels is None else levels) for r in rounds)
    return stats.Paired(
        tuple(r.ratio for r in rounds),
        looks=looks,
        unit="duet round",
        blocks=blocks if by_level else (),
    )


def settled(p: stats.Paired) -> bool:
    """The rule a duet stops on after a round: from the second, decided either way."""
    return p.n >= 2 and decide_paired(p) != "not established"


def _throughput(point: Point) -> float:
    return 0.0 if point.level_failed else point.output_throughput


async def run_duet(
    a: SweepSpec,
    b: SweepSpec,
    max_rounds: int = stats.MAX_PAIRS,
    seed: int = 0,
    value: Callable[[Mapping[int, float]], float] | None = None,
    observer: Observer | None = None,
    seconds_left: Callable[[], float | None] | None = None,
    on_round: Callable[[DuetOutcome], None] | None = None,
) -> DuetOutcome:
    """Rounds until the interval decides or `max_rounds` are measured; a round in which either
    server failed a level ends the duet (`failed`: a configuration that fails is no winner), and
    Ctrl-C ends it with the rounds finished (`interrupted`). `seconds_left`: the run's minutes
    budget, in seconds (None: no budget) - a round it would not end in is not started
    (`budget`), so the duet ends with what it measured and the run can still conclude, where a
    round cut by the budget ends the run unconcluded. `on_round`: called with the outcome as
    each round ends (its last round the new one), so a caller saves it then. `a.levels` are the
    levels (b's are not read). `value`: a round's objective from one side's per-level figures
    (None: their geometric mean). Both servers are checked before the first block, so a wrong
    URL is one error."""
    if max_rounds < 2:
        raise ValueError("a duet needs two rounds at least: one round gives no interval")
    obs = observer or Observer()
    states: dict[Side, SweepState] = {}
    try:
        states["a"] = await start_sweep(a, obs)
        states["b"] = await start_sweep(b, obs)
        outcome = DuetOutcome(
            states["a"].outcome, states["b"].outcome, max_rounds, by_level=value is None
        )
        order = random.Random(f"duet/{seed}")
        longest = 0.0
        try:
            for _ in range(max_rounds):
                left = seconds_left() if seconds_left is not None else None
                if left is not None and outcome.rounds and left < longest * ROUND_MARGIN + AFTER_S:
                    outcome.stopped = "budget"
                    break
                began = time.monotonic()
                done = await _round(states, a.levels, order, value or geomean_value)
                longest = max(longest, time.monotonic() - began)
                outcome.rounds.append(done)
                if on_round is not None:
                    on_round(outcome)
                p = outcome.paired
                if done.ratio <= 0 or min(done.a.values(), default=0.0) <= 0:
                    outcome.stopped = "failed"
                    break
                if settled(p):
                    outcome.stopped = "decided"
                    break
        except asyncio.CancelledError:
            outcome.stopped = "interrupted"
        return outcome
    finally:
        for state in states.values():
            await close_sweep(state)


async def _round(
    states: Mapping[Side, SweepState],
    levels: list[int],
    order: random.Random,
    value: Callable[[Mapping[int, float]], float],
) -> DuetRound:
    got: dict[Side, dict[int, float]] = {"a": {}, "b": {}}
    rows: dict[Side, list[dict[str, Any]]] = {"a": [], "b": []}
    first: dict[int, Side] = {}
    for level in levels:
        sides: tuple[Side, Side] = ("a", "b") if order.random() < 0.5 else ("b", "a")
        first[level] = sides[0]
        for side in sides:
            state = states[side]
            point = await sweep_level(state, level, state.outcome.processes)
            got[side][level] = _throughput(point)
            rows[side].append(state.outcome.points[-1])  # the row the level just recorded
    return round_of(got["a"], got["b"], value, first, rows)


def decision_text(outcome: DuetOutcome) -> str:
    """What the rounds decide, in the words every view of a duet uses."""
    p = outcome.paired
    if outcome.stopped == "failed":
        return "not comparable: a block failed (a configuration that fails is no winner)"
    if outcome.verdict == "win":
        return f"B wins: {p.stated()}"
    if outcome.verdict == "no gain":
        return f"no gain worth deploying ({stats.MIN_GAIN:.0%} or more excluded): {p.stated()}"
    why = p.unestablished()
    if outcome.stopped == "budget":
        why = f"the minutes budget held no more rounds; {why}"
    return f"not established: {p.stated()} ({why})"


def round_lines(outcome: DuetOutcome) -> list[str]:
    """A line per round: the objective's ratio, then B over A at each level."""
    lines = []
    for k, r in enumerate(outcome.rounds, 1):
        levels = "  ".join(
            f"C={c} {r.b[c] / r.a[c]:.3f}x" if r.a[c] > 0 else f"C={c} failed" for c in r.a
        )
        lines.append(f"round {k:2d}: {r.ratio:.3f}x   {levels}")
    return lines
