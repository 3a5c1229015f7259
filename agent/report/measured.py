"""What a run measured, read from its folder: every `benchmark` event's result (the typed result
file, else rebuilt from the event: a session replayed elsewhere has the events only), grouped into
configurations; the recommendation; the servers that failed to start; the launches.

One configuration is one config hash on one workload (tools/bench/confighash.py), as for the
noise floor (tools.bench.results.repeats), so the report's groups are the statistics' groups.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agent.brains.autopilot.purposes import KINDS, Purpose, purpose_of
from state.events import Event
from state.fold import RunState, fold
from state.launches import LaunchRecord
from state.sweeps import Sweep, sweeps
from tools.bench import results
from tools.bench.confighash import workload_key
from tools.bench.schema import BenchResult, Recommendation, open_rate
from tools.domain import stats

RECOMMENDATION = "recommendation.json"


def parse_ts(ts: str) -> datetime | None:
    """An event's `ts` (UTC ISO-8601 with a Z)."""
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None


def norm_flags(flags: dict[str, Any] | None) -> dict[str, Any]:
    """Flags as compared: omitted flags dropped, values as the command line spells them."""
    return {
        k: True if v is True else str(v)
        for k, v in sorted((flags or {}).items())
        if v is not False and v is not None
    }


def flags_change(flags: dict[str, Any] | None, base: dict[str, Any] | None) -> str:
    """How a configuration differs from the baseline, e.g. `--attention-backend triton, -X`."""
    a, b = norm_flags(flags), norm_flags(base)
    parts = [(k if v is True else f"{k} {v}") for k, v in a.items() if b.get(k) != v]
    parts += [f"no {k}" for k in b if k not in a]
    return ", ".join(parts) or "(baseline flags)"


# the autopilot's labels, `<purpose>-L<launch>[-<what changed>]` (agent/brains/autopilot): the
# purpose's word is the registry's (purposes.KINDS), the rest is this tail (a fleet's crossover
# half names its period first: cross-P03-L21-fa3); any other label (Claude's, a person's) is
# shown as it is
LAUNCH_TAIL = re.compile(r"(?:P\d+-)?L\d+(?:-(.+))?")


def autopilot_label(label: str) -> tuple[Purpose, str | None] | None:
    """An autopilot label's purpose and what changed (None where it names nothing), or None for a
    label the autopilot did not write."""
    word, _, rest = label.partition("-")
    purpose, tail = purpose_of(word), LAUNCH_TAIL.fullmatch(rest)
    return None if purpose is None or tail is None else (purpose, tail.group(1))


def human_label(label: str) -> str:
    """`noise-L01` -> "baseline repeat", `validate-L14-fa3` -> "candidate: fa3"."""
    found = autopilot_label(label)
    if found is None:
        return label
    purpose, changed = found
    word = KINDS[purpose].word
    return word if KINDS[purpose].group == "first" or not changed else f"{word}: {changed}"


