"""The figures of a run, computed once from what was measured (agent.report.measured) with the
campaign statistics (tools/domain/stats.py): the baseline, the candidate and its standing against
the baseline (geometric-mean ratio, noise floor, verdict), the winner, the per-level noise floors,
the cost of the campaign and, with a [cost] price, what each configuration costs to serve. The
report's sections and the supervisor's view read these; none computes its own.

The candidate is the configuration recommendation.json names (else the best geometric-mean ratio
to the baseline among those measured on at least half its levels). It is the winner when the
decision (tools/domain/decision.py) says win - recommendation.json's verdict when there is one,
else `decide` on the means, the floor and the baseline's drift - else the baseline stays -
unless it served no level at all (every request of every level failed): a
configuration that was not measured is never the winner, and then there is none. The noise floor
stated is the objective's over the levels of that comparison, the same number recommendation.json
states. The drift is the baseline's own sweeps read as a drift series (results.drift), stated when
they moved more than that floor, as recommendation.json states it.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.report.measured import Configuration, Measured, norm_flags, parse_ts
from state.events import Event
from state.sweeps import count
from tools.bench import results
from tools.bench.schema import PairedRecord
from tools.domain import cost as serving
from tools.domain import stats
from tools.domain.config import ObjectiveConfig
from tools.domain.decision import Decision, LevelVerdict, at_level, decide
from tools.domain.engines import Parallelism
from tools.errors import ToolError
from tools.recommend import paired_evidence, paired_record
from tools.servers.profiles import recorded_engine

NOISY_LEVEL = 0.10  # a per-level floor above this makes that level's ratios meaningless


@dataclass
class Figures:
    m: Measured
    baseline: Configuration | None
    candidate: Configuration | None
    winner: Configuration | None
    versus: stats.Versus | None  # the candidate against the baseline
    floor: float | None  # the objective's noise floor: the one number every summary prints
    level_floors: dict[int, float]
    repeats: list[list[dict[int, float]]]
    kind: str
    level: int | None
    price: serving.CostConfig | None = None  # [cost] as the run recorded it; None: not priced
    drift: results.SeenDrift | None = None  # the baseline's largest move between its sweeps
    # the candidate against the baseline measured so a drift cancels (a duet's rounds, else
    # launch pairs): recommendation.json's, else read from the results as recommend reads them
    paired: PairedRecord | None = None
    # the run engine's [parallelism] (a user's profile file's too): how its commands' GPUs count
    parallelism: Parallelism | None = None

    @property
    def drifted(self) -> results.SeenDrift | None:
        """The drift when it is beyond the noise floor (else nothing is said of it)."""
        seen = self.drift
        return seen if seen is not None and seen.drift.beyond(self.floor) else None

    @property
    def by_means(self) -> Decision | None:
        """The candidate against the baseline by the sweeps' means alone (decide, with no pairs
        and no drift): what a view says of it beside the verdict (None: no candidate)."""
        vs = self.versus
        return None if vs is None else decide(vs.ratio, vs.floor)

    def ratio(self, c: Configuration) -> float | None:
        """c's geometric-mean ratio to the baseline (stats.geomean_ratio of the mean sweeps)."""
        return None if self.baseline is None else stats.geomean_ratio(c.sweep, self.baseline.sweep)

    def level_ratios(self, c: Configuration) -> dict[int, float]:
        return {} if self.baseline is None else stats.level_ratios(c.sweep, self.baseline.sweep)

    def level_verdicts(self, c: Configuration) -> dict[int, tuple[float, LevelVerdict]]:
        """Per level: c's ratio to the baseline and its mark (decision.at_level: "win" beyond
        that level's noise floor, the objective's where the level's is unknown, "within noise",
        "below" or "noise unknown")."""
        floors = self.level_floors
        return {
            level: (r, at_level(r, floors.get(level, self.floor)))
            for level, r in self.level_ratios(c).items()
        }

    def usd_per_mtok(self, c: Configuration) -> dict[int, float]:
        """$ per million output tokens at each level c served ({} without a price): the one
        formula (tools/domain/cost.py) on the mean sweep every other figure reads, for the GPUs
        its command asks for."""
        if self.price is None:
            return {}
        return serving.per_level(self.price, self.gpus(c), c.sweep)

    def gpus(self, c: Configuration) -> int:
        """The GPUs c's command asks for, by the run engine's profile (results.gpus_used)."""
        return results.gpus_used(c.runs[-1], self.parallelism)

    def screened(self, c: Configuration) -> bool:
        """Measured on fewer than half the baseline's levels: a screen, not a sweep."""
        return self.baseline is not None and len(c.levels) * 2 < len(self.baseline.levels)

    def ranked(self) -> list[Configuration]:
        """Best first, the same order everywhere: the configurations swept on most levels by
        their geometric-mean ratio, then those only screened (a ratio over three levels is not
        comparable with one over eight)."""
        return sorted(self.m.configs, key=lambda c: (self.screened(c), -(self.ratio(c) or 0)))

    @property
    def measured(self) -> list[Configuration]:
        """The configurations that served at least one level (a sweep failed at every level
        measured nothing)."""
        return [c for c in self.m.configs if c.levels]

    @property
    def repeated(self) -> list[Configuration]:
        """Measured by more than one sweep (state/sweeps.py)."""
        return [c for c in self.m.configs if len(c.sweeps) > 1]

    @property
    def noisy_levels(self) -> dict[int, float]:
        return {c: v for c, v in self.level_floors.items() if v > NOISY_LEVEL}


