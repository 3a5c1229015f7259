"""Campaign statistics: one formula for each figure a run prints. compare, recommend, the report,
the watch view and the autopilot all call these, so the parts of one run cannot disagree.

Throughputs come as `{level: output tok/s}` for one sweep of one configuration. A level that
failed is 0.0 (served nothing); a level that was not measured is absent.

The noise floor. The only evidence of noise a campaign has is a configuration swept more than
once (the baseline's A/A pair first). Two sweeps a and b of one configuration differ at a level
by d = |a - b| / mean(a, b). Comparing a candidate's single sweep to the baseline's is the same
kind of difference, so a difference is likely real only when it is larger than the differences
between sweeps of the same thing: the floor is twice the root mean square of d (about the 95 %
bound if the differences are normal). The largest spread ((max - min) / mean, used before) grows
with the number of repeats and says nothing about how often such a gap happens; the RMS does not.
  - `level_floors`: per level, from the d's measured at that level - the "within noise" mark on
    one level of a comparison table.
  - `objective_floor`: the floor on the objective, the number every summary prints and every
    "beats the baseline" decision uses. The d's of all levels are pooled (two sweeps give only
    one d per level, too few to trust alone); for the geometric mean over n levels the
    independent level noises average down by sqrt(n). The other objectives read one level.
Both are never below NOISE_MIN: two sweeps never agree better than that, a smaller figure is luck.
Without any repeated configuration the floor is unknown (None), and is printed as such.

Drift. The baseline swept at different times is a drift series: the box under it may have
changed (another tenant, thermals, a load that lifted). `drift` finds the two sweeps of a series
that differ most on the objective (geometric mean over the levels both served, or the objective's
level) and states it as the faster over the slower; it is beyond the floor when the baseline
against itself would "beat" the baseline by the rule every candidate meets (`beats`). Then a
ratio between sweeps taken at different times measures the machine as much as the configuration:
only paired comparisons (measured alternately, close in time) should count.

Paired. A ratio between sweeps taken minutes apart measures the box too; a decision is read from
pairs instead: the baseline and the candidate measured so that a drift common to both cancels
(fresh launches one after the other, ABBA), each pair's objective ratio its own comparison.
`Paired` states the geometric mean of the pair ratios and a 95 % interval on their logs with its
real degrees of freedom (Student's t, n - 1), the spread as measured: the noise is counted once,
in the interval (the A/A floor is for reading one sweep against another, not added on top).
The interval is anytime-valid: ALPHA is spent evenly over the looks the design allows (a union
bound over MAX_PAIRS - 1 looks), so reading it after every pair and stopping as soon as it
decides keeps a false claim under 2.5 %. A duet's round is every level once for each side, so
its ratio is the mean of its level blocks' (the geometric-mean objective); where the rounds show
no effect of their own (an F test), the spread is read from every block, level by level, with
L degrees of freedom a round instead of one (`Paired.blocks`): the same interval, far fewer
rounds to a verdict. A crossover on a fleet (`crossover_ratio`) is a pair too: the candidate and
the baseline measured at the same time on two boxes, then on the boxes swapped, its ratio the
geometric mean of the two periods', so a box effect and a common drift cancel. A win is an
interval whose low end is above
1 + MIN_GAIN, the indifference zone declared beforehand (a smaller gain is not worth a change of
deployment: a product decision, not a noise figure); `no_gain` the other way, its top below it.
Otherwise it is not established, and `pairs_needed` says how many pairs the same mean and spread
would need (None: no number would).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

from scipy.stats import f as fisher_f
from scipy.stats import t as student_t

T = TypeVar("T")

NOISE_MIN = 0.005  # relative; a measured floor below this is luck

Sweep = Mapping[int, float]  # level -> output tok/s of one sweep; 0.0 = the level failed

# what a comparison concludes (Versus.verdict), and launch pairs (Paired.verdict)
Verdict = Literal[
    "win", "within noise", "noise floor unknown", "below the baseline", "not comparable"
]
PairedVerdict = Literal["win", "not established"]


def geomean(values: Iterable[float]) -> float:
    """The geometric mean; 0.0 when any value is 0 (a failed level fails the mean) or none."""
    vals = list(values)
    if not vals or min(vals) <= 0:
        return 0.0
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def mean_sweep(sweeps: Iterable[Sweep]) -> dict[int, float]:
    """A configuration's figure per level: the mean of its sweeps that measured the level, a
    failed level counting as 0.0 (a level that failed once is not one to rely on)."""
    values: dict[int, list[float]] = {}
    for sweep in sweeps:
        for c, v in sweep.items():
            values.setdefault(c, []).append(v)
    return {c: sum(v) / len(v) for c, v in sorted(values.items())}


def level_ratios(a: Sweep, b: Sweep) -> dict[int, float]:
    """a / b at each level both measured where b served something (a failed a: ratio 0.0)."""
    return {c: a[c] / b[c] for c in sorted(set(a) & set(b)) if b[c] > 0}


def geomean_ratio(a: Sweep, b: Sweep) -> float | None:
    """The geometric mean of `level_ratios`: 0.0 when a failed a level b served; None when the
    two share no level that b served. Equal to geomean(a) / geomean(b) over those levels."""
    ratios = level_ratios(a, b)
    if not ratios:
        return None
    return geomean(ratios.values())


def relative_difference(a: float, b: float) -> float:
    mean = (a + b) / 2
    return abs(a - b) / mean if mean > 0 else 0.0


def repeat_differences(repeats: Iterable[Sequence[Sweep]]) -> dict[int, list[float]]:
    """Per level, d of each pair of consecutive sweeps of one configuration (levels both served).
    `repeats`: for each configuration, its sweeps in the order they were measured."""
    out: dict[int, list[float]] = {}
    for sweeps in repeats:
        for a, b in itertools.pairwise(sweeps):
            for c in sorted(set(a) & set(b)):
                if a[c] > 0 and b[c] > 0:
                    out.setdefault(c, []).append(relative_difference(a[c], b[c]))
    return out


def _floor(diffs: Sequence[float], n_levels: int = 1) -> float:
    rms = math.sqrt(sum(d * d for d in diffs) / len(diffs))
    return max(2 * rms / math.sqrt(n_levels), NOISE_MIN)


def level_floors(repeats: Iterable[Sequence[Sweep]]) -> dict[int, float]:
    """Per level, the smallest relative difference that is likely real (see the module doc)."""
    return {c: _floor(d) for c, d in sorted(repeat_differences(repeats).items())}


def read_level(kind: str, level: int | None) -> int | None:
    """The one level an objective reads: kind 'level', or kind 'slo' given a level (the
    throughput there while that level meets the SLO); None: it reads several levels."""
    return level if kind in ("level", "slo") and level is not None else None


def objective_floor(
    repeats: Iterable[Sequence[Sweep]], levels: Iterable[int], kind: str = "geomean"
) -> float | None:
    """The noise floor of the objective over `levels` (see the module doc); None: not measured."""
    levels = sorted(set(levels))
    diffs_by_level = repeat_differences(repeats)
    diffs = [d for c in levels for d in diffs_by_level.get(c, [])]
    if not diffs:
        return None
    return _floor(diffs, len(levels) if kind == "geomean" else 1)


def floor_of_means(floor: float, n: int, m: int) -> float:
    """The floor of a comparison of a mean of n sweeps with a mean of m, from the floor of one
    sweep against one (the autopilot measures more until this reaches its target)."""
    return floor * math.sqrt((1 / max(1, n) + 1 / max(1, m)) / 2)


def within_noise(ratio: float, floor: float | None) -> bool:
    """A ratio to the baseline that the noise floor cannot tell from 1 (unknown floor: no)."""
    return floor is not None and abs(ratio - 1) <= floor


def beats(ratio: float | None, floor: float | None) -> bool:
    """A ratio to the baseline that is a win: above 1 by more than the noise floor. With the floor
    unknown nothing is a win yet - measure the baseline twice first."""
    return ratio is not None and floor is not None and ratio > 1 + floor


@dataclass(frozen=True)
class Versus:
    """A candidate against the baseline, as every summary states it: the geometric-mean ratio over
    the levels both measured (where the baseline served), and the objective's noise floor over
    the same levels."""

    ratio: float | None
    floor: float | None
    levels: tuple[int, ...]

    @property
    def wins(self) -> bool:
        return beats(self.ratio, self.floor)

    @property
    def verdict(self) -> Verdict:
        """win | within noise | noise floor unknown | below the baseline | not comparable."""
        if self.ratio is None:
            return "not comparable"
        if self.wins:
            return "win"
        if self.floor is None:
            return "noise floor unknown"
        return "within noise" if within_noise(self.ratio, self.floor) else "below the baseline"


def versus(
    candidate: Sweep,
    baseline: Sweep,
    repeats: Iterable[Sequence[Sweep]],
    kind: str = "geomean",
    level: int | None = None,
) -> Versus:
    """`candidate` and `baseline` are the configurations' figures per level (`mean_sweep`). The
    ratio is the one the objective reads (its level's for kind 'level', else the geometric mean);
    the floor pools every level both measured, as `objective_floor` says."""
    ratios = level_ratios(candidate, baseline)
    levels = sorted(ratios)
    floor = objective_floor(repeats, levels, kind)
    if (one := read_level(kind, level)) is not None:
        return Versus(ratios.get(one), floor, tuple(levels))
    return Versus(geomean_ratio(candidate, baseline), floor, tuple(levels))


@dataclass(frozen=True)
class Drift:
    """The two sweeps of one configuration's series (indexes, in the order measured) that differ
    most on the objective, and each one's value over the levels both served."""

    earlier: int
    later: int
    earlier_value: float
    later_value: float
    levels: tuple[int, ...]

    @property
    def change(self) -> float:
        """later / earlier - 1: how the box moved, signed (-0.3: 30 % slower later)."""
        return self.later_value / self.earlier_value - 1

    @property
    def size(self) -> float:
        """The faster over the slower, minus 1: what is compared with the floor."""
        values = (self.earlier_value, self.later_value)
        return max(values) / min(values) - 1

    def beyond(self, floor: float | None) -> bool:
        """More than the noise floor: the configuration against itself would be a win."""
        return beats(1 + self.size, floor)

    def explains(self, ratio: float | None, floor: float | None) -> bool:
        """A drift beyond the floor that could make `ratio` (the sweeps' means, unpaired) by
        itself: with the baseline's move taken from it, the ratio no longer beats the floor."""
        return (
            self.beyond(floor) and ratio is not None and not beats(ratio / (1 + self.size), floor)
        )


def drift(series: Sequence[Sweep], kind: str = "geomean", level: int | None = None) -> Drift | None:
    """The largest move of a configuration's sweeps (see the module doc); None: fewer than two
    sweeps with a level served by both."""
    found: Drift | None = None
    for i, j in itertools.combinations(range(len(series)), 2):
        a, b = series[i], series[j]
        levels = [c for c in sorted(set(a) & set(b)) if a[c] > 0 and b[c] > 0]
        if (one := read_level(kind, level)) is not None:
            levels = [c for c in levels if c == one]
        if not levels:
            continue
        d = Drift(i, j, geomean(a[c] for c in levels), geomean(b[c] for c in levels), tuple(levels))
        if found is None or d.size > found.size:
            found = d
    return found


# The paired decision's constants (docs/statistics.md, "Paired comparisons")
ALPHA = 0.05  # two-sided: the interval is 95 %, so a false win happens at most 2.5 % of the time
MIN_GAIN = 0.02  # the indifference zone: a smaller gain is not worth changing what is deployed
MAX_PAIRS = 12  # more pairs than this are not proposed: the box, not the count, is the problem
POOL_P = 0.25  # a pair effect this likely keeps a duet's level blocks from being pooled (Paired)


def sequential_t(df: int, looks: int) -> float:
    """The t multiplier of an interval that holds at every one of `looks` looks at once: ALPHA
    spent evenly over them (a union bound), each look's two-sided Student's t at ALPHA / looks.
    Valid whatever rule decides when to stop looking, so stopping as soon as the interval
    decides never peeks its way into a false claim."""
    return float(student_t.ppf(1 - ALPHA / (2 * max(1, looks)), df))


def paired_interval(
    log_ratio: float, spread: float, n: int, looks: int, per_pair: int = 1
) -> tuple[float, float]:
    """The anytime-valid 95 % interval of a paired ratio from `n` pairs whose log ratios have
    mean `log_ratio` and standard deviation `spread`, looked at up to `looks` times; the spread
    has `per_pair` degrees of freedom for each pair past the first (1: from the pairs' own
    ratios; a duet's level blocks give more, Paired.blocks)."""
    half = sequential_t(per_pair * (n - 1), looks) * spread / math.sqrt(n)
    return math.exp(log_ratio - half), math.exp(log_ratio + half)


def pairs_to_win(
    log_ratio: float, spread: float, at_least: int, most: int, per_pair: int = 1
) -> int | None:
    """The fewest pairs (from `at_least`, at most `most`) of that mean and spread whose interval
    excludes a gain under MIN_GAIN; None: no count would."""
    for n in range(max(at_least, 2), most + 1):
        if paired_interval(log_ratio, spread, n, most - 1, per_pair)[0] > 1 + MIN_GAIN:
            return n
    return None


def level_blocks(a: Sweep, b: Sweep, levels: Iterable[int]) -> tuple[float, ...]:
    """B over A at each of `levels` (0.0 where A failed it): a duet round's Paired.blocks."""
    return tuple(b[c] / a[c] if a[c] > 0 else 0.0 for c in levels)


def pairs_expected(ratio: float, floor: float | None, at_least: int) -> int:
    """The pairs a candidate whose sweeps gave `ratio` over the baseline is expected to take
    before a verdict: those a win would need if the pairs showed that ratio with a spread of the
    floor (a planning guess: a pair compares two fresh launches, and measured pairs of the lab
    spread about the floor). `at_least` when no count would decide it (a ratio within the
    floor, or the floor unknown): the comparison stops there."""
    if floor is None or ratio <= 1 + floor:
        return at_least
    return pairs_to_win(math.log(ratio), floor, at_least, MAX_PAIRS) or at_least


def launch_pairs(
    runs: Iterable[T], is_base: Callable[[T], bool]
) -> tuple[list[tuple[T, T]], T | None]:
    """The launch pairs among `runs` (the baseline's and one candidate's pair sweeps, in measured
    order): two in a row, one of each, in either order (ABBA), each as (baseline's, candidate's);
    and the sweep waiting for the other half of its pair (None: none is)."""
    pairs: list[tuple[T, T]] = []
    waiting: T | None = None
    for run in runs:
        base = is_base(run)
        if waiting is not None and is_base(waiting) != base:
            pairs.append((run, waiting) if base else (waiting, run))
            waiting = None
        else:
            waiting = run
    return pairs, waiting


def crossover_ratio(first: float, second: float) -> float:
    """One crossover's ratio, candidate over baseline, from its two periods (each the candidate's
    objective over the baseline's measured at the same time on two boxes, the boxes swapped in
    the second): their geometric mean. A box effect k enters one period as k and the other as
    1 / k, and a drift common to both boxes enters neither, so both cancel. 0.0: a period
    failed."""
    return geomean((first, second))


def crossovers(periods: Sequence[float]) -> tuple[float, ...]:
    """The crossovers' ratios from a candidate's periods in the order measured: the first and the
    second, the third and the fourth... (the second of each on the boxes swapped); a last period
    alone waits for its swap."""
    return tuple(crossover_ratio(periods[i], periods[i + 1]) for i in range(0, len(periods) - 1, 2))


def crossover_blocks(periods: Sequence[Sequence[float]]) -> tuple[tuple[float, ...], ...]:
    """`crossovers` level by level: each period's ratio at each level (level_blocks), each
    crossover's row its two periods' crossover_ratio at each level - the Paired.blocks whose
    geometric mean is the crossover's ratio (the geometric-mean objective)."""
    pairs = range(0, len(periods) - 1, 2)
    return tuple(tuple(map(crossover_ratio, periods[i], periods[i + 1])) for i in pairs)


@dataclass(frozen=True)
class Paired:
    """A candidate against the baseline from pairs measured so that a drift of the box hits both
    sides alike (see the module doc): each pair's objective ratio, candidate over baseline, in
    the order measured. `looks`: the most pairs the design takes - the interval holds at each
    of them, so it may be read after every pair."""

    ratios: tuple[float, ...]
    looks: int = field(default=MAX_PAIRS, kw_only=True)
    unit: str = field(default="launch pair", kw_only=True)  # what one ratio is, as views say
    # each pair's ratio at each level (the same levels each time), given where a pair's ratio is
    # their geometric mean and the levels' blocks are measured apart: a duet's rounds
    blocks: tuple[tuple[float, ...], ...] = field(default=(), kw_only=True)

    def __post_init__(self) -> None:
        if not self.blocks:
            return
        if len(self.blocks) != self.n or len({len(b) for b in self.blocks}) != 1:
            raise ValueError("Paired.blocks: one row per pair, the same levels in each")
        for ratio, row in zip(self.ratios, self.blocks, strict=True):
            if not math.isclose(ratio, geomean(row), rel_tol=1e-6, abs_tol=1e-12):
                raise ValueError(f"Paired.blocks: a pair's ratio {ratio} is not its blocks' mean")

    @property
    def n(self) -> int:
        return len(self.ratios)

    @property
    def ratio(self) -> float:
        """The paired ratio: the geometric mean of the pair ratios (0.0: a pair failed)."""
        return geomean(self.ratios)

    def _spread(self) -> tuple[float, int] | None:
        """The sigma of one pair's log ratio, as measured (never below NOISE_MIN / 2: two fresh
        launches never agree better than that, a smaller spread is luck), and its degrees of
        freedom per pair past the first: from the blocks where they may be pooled, else from
        the pairs' own ratios (1)."""
        if self.n < 2 or min(self.ratios) <= 0:
            return None
        logs = [math.log(r) for r in self.ratios]
        mean = sum(logs) / len(logs)
        s = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
        s, per_pair = self._pooled() or (s, 1)
        return max(s, NOISE_MIN / 2), per_pair

    def _pooled(self) -> tuple[float, int] | None:
        """The spread read from every level block, where the pairs show no effect of their own.

        A pair's log ratio is the mean of its L blocks' (one per level), so with blocks that
        vary independently its variance is the blocks' / L, estimated with L degrees of freedom
        per pair instead of one (levels differ in gain: each level's own mean is taken out). A
        pair effect shared by all its levels (a round in which B ran warm, a swing longer than
        a round) would make that too narrow, so the pair means are first tested against the
        residual (two-way analysis of variance, Fisher's F): pooled only where F is below its
        POOL_P tail - the sometimes-pool rule (Bancroft 1944), whose preliminary level of
        0.25 keeps the final interval near its nominal coverage. None: keep the pairs' spread."""
        width = len(self.blocks[0]) if self.blocks else 0
        if width < 2 or min(min(row) for row in self.blocks) <= 0:
            return None
        n = self.n
        logs = [[math.log(v) for v in row] for row in self.blocks]
        level_means = [sum(row[k] for row in logs) / n for k in range(width)]
        pair_means = [sum(row) / width for row in logs]
        grand = sum(pair_means) / n
        between = width * sum((m - grand) ** 2 for m in pair_means)
        rest = sum(
            (logs[i][k] - level_means[k] - pair_means[i] + grand) ** 2
            for i in range(n)
            for k in range(width)
        )
        df_between, df_rest = n - 1, (n - 1) * (width - 1)
        if rest <= 0:
            return None
        f_ratio = (between / df_between) / (rest / df_rest)
        if float(fisher_f.sf(f_ratio, df_between, df_rest)) < POOL_P:
            return None
        block_var = (between + rest) / (df_between + df_rest)
        return math.sqrt(block_var / width), width

    def interval(self, n: int | None = None) -> tuple[float, float] | None:
        """The 95 % interval of the paired ratio (with `n` pairs of the same mean and spread:
        what more pairs would give); None with fewer than two pairs or a failed one."""
        found = self._spread()
        if found is None:
            return None
        s, per_pair = found
        looks = max(1, self.looks - 1)  # read from the second pair on
        n = self.n if n is None else n
        return paired_interval(math.log(self.ratio), s, n, looks, per_pair)

    @property
    def wins(self) -> bool:
        """The interval excludes every gain under MIN_GAIN."""
        found = self.interval()
        return found is not None and found[0] > 1 + MIN_GAIN

    @property
    def no_gain(self) -> bool:
        """Decided the other way: the interval excludes every gain of MIN_GAIN or more."""
        found = self.interval()
        return found is not None and found[1] < 1 + MIN_GAIN

    @property
    def verdict(self) -> PairedVerdict:
        return "win" if self.wins else "not established"

    def pairs_needed(self) -> int | None:
        """How many pairs in all the same mean and spread would need to be a win (at most
        `looks`); None when no count would do (a gain under MIN_GAIN, or the pairs exclude it)."""
        if self.wins:
            return self.n
        found = self._spread()
        if found is None or self.no_gain or self.ratio <= 1 + MIN_GAIN:
            return None
        s, per_pair = found
        return pairs_to_win(math.log(self.ratio), s, self.n + 1, self.looks, per_pair)

    def evidence(self) -> str:
        """`95 % interval 1.180-1.249x over 3 launch pairs` (one pair: no interval)."""
        found = self.interval()
        pairs = f"{self.n} {self.unit}{'s' if self.n != 1 else ''}"
        if found is None:
            return f"{pairs}, no interval"
        return f"95 % interval {found[0]:.3f}-{found[1]:.3f}x over {pairs}"

    def stated(self) -> str:
        """How every view states it: `1.214x paired (95 % interval 1.180-1.249x over 3 launch
        pairs)`."""
        return f"{self.ratio:.3f}x paired ({self.evidence()})"

    def unestablished(self) -> str:
        """What it would take, for a claim that is not established."""
        if self.n < 2:
            return f"another {self.unit} at least (one gives no interval)"
        if self.no_gain:
            return (
                f"the {self.unit}s exclude a gain of {MIN_GAIN:.0%} or more: the gain is not there"
            )
        need = self.pairs_needed()
        if need is None:
            return (
                f"no number of {self.unit}s up to {self.looks} would establish a gain of "
                f"{MIN_GAIN:.0%} at this spread: a quieter box, or the gain is not there"
            )
        return f"{need - self.n} more {self.unit}s, or a quieter box"


class Slo(Protocol):
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None


def slo_met(point: Mapping[str, object], slo: Slo) -> bool:
    """One level of one sweep met the SLO: it did not fail, and each limit that is set has its
    metric measured and within the limit (a metric the result lacks is not met: no evidence)."""
    if point.get("level_failed"):
        return False
    for limit, key in ((slo.ttft_p99_ms, "p99_ttft_ms"), (slo.tpot_p99_ms, "p99_tpot_ms")):
        if limit is None:
            continue
        value = point.get(key)
        if not isinstance(value, int | float) or value > limit:
            return False
    return True


def limits_met(point: Mapping[str, object], limits_ms: Mapping[str, float]) -> bool:
    """The workload form of slo_met: {"ttft"|"tpot"|"e2el": p99 limit in ms} (a workload's
    `slo_ms`), each set metric's p99 measured and within its limit, the level not failed."""
    if point.get("level_failed"):
        return False
    for metric, limit in limits_ms.items():
        value = point.get(f"p99_{metric}_ms")
        if not isinstance(value, int | float) or value > limit:
            return False
    return True


def percent(floor: float | None) -> str:
    """How every view prints a noise floor."""
    return "unknown (no configuration measured twice)" if floor is None else f"{100 * floor:.1f} %"
