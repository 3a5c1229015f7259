"""The decision: whether a candidate beats the baseline, computed here and only here. The
autopilot's conclusion (agent/brains/autopilot/conclude.py, which the fleet controller concludes
through too), recommend (tools/recommend.py), compare (tools/bench/comparison.py), the report's
figures (agent/report/figures.py) and `agent watch` (agent/view/standing.py) each gather the facts
from their own side - the planner's history, the result files, the report's measured
configurations - and call `decide`; none decides again, so they cannot split (commits 059903d
and 9741dbe mended cases where two did). Each states the decision in its own words from the typed
`Decision`. Two parts of the rule are read alone: `decide_paired`, paired comparisons as they
come (the duet's stopping rule, the planner's "are more launch pairs needed"), and `at_level`,
one level's mark against its floor. tests/test_tree_rules.py checks that no other module reads
stats' rules (beats, within_noise, Versus.wins, Paired.wins ...) itself.

The rule, from the statistics (tools/domain/stats.py):
- the baseline itself: "baseline";
- otherwise the sweeps' means against the baseline's and the objective's noise floor
  (stats.Versus): "win", "within noise", "below the baseline", "noise floor unknown",
  "not comparable";
- comparisons measured so that a drift cancels (launch pairs, a duet's rounds: stats.Paired)
  decide when there are any: a win when they establish it, whatever the means (sweeps minutes
  apart on a drifting box measure the box too), and a win by the means is "not established"
  when they do not - the claim is never larger than they show;
- with none, a win by the means is "not established" when the baseline's own sweeps moved
  beyond the floor by as much as the gain (stats.Drift.explains): the means span the drift and
  nothing cancels it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tools.domain import stats

DecidedVerdict = stats.Verdict | stats.PairedVerdict | Literal["baseline"]
Withheld = Literal["pairs", "drift"]  # why a win by the means is not established
# paired comparisons alone, as a duet reads its rounds: decided either way, or not yet
PairedOutcome = Literal["win", "no gain", "not established"]
# one level's ratio against that level's noise floor: the mark a table puts on the level
LevelVerdict = Literal["win", "within noise", "below", "noise unknown"]


@dataclass(frozen=True)
class Decision:
    """The verdict and the facts it was read from: the ratio of the sweeps' means, the noise
    floor, the paired comparisons (None: none measured) and the baseline's drift (None: none
    seen), and, for "not established", what withheld the win."""

    verdict: DecidedVerdict
    ratio: float | None
    floor: float | None
    paired: stats.Paired | None = None
    drift: stats.Drift | None = None
    withheld: Withheld | None = None

    @property
    def unpaired(self) -> bool:
        """A win or a withheld win that no paired comparison checked."""
        return self.paired is None


def decide(
    ratio: float | None,
    floor: float | None,
    paired: stats.Paired | None = None,
    drift: stats.Drift | None = None,
    is_baseline: bool = False,
) -> Decision:
    """`ratio`: the candidate's objective over the baseline's by the sweeps' means (None: not
    comparable); `floor`: the objective's noise floor; `paired`: its paired comparisons with
    the baseline (none measured: None or empty); `drift`: the baseline's largest move between
    its own sweeps (stats.drift)."""
    paired = paired if paired is not None and paired.n > 0 else None
    if is_baseline:
        return Decision("baseline", ratio, floor, None, drift)
    verdict = stats.Versus(ratio, floor, ()).verdict
    if paired is not None and decide_paired(paired) == "win":  # measured so a drift cancels
        return Decision("win", ratio, floor, paired, drift)
    if verdict == "win" and paired is not None:
        return Decision("not established", ratio, floor, paired, drift, "pairs")
    if verdict == "win" and paired is None and drift is not None and drift.explains(ratio, floor):
        return Decision("not established", ratio, floor, None, drift, "drift")
    return Decision(verdict, ratio, floor, paired, drift)


def decide_paired(paired: stats.Paired) -> PairedOutcome:
    """Paired comparisons alone (a duet's rounds as they come, the planner asking whether more
    launch pairs are needed): "win" when their interval excludes every gain under
    stats.MIN_GAIN, "no gain" when it excludes a gain of MIN_GAIN or more, else "not
    established"."""
    if paired.wins:
        return "win"
    return "no gain" if paired.no_gain else "not established"


def at_level(ratio: float, floor: float | None) -> LevelVerdict:
    """One level's ratio to the baseline against that level's noise floor (None: unknown):
    "win" beyond it, "within noise", "below", or "noise unknown" - compare's and the report's
    per-level marks, the planner's levels a challenger wins."""
    if floor is None:
        return "noise unknown"
    if stats.beats(ratio, floor):
        return "win"
    return "within noise" if stats.within_noise(ratio, floor) else "below"
