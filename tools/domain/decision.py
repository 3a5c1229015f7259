"""The decision: whether a candidate beats the baseline, computed here and only here. The
autopilot's conclusion (agent/brains/autopilot/conclude.py), recommend (tools/recommend.py) and
the report's figures (agent/report/figures.py) each gather the facts from their own side - the
planner's history, the result files, the report's measured configurations - and call `decide`;
none decides again, so the three cannot split (commits 059903d and 9741dbe mended cases where
two did). Each states the decision in its own words from the typed `Decision`.

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
    def wins(self) -> bool:
        return self.verdict == "win"

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
    if paired is not None and paired.wins:  # measured so a drift cancels: they decide
        return Decision("win", ratio, floor, paired, drift)
    if verdict == "win" and paired is not None:
        return Decision("not established", ratio, floor, paired, drift, "pairs")
    if verdict == "win" and paired is None and drift is not None and drift.explains(ratio, floor):
        return Decision("not established", ratio, floor, None, drift, "drift")
    return Decision(verdict, ratio, floor, paired, drift)
