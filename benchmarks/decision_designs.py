"""How to decide whether B beats A on a drifting box: the measurement designs side by side, offline
(issue 46). A model of the box, no servers; seconds. Run by hand:

    .venv/bin/python benchmarks/decision_designs.py [--seeds 400] [--noise 0.03]
        [--launch-noise 0.01] [--launch-s 40] [--sweep-s 30]

The box: each measurement's objective is the configuration's true value x the box's speed at
that moment x a launch effect (log-normal, `--launch-noise`, drawn once per launch: fresh
launches of one configuration differ) x a measurement noise (log-normal, `--noise`). The box's
speed follows one of five drifts over a run of about 20 minutes: none; a ramp to 0.7; a step to
0.6 at a random time; a periodic swing of +-20 % (period 7 minutes); a fresh-machine warm-up
from 0.7 to 1.0 over the first 5 minutes. Each comparison starts at a random moment of it.

The designs:
- `pairs, before 46`: ABBA launch pairs (a launch and a sweep each), at least 2, then more while
  they may decide, up to 12; the rule before issue 46 - a pair's sigma never below the A/A floor
  / 2, the fixed-n t interval (read after every pair), a win when its low end clears 1 + floor.
  The floor is what the campaign reads from two sweeps of one launch: 2 x sqrt(2) x `--noise`.
- `pairs`: the same launches, tools.domain.stats.Paired as it is now: the measured spread, an
  interval valid at every look, a win when its low end clears 1 + MIN_GAIN.
- `duet`: both configurations launched once and up together; rounds of one block of each at a
  time a few seconds apart (a round costs two sweeps' time, no launch), the order drawn at random
  each round (tools/bench/duet.py); stats.Paired over the rounds' ratios alone, up to 12.
- `duet, by level`: the same duet as tools/bench/duet.py reads it now: a round is LEVELS blocks
  of each (one per level, the order drawn at random at each level, the levels' gains differing
  around the effect), each block with the measurement noise x sqrt(LEVELS) - so a round's
  geometric mean is as noisy as one `duet` block - and stats.Paired reads every block
  (Paired.blocks: LEVELS degrees of freedom a round where the rounds show no effect of their own).
A design stops as soon as its rule decides (a win, or no gain worth deploying / no count that
would do), else at its maximum.

Printed per design, drift and true effect (1.00: A/A; 1.05: a known 5 % gain; 1.30): the launches
and minutes a decision took (means), the share of comparisons claimed a win, and the share whose
stated 95 % interval held the true ratio. The aims (issue 46): at most 5 % false claims (A/A), at
most half of today's launches per decision, the interval holding the truth 93 % of the time.
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from tools.domain import stats

RUN_S = 20 * 60.0
DRIFTS: dict[str, Callable[[float, float], float]] = {
    "none": lambda t, step_at: 1.0,
    "ramp": lambda t, step_at: 1.0 - 0.3 * min(1.0, t / RUN_S),
    "step": lambda t, step_at: 1.0 if t < step_at else 0.6,
    "periodic": lambda t, step_at: 1.0 + 0.2 * math.sin(2 * math.pi * t / 420.0),
    "warm-up": lambda t, step_at: 0.7 + 0.3 * min(1.0, t / 300.0),
}
EFFECTS = (1.0, 1.05, 1.3)


@dataclass
class Box:
    drift: Callable[[float, float], float]
    step_at: float
    noise: float
    launch_noise: float
    rng: random.Random

    def launch(self) -> float:
        return math.exp(self.rng.gauss(0.0, self.launch_noise))

    def measure(self, true_value: float, launch: float, t: float, scale: float = 1.0) -> float:
        noise = math.exp(self.rng.gauss(0.0, self.noise * scale))
        return true_value * self.drift(t, self.step_at) * launch * noise


@dataclass
class Decision:
    launches: int
    seconds: float
    win: bool
    interval: tuple[float, float] | None


def old_rule(ratios: list[float], floor: float) -> tuple[bool, bool, tuple[float, float] | None]:
    """(win, decided, interval) by the rule before issue 46 (stats.Paired at 26414df)."""
    n = len(ratios)
    if n < 2:
        return False, False, None
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / n
    s = max(math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1)), floor / 2)
    t95 = float(stats.student_t.ppf(0.975, n - 1))
    interval = (math.exp(mean - t95 * s / math.sqrt(n)), math.exp(mean + t95 * s / math.sqrt(n)))
    win = interval[0] > 1 + floor
    if win or math.exp(mean) <= 1 + floor:
        return win, True, interval
    for more in range(n + 1, stats.MAX_PAIRS + 1):  # would more pairs of this spread decide?
        t_more = float(stats.student_t.ppf(0.975, more - 1))
        if math.exp(mean - t_more * s / math.sqrt(more)) > 1 + floor:
            return False, False, interval
    return False, True, interval


def new_rule(
    ratios: list[float],
    looks: int,
    give_up: bool,
    blocks: tuple[tuple[float, ...], ...] = (),
) -> tuple[bool, bool, tuple[float, float] | None]:
    """(win, decided, interval) by stats.Paired; `give_up`: also stop where no count up to
    `looks` is projected to decide (the autopilot's launch pairs, whose launches are dear; a
    duet's rounds are cheap, and it goes on to its last round, as tools/bench/duet.py does)."""
    p = stats.Paired(tuple(ratios), looks=looks, blocks=blocks)
    decided = p.wins or p.no_gain or (give_up and p.pairs_needed() is None)
    return p.wins, decided, p.interval()


def launch_pairs(
    box: Box, effect: float, t0: float, sweep_s: float, launch_s: float, old: bool
) -> Decision:
    floor = 2 * math.sqrt(2) * box.noise
    ratios: list[float] = []
    t = t0
    interval: tuple[float, float] | None = None
    win = False
    while len(ratios) < stats.MAX_PAIRS:
        order = ("a", "b") if len(ratios) % 2 == 0 else ("b", "a")  # ABBA
        got = {}
        for side in order:
            t += launch_s
            got[side] = box.measure(effect if side == "b" else 1.0, box.launch(), t)
            t += sweep_s
        ratios.append(got["b"] / got["a"])
        if len(ratios) >= 2:
            win, decided, interval = (
                old_rule(ratios, floor) if old else new_rule(ratios, stats.MAX_PAIRS, True)
            )
            if decided:
                break
    return Decision(2 * len(ratios), t - t0, win, interval)


LEVELS = 4  # a duet round's levels (the labs sweep 4)


def duet(
    box: Box, effect: float, t0: float, sweep_s: float, launch_s: float, by_level: bool
) -> Decision:
    launch_a, launch_b = box.launch(), box.launch()
    t = t0 + launch_s  # both start at once (side by side)
    gains = [box.rng.gauss(0.0, 0.05) for _ in range(LEVELS)]  # the levels gain differently
    gains = [g - sum(gains) / LEVELS for g in gains]
    ratios: list[float] = []
    rows: list[tuple[float, ...]] = []
    interval: tuple[float, float] | None = None
    win = False
    while len(ratios) < stats.MAX_PAIRS:
        if by_level:
            block_s = sweep_s / LEVELS  # a block of each at every level: two sweeps' time
            row = []
            for k, gain in enumerate(gains):
                first_b = box.rng.random() < 0.5
                ta = t + (2 * k + first_b) * block_s
                tb = t + (2 * k + (not first_b)) * block_s
                a = box.measure(1.0, launch_a, ta, math.sqrt(LEVELS))
                b = box.measure(effect * math.exp(gain), launch_b, tb, math.sqrt(LEVELS))
                row.append(b / a)
            rows.append(tuple(row))
            ratios.append(stats.geomean(row))
        else:
            first_b = box.rng.random() < 0.5
            half = sweep_s / 2  # a block of each at every level: a round costs two sweeps' time
            ta, tb = (t + half, t) if first_b else (t, t + half)
            a = box.measure(1.0, launch_a, ta)
            b = box.measure(effect, launch_b, tb)
            ratios.append(b / a)
        t += 2 * sweep_s
        if len(ratios) >= 2:
            win, decided, interval = new_rule(ratios, stats.MAX_PAIRS, False, tuple(rows))
            if decided:
                break
    return Decision(2, t - t0, win, interval)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=400)
    ap.add_argument("--noise", type=float, default=0.03, help="one measurement's sigma (log)")
    ap.add_argument("--launch-noise", type=float, default=0.01, help="one launch's sigma (log)")
    ap.add_argument("--launch-s", type=float, default=40.0)
    ap.add_argument("--sweep-s", type=float, default=30.0)
    args = ap.parse_args()
    designs: dict[str, Callable[[Box, float, float], Decision]] = {
        "pairs, before 46": lambda b, e, t: launch_pairs(
            b, e, t, args.sweep_s, args.launch_s, True
        ),
        "pairs": lambda b, e, t: launch_pairs(b, e, t, args.sweep_s, args.launch_s, False),
        "duet": lambda b, e, t: duet(b, e, t, args.sweep_s, args.launch_s, False),
        "duet, by level": lambda b, e, t: duet(b, e, t, args.sweep_s, args.launch_s, True),
    }
    print(
        f"noise {args.noise:.0%} a measurement, {args.launch_noise:.0%} a launch; a launch "
        f"{args.launch_s:g} s, a sweep {args.sweep_s:g} s; {args.seeds} comparisons a row"
    )
    head = ("design", "drift", "effect", "launches", "minutes", "claimed", "held")
    print("{:<17} {:<9} {:>6} {:>8} {:>7} {:>7} {:>5}".format(*head))
    for name, design in designs.items():
        for drift_name, drift in DRIFTS.items():
            for effect in EFFECTS:
                rng = random.Random(f"{drift_name}/{effect}/{args.seeds}")
                found = []
                for _ in range(args.seeds):
                    box = Box(drift, rng.uniform(0, RUN_S), args.noise, args.launch_noise, rng)
                    found.append(design(box, effect, rng.uniform(0, RUN_S * 0.6)))
                n = len(found)
                held = sum(
                    1 for d in found if d.interval and d.interval[0] <= effect <= d.interval[1]
                )
                print(
                    f"{name:<17} {drift_name:<9} {effect:>6.2f} "
                    f"{sum(d.launches for d in found) / n:>8.1f} "
                    f"{sum(d.seconds for d in found) / n / 60:>7.1f} "
                    f"{sum(d.win for d in found) / n:>7.1%} {held / n:>5.0%}"
                )


if __name__ == "__main__":
    main()
