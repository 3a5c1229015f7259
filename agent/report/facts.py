"""The facts of a campaign for its report: contenders, baseline, winner, recommendation, failures,
noise floor and cost - all from the run folder (events first, files where present)."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.report.data import (
    Contender,
    geomean_ratio,
    group,
    measurement,
    norm_flags,
    parse_ts,
)
from state.events import Event
from state.fold import RunState, fold
from state.run import Run

RECOMMENDATION = "recommendation.json"


@dataclass
class Failure:
    name: str
    flags: dict[str, Any] | None
    diagnosis: str
    excerpt: str


@dataclass
class Facts:
    run_path: Path
    state: RunState
    events: list[Event]
    status: str  # how the run ended, or is ending
    contenders: list[Contender]
    baseline: Contender | None
    winner: Contender | None
    recommendation: dict[str, Any] | None
    failures: list[Failure]
    noise: dict[int, float]  # level -> relative spread of repeated measurements
    noise_source: list[str]
    cost: dict[str, float]
    launches: dict[str, str] = field(default_factory=dict)  # server name -> its latest command

    @property
    def base_flags(self) -> dict[str, Any] | None:
        search = self.state.config.get("search") or {}
        baseline = search.get("baseline")
        return baseline if isinstance(baseline, dict) else None

    def contender_for(self, flags: dict[str, Any] | None) -> Contender | None:
        if flags is None:
            return None
        want = norm_flags(flags)
        full = [c for c in self.contenders if c.flags is not None and norm_flags(c.flags) == want]
        return max(full, key=lambda c: len(c.levels), default=None)

    def command_of(self, c: Contender) -> str:
        """Its launch command: as its latest benchmark recorded it, else its server's launch."""
        for run in reversed(c.runs):
            if run.command:
                return run.command
        for run in reversed(c.runs):
            if run.server in self.launches:
                return self.launches[run.server]
        return c.command


def load_recommendation(run_path: Path, events: list[Event]) -> dict[str, Any] | None:
    try:
        data = json.loads((run_path / RECOMMENDATION).read_text())
        if isinstance(data, dict):
            return data
    except (OSError, ValueError):
        pass
    for e in reversed(events):  # a replayed session: the recommend tool's result carries it
        if e["type"] == "tool_result" and e.get("name") == "recommend" and not e.get("is_error"):
            data = (e.get("data") or {}).get("recommendation") or e.get("data")
            if isinstance(data, dict) and "config" in data:
                return data
    return None


def gather(run_path: Path, events: list[Event], status: str | None = None) -> Facts:
    state = fold(events)
    measurements = [measurement(run_path, e) for e in events if e["type"] == "benchmark"]
    contenders = group(measurements)
    facts = Facts(
        run_path=run_path,
        state=state,
        events=events,
        status=status or (state.finished or {}).get("status") or "running",
        contenders=contenders,
        baseline=None,
        winner=None,
        recommendation=load_recommendation(run_path, events),
        failures=failures(events),
        noise={},
        noise_source=[],
        cost=cost(events, state),
        launches={
            e["name"]: str(e.get("command", "")) for e in events if e["type"] == "server_started"
        },
    )
    facts.baseline = pick_baseline(facts)
    facts.winner = pick_winner(facts)
    facts.noise, facts.noise_source = noise_floor(contenders)
    return facts


def _by_ids(f: Facts, key: str) -> Contender | None:
    """The contender holding the results recommendation.json names under `key`."""
    ids = {str(i) for i in (f.recommendation or {}).get(key) or []}
    found = [c for c in f.contenders if any(r.id in ids for r in c.runs)]
    return max(found, key=lambda c: len(c.levels), default=None)


def pick_baseline(f: Facts) -> Contender | None:
    found = _by_ids(f, "baseline_results") or f.contender_for(f.base_flags)
    if found is None:
        named = [c for c in f.contenders if "baseline" in (c.name + c.runs[-1].server).lower()]
        found = max(named, key=lambda c: len(c.levels), default=None)
    return found or (f.contenders[0] if f.contenders else None)


def pick_winner(f: Facts) -> Contender | None:
    if f.recommendation is not None:
        found = _by_ids(f, "results") or f.contender_for(f.recommendation.get("config"))
        if found is not None:
            return found
    if f.baseline is None:
        return None
    base = f.baseline
    # a winner must have been measured on most of the baseline's levels, not only screened
    full = [c for c in f.contenders if len(c.levels) * 2 >= len(base.levels)]
    scored = [(r, c) for c in full if (r := geomean_ratio(c, base)) is not None]
    return max(scored, key=lambda rc: rc[0])[1] if scored else base


def failures(events: list[Event]) -> list[Failure]:
    started: dict[str, Event] = {}
    out = []
    for e in events:
        if e["type"] == "server_started":
            started[e["name"]] = e
        elif e["type"] == "server_failed":
            launch = started.get(e["name"], {})
            out.append(
                Failure(
                    name=e["name"],
                    flags=launch.get("flags"),
                    diagnosis=str(e.get("diagnosis") or "failed"),
                    excerpt=str(e.get("log_excerpt") or ""),
                )
            )
    return out


def noise_floor(contenders: list[Contender]) -> tuple[dict[int, float], list[str]]:
    """Per level, the largest relative spread ((max - min) / mean) among repeated measurements
    of one configuration: differences smaller than this are not wins."""
    spread: dict[int, float] = {}
    source = []
    for c in contenders:
        repeated = False
        for level in c.levels:
            s = c.samples(level)
            if len(s) >= 2 and statistics.fmean(s) > 0:
                rel = (max(s) - min(s)) / statistics.fmean(s)
                spread[level] = max(spread.get(level, 0.0), rel)
                repeated = True
        if repeated:
            source.append(c.name)
    return dict(sorted(spread.items())), source


def cost(events: list[Event], state: RunState) -> dict[str, float]:
    bench_s = sum(
        float(e.get("duration_s") or 0)
        for e in events
        if e["type"] == "tool_result" and e.get("name") == "run_benchmark"
    )
    wall = 0.0
    start = None
    last = None
    for e in events:  # sum the sessions: the time between runs of `agent resume` is not spent
        if e["type"] in ("run_started", "run_resumed"):
            if start and last:
                wall += _seconds(start, last)
            start = e["ts"]
        last = e["ts"]
    if start and last:
        wall += _seconds(start, last)
    sp = state.spend
    return {
        "launches": sum(e["type"] == "server_started" for e in events),
        "failed_launches": sum(e["type"] == "server_failed" for e in events),
        "benchmarks": sum(e["type"] == "benchmark" for e in events),
        "benchmark_minutes": bench_s / 60,
        "wall_minutes": wall / 60,
        "steps": state.steps,
        "input_tokens": sp.input_tokens
        + sp.cache_read_input_tokens
        + sp.cache_creation_input_tokens,
        "output_tokens": sp.output_tokens,
        "usd": sp.usd,
    }


def _seconds(a: str, b: str) -> float:
    ta, tb = parse_ts(a), parse_ts(b)
    return max((tb - ta).total_seconds(), 0.0) if ta and tb else 0.0


def facts_of_run(run: Run, status: str | None = None) -> Facts:
    from state.events import read_events

    return gather(run.path, read_events(run.events_path).events, status)