def objective_of(m: Measured) -> tuple[str, int | None]:
    stated = m.recommendation.objective if m.recommendation is not None else None
    if stated is not None:  # the objective the recommendation's figures are of
        return stated.kind, stated.level
    raw = m.state.config.get("objective") or {}
    if not isinstance(raw, dict):
        return str(raw), None
    level = raw.get("level")
    return str(raw.get("kind") or "geomean"), level if isinstance(level, int) else None


def compute(m: Measured) -> Figures:
    kind, level = objective_of(m)
    repeats = results.repeats(m.results)
    base = pick_baseline(m)
    candidate = pick_candidate(m, base, repeats)
    vs = None
    if base is not None and candidate is not None and candidate is not base:
        vs = stats.versus(candidate.sweep, base.sweep, repeats, kind, level)
    if vs is not None:
        floor = vs.floor
    else:  # nothing to compare with: the floor over the baseline's own levels
        floor = stats.objective_floor(repeats, base.levels if base else [], kind)
    drift = results.drift(base.runs, kind, level) if base is not None else None
    paired = m.recommendation.paired if m.recommendation is not None else None
    if m.recommendation is not None:  # recommend's decision (decision.decide), as it stated it
        wins = m.recommendation.verdict == "win" and vs is not None
    else:  # no recommendation (a run the budget ended first): the same rule, on the same facts
        found = None
        if vs is not None and base is not None and candidate is not None:
            found = _paired(m, base, candidate)
        paired = paired_record(found) if found is not None else None
        seen = drift.drift if drift else None
        wins = vs is not None and decide(vs.ratio, vs.floor, found, seen).verdict == "win"
    winner = candidate if wins else base
    if winner is not None and not winner.levels:  # every level failed: not measured, no winner
        winner = None
    return Figures(
        m=m,
        baseline=base,
        candidate=candidate,
        winner=winner,
        versus=vs,
        floor=floor,
        level_floors=stats.level_floors(repeats),
        repeats=repeats,
        kind=kind,
        level=level,
        price=serving.price_of(m.state.config.get("cost")),
        drift=drift,
        paired=paired,
        parallelism=recorded_engine(m.state.config.get("server") or {}).profile.parallelism,
    )


def _paired(m: Measured, base: Configuration, candidate: Configuration) -> stats.Paired | None:
    """The candidate against the baseline in a duet or launch pairs, as recommend reads them
    (tools/recommend.paired_evidence) over the levels both have, on the run's objective - from
    every result of either configuration's flags, whatever its workload or command (a duet's
    rounds may be measured with fewer requests than the sweeps)."""
    try:
        objective = ObjectiveConfig.model_validate(m.state.config.get("objective") or {})
        common = sorted(set(base.levels) & set(candidate.levels))
        if not common:
            return None
        ours, theirs = norm_flags(candidate.flags), norm_flags(base.flags)
        mine = [r for r in m.results if norm_flags(r.server.flags) == ours]
        base_runs = [r for r in m.results if norm_flags(r.server.flags) == theirs]
        return paired_evidence(base_runs, mine, common, objective)
    except (ToolError, ValueError):  # an objective the results cannot give: no paired figure
        return None


def pick_baseline(m: Measured) -> Configuration | None:
    ids = m.recommendation.baseline_results if m.recommendation is not None else []
    found = m.config_holding(ids) or m.config_for(m.base_flags)
    if found is None:
        named = [c for c in m.configs if "baseline" in (c.name + str(c.runs[-1].server.name))]
        found = max(named, key=lambda c: len(c.levels), default=None)
    return found or (m.configs[0] if m.configs else None)