@dataclass
class Configuration:
    """The results of one configuration, in the order they were measured."""

    # for the reader: human_label of its latest label but a pair's (group); "baseline" for the
    # baseline's
    name: str
    runs: list[BenchResult]
    from_file: list[bool]  # per run: read from its result file (else rebuilt from the event)
    label: str = ""  # that label as the brain wrote it (the result files carry it)
    # what its runs add up to (state/sweeps.py): the unit every count of the report uses
    sweeps: list[Sweep] = field(default_factory=list)

    @property
    def launches(self) -> int:
        """On how many launches of a server it was measured."""
        return len({s.launch for s in self.sweeps})

    @property
    def flags(self) -> dict[str, Any]:
        return self.runs[-1].server.flags

    @property
    def command(self) -> str:
        return next((r.server.command for r in reversed(self.runs) if r.server.command), "")

    @property
    def workload(self) -> dict[str, Any]:
        return self.runs[-1].workload.model_dump()

    @property
    def sweep(self) -> dict[int, float]:
        """Output tok/s per level: the mean of its sweeps, a failed level 0.0 (stats.mean_sweep)."""
        return stats.mean_sweep(results.sweep_of(r) for r in self.runs)

    @property
    def levels(self) -> list[int]:
        """The levels where it served something."""
        return [c for c, v in self.sweep.items() if v > 0]

    @property
    def failed_levels(self) -> list[int]:
        return [c for c, v in self.sweep.items() if v <= 0]

    def served_points(self) -> list[dict[str, Any]]:
        """One point per level it served, over all of its result files: a brain may cut one
        sweep into several results (the autopilot measures C=1,2 then C=5,10 ...), and a level
        measured more than once is the mean of its measurements, number by number, as `sweep`
        is. A result rebuilt from its event carries throughputs, not latencies: left out."""
        by_level: dict[str, list[dict[str, Any]]] = {}
        for r, from_file in zip(self.runs, self.from_file, strict=True):
            for p in r.points if from_file else []:
                if not p.level_failed and p.output_throughput:
                    by_level.setdefault(p.name, []).append(p.model_dump())
        merged = [_mean_point(points) for points in by_level.values()]
        return sorted(merged, key=lambda p: (p["max_concurrency"], open_rate(p) or 0.0))

    def latency(self, level: int, key: str) -> float | None:
        """The mean of a latency percentile (a Point key, e.g. p99_ttft_ms) over the sweeps that
        served the level and carry it."""
        values = [
            v
            for r in self.runs
            if (p := r.point(level)) is not None and not p.level_failed
            if isinstance(v := p.model_dump(exclude_unset=True).get(key), int | float)
        ]
        return sum(values) / len(values) if values else None

    def energy(self, level: int) -> float | None:
        """Joules per output token at the level (the point's `j_per_token`, tools/bench/energy.py),
        the mean over the sweeps that served it and carry it; None where no host reported power."""
        return self.latency(level, "j_per_token")

    def floor_share(self, level: int) -> float | None:
        """The level's output tok/s over its bandwidth floor (the point's `floor_share`,
        tools/domain/physics.py), the mean over the sweeps that carry it; None where the box
        was not known."""
        return self.latency(level, "floor_share")

    def floor_bound(self, level: int) -> str | None:
        """Which bound the level's floor is (memory, compute, interconnect: the point's
        `floor_bound`), as the latest sweep that carries one says; None where none does."""
        bounds = [
            p.floor_bound
            for r in self.runs
            if (p := r.point(level)) is not None and p.floor_bound is not None
        ]
        return bounds[-1] if bounds else None

    @property
    def notes(self) -> list[str]:
        """Every note of its results, in order."""
        return [n for r in self.runs for n in r.notes]


def _mean_point(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The numbers of a level's points averaged; anything else (errors, names) the latest's."""
    out = dict(points[-1])
    for key, value in out.items():
        numbers = [p[key] for p in points if _number(p.get(key))]
        if _number(value) and key != "max_concurrency":
            out[key] = sum(numbers) / len(numbers)
    return out


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass
class Failure:
    name: str
    flags: dict[str, Any] | None
    diagnosis: str
    excerpt: str


@dataclass
class Measured:
    run_path: Path
    state: RunState
    events: list[Event]
    status: str  # how the run ended, or is ending
    configs: list[Configuration]
    recommendation: Recommendation | None
    failures: list[Failure]
    launches: dict[str, str] = field(default_factory=dict)  # server name -> its latest command

    @property
    def results(self) -> list[BenchResult]:
        return [r for c in self.configs for r in c.runs]

    @property
    def sweep_count(self) -> int:
        return sum(len(c.sweeps) for c in self.configs)

    @property
    def base_flags(self) -> dict[str, Any] | None:
        baseline = (self.state.config.get("search") or {}).get("baseline")
        return baseline if isinstance(baseline, dict) else None

    def config_for(self, flags: dict[str, Any] | None) -> Configuration | None:
        if flags is None:
            return None
        want = norm_flags(flags)
        same = [c for c in self.configs if norm_flags(c.flags) == want]
        return max(same, key=lambda c: len(c.levels), default=None)

    def config_holding(self, ids: list[str]) -> Configuration | None:
        """The configuration of the result ids listed (recommendation.json's results)."""
        wanted = set(ids)
        found = [c for c in self.configs if any(r.id in wanted for r in c.runs)]
        return max(found, key=lambda c: len(c.levels), default=None)

    def command_of(self, c: Configuration) -> str:
        """Its launch command: as its latest result recorded it, else its server's launch."""
        if c.command:
            return c.command
        for r in reversed(c.runs):
            if r.server.name in self.launches:
                return self.launches[r.server.name]
        return ""


def read_run(run_path: Path, events: list[Event], status: str | None = None) -> Measured:
    state = fold(events)
    record = state.launches.record()
    bench = [e for e in events if e["type"] == "benchmark"]
    loaded = [results.of_event(e, run_path) for e in bench]
    configs = group(loaded, [results.REBUILT not in r.notes for r in loaded])
    sweep_of = {i: s for s in sweeps(events) for i in s.ids}
    for c in configs:
        for r in c.runs:
            s = sweep_of.get(r.id) or Sweep(
                (r.server.name or "", -1), r.label, results.sweep_of(r), [r.id]
            )
            if all(s is not known for known in c.sweeps):
                c.sweeps.append(s)
    return Measured(
        run_path=run_path,
        state=state,
        events=events,
        status=status or (state.finished or {}).get("status") or "running",
        configs=configs,
        recommendation=load_recommendation(run_path, events),
        failures=failures(record),
        launches={x.name: x.started.command or "" for x in record.launches if x.started},
    )


def group(loaded: list[BenchResult], from_file: list[bool]) -> list[Configuration]:
    """One Configuration per config hash and workload, named by its latest label that says what
    it is (a pair's label says only why it was launched again: "paired" is both the baseline and
    the winner), else its server's name; unique."""
    by_key: dict[str, Configuration] = {}
    for r, f in zip(loaded, from_file, strict=True):
        key = json.dumps([r.config_hash, workload_key(r.workload.model_dump())], sort_keys=True)
        c = by_key.setdefault(key, Configuration("", [], []))
        c.runs.append(r)
        c.from_file.append(f)
    configs = list(by_key.values())
    used: set[str] = set()
    for c in configs:
        labels = [r.label for r in c.runs if r.label]
        # a pair's or a duet's label says only why it was measured again (both sides share it)
        naming = [label for label in labels if not label.startswith(("pair-", "duet-"))] or labels
        c.label = (naming[-1] if naming else "") or (c.runs[-1].server.name or c.runs[-1].id)
        words = {human_label(r.label) for r in c.runs if r.label}
        base = "baseline" if words & {"baseline", "baseline repeat"} else human_label(c.label)
        name, n = base, 2
        while name in used:
            name, n = f"{base} #{n}", n + 1
        used.add(name)
        c.name = name
    return configs


def load_recommendation(run_path: Path, events: list[Event]) -> Recommendation | None:
    """The run's recommendation.json, parsed once (tools/bench/schema.py); none, or one that is
    not a recommendation: the recommend tool's last result in the events (a replayed session)."""
    try:
        return Recommendation.model_validate_json((run_path / RECOMMENDATION).read_bytes())
    except (OSError, ValueError):  # pydantic's ValidationError is a ValueError
        pass
    for e in reversed(events):  # a replayed session: the recommend tool's result carries it
        if e["type"] == "tool_result" and e.get("name") == "recommend" and not e.get("is_error"):
            data = (e.get("data") or {}).get("recommendation") or e.get("data")
            if isinstance(data, dict) and "config" in data:
                try:
                    return Recommendation.model_validate(data)
                except ValueError:
                    return None
    return None


def failures(record: LaunchRecord) -> list[Failure]:
    """The servers that did not start, in the order they failed (a fleet's trials are the
    fleet's section)."""
    return [
        Failure(
            name=x.name,
            flags=x.flags,
            diagnosis=x.diagnosis,
            excerpt=x.failed.log_excerpt or "",
        )
        for x in record.failed
        if x.failed is not None
    ]