def pick_candidate(
    m: Measured, base: Configuration | None, repeats: list[list[dict[int, float]]]
) -> Configuration | None:
    rec = m.recommendation
    if rec is not None:
        flags = (rec.candidate or rec).config
        found = m.config_holding(rec.results) or m.config_for(flags)
        if found is not None:
            return found
    if base is None:
        return None
    # a candidate must have been measured on most of the baseline's levels, not only screened
    full = [c for c in m.configs if c is not base and len(c.levels) * 2 >= len(base.levels)]
    scored = [(r, c) for c in full if (r := stats.geomean_ratio(c.sweep, base.sweep)) is not None]
    return max(scored, key=lambda rc: rc[0])[1] if scored else base


def cost(m: Measured) -> dict[str, float]:
    events, state = m.events, m.state
    bench_s = sum(
        float(e.get("duration_s") or 0)
        for e in events
        if e["type"] == "tool_result" and e.get("name") == "run_benchmark"
    )
    sp, launched = state.spend, state.launches.record()
    return {
        "launches": sum(x.started is not None for x in launched.launches),
        "failed_launches": sum(x.failed is not None for x in launched.failed),
        "sweeps": m.sweep_count,
        "benchmark_calls": sum(e["type"] == "benchmark" for e in events),
        "benchmark_minutes": bench_s / 60,
        "wall_minutes": wall_minutes(events),
        "steps": state.steps,
        "input_tokens": sp.input_tokens
        + sp.cache_read_input_tokens
        + sp.cache_creation_input_tokens,
        "output_tokens": sp.output_tokens,
        "usd": sp.usd,
    }


def wall_minutes(events: list[Event]) -> float:
    """The sum of the run's sessions: the time between runs of `agent resume` is not spent."""
    wall = 0.0
    start = last = None
    for e in events:
        if e["type"] in ("run_started", "run_resumed"):
            if start and last:
                wall += _seconds(start, last)
            start = e["ts"]
        last = e["ts"]
    if start and last:
        wall += _seconds(start, last)
    return wall / 60


# what ends a wait on the model API: its answer (the exchange, the reply, a compaction's), or the
# session's end (a stop, a budget, the wait given up)
API_ANSWERED = ("api_exchange", "message", "compaction", "run_finished", "run_resumed")


@dataclass(frozen=True)
class ApiWaits:
    """The time the run spent waiting on the model API (model_wait events: the SDK's and the
    brain's retries, the loop's pauses): each outage from its first wait to the API's next answer
    (or the session's end), summed; the retries that took; the commonest reason."""

    seconds: float
    retries: int
    outages: int
    reason: str

    def text(self) -> str:
        """'10.2 minutes over 14 retries (HTTP 529 overloaded)'."""
        tries = count(self.retries, "retry", "retries")
        spans = f", {self.outages} outages" if self.outages > 1 else ""
        return f"{self.seconds / 60:.1f} minutes over {tries}{spans} ({self.reason})"


def api_waits(events: list[Event]) -> ApiWaits | None:
    """The run's waits on the model API (None: it never waited)."""
    seconds, retries, outages = 0.0, 0, 0
    reasons: dict[str, int] = {}
    since: str | None = None
    for e in events:
        if e["type"] == "model_wait":
            retries += 1
            why = _api_words(str(e.get("reason") or ""))
            reasons[why] = reasons.get(why, 0) + 1
            if since is None:
                since, outages = e["ts"], outages + 1
        elif since is not None and _answered(e):
            seconds += _seconds(since, e["ts"])
            since = None
    if since is not None and events:  # the log ends inside a wait (a crash, or still waiting)
        seconds += _seconds(since, events[-1]["ts"])
    if not retries:
        return None
    return ApiWaits(seconds, retries, outages, max(reasons, key=lambda k: reasons[k]))


def _answered(e: Event) -> bool:
    """The API answered (a user message is the loop's own note, not an answer), or the session
    ended."""
    return e["type"] in API_ANSWERED and (e["type"] != "message" or e.get("role") == "assistant")


def _api_words(reason: str) -> str:
    """'HTTP 529 overloaded' of 'the Anthropic API is unavailable: HTTP 529 overloaded: ...'."""
    why = reason.removeprefix("the Anthropic API: ")
    why = why.removeprefix("the Anthropic API is unavailable: ")
    return why.split(": ")[0].split(" (")[0][:80] or "no reason given"


def _seconds(a: str, b: str) -> float:
    ta, tb = parse_ts(a), parse_ts(b)
    return max((tb - ta).total_seconds(), 0.0) if ta and tb else 0.0
