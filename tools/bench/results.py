"""Result files: ids, building a BenchResult from a sweep, saving under results/, loading by id
or path (our schema, or a vLLM result JSON read into it), the result of a `benchmark` event, and
the sweeps that campaign statistics read (tools/domain/stats.py)."""

from __future__ import annotations

import json
import os
import platform
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from state.atomic import write_atomic, write_json_atomic
from state.events import utc_now
from state.sweeps import grouped
from tools.bench.confighash import config_hash, normalize_command, workload_key
from tools.bench.level_traffic import min_level_s, requests_for
from tools.bench.schema import (
    BenchResult,
    ClientInfo,
    DriftRecord,
    Point,
    ServerRef,
    Workload,
)
from tools.bench.vllm_format import is_vllm_result, point_from_vllm
from tools.domain import stats
from tools.domain.engines import Parallelism
from tools.domain.gpus import gpus_of

_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
_ID = re.compile(r"^b(\d+)")


class ResultError(Exception):
    """A result that cannot be found or read; one line for the user or the model."""


def slug(label: str) -> str:
    return _SLUG.sub("-", label).strip("-")[:40]


def new_id(results_dir: Path, label: str = "") -> str:
    """b001, b002, ... (with the label's slug appended), unique within the folder."""
    numbers = [int(m.group(1)) for p in results_dir.glob("b*.json") if (m := _ID.match(p.name))]
    n = max(numbers, default=0) + 1
    tail = slug(label)
    return f"b{n:03d}" + (f"-{tail}" if tail else "")


def build_result(
    *,
    result_id: str,
    server: ServerRef,
    workload: Workload,
    client: ClientInfo,
    levels: list[int],
    points: list[dict[str, Any]],
    label: str = "",
    run_id: str | None = None,
    interrupted: bool = False,
    notes: list[str] | None = None,
    physics: dict[str, Any] | None = None,
) -> BenchResult:
    client = client.model_copy(
        update={
            "host": client.host or platform.node(),
            "cpu_count": client.cpu_count or (os.cpu_count() or 0),
        }
    )
    return BenchResult(
        id=result_id,
        created=utc_now(),
        label=label,
        run_id=run_id,
        config_hash=config_hash(server.command, workload.model_dump(), server.url),
        server=server,
        workload=workload,
        client=client,
        levels=levels,
        points=[Point.model_validate(p) for p in points],
        interrupted=interrupted,
        notes=notes or [],
        physics=physics,
    )


def save(result: BenchResult, results_dir: Path, scrub: Callable[[str], str] | None = None) -> Path:
    """Write the result file; `scrub` (the run's) takes secrets out of it first."""
    results_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = results_dir / f"{result.id}.json"
    if scrub is None:
        write_json_atomic(path, result.dump())
    else:
        text = json.dumps(result.dump(), indent=2, ensure_ascii=False) + "\n"
        write_atomic(path, scrub(text).encode())
    return path


def resolve(ref: str, results_dir: Path | None) -> Path:
    """A result id (or its bNNN prefix) in results_dir, or a path to a JSON file."""
    candidates: list[Path] = []
    if results_dir is not None:
        candidates += [results_dir / ref, results_dir / f"{ref}.json"]
        m = _ID.match(ref)
        if m and results_dir.is_dir():
            candidates += sorted(results_dir.glob(f"b{int(m.group(1)):03d}-*.json"))
    candidates.append(Path(ref).expanduser())
    for path in candidates:
        if path.is_file():
            return path
    where = f" in {results_dir}" if results_dir is not None else ""
    known = ""
    if results_dir is not None and results_dir.is_dir():
        ids = sorted(p.stem for p in results_dir.glob("*.json"))
        known = f"; known: {', '.join(ids[-12:])}" if ids else "; no results yet"
    raise ResultError(f"no result {ref!r}{where} (not an id or a file){known}")


def load(ref: str, results_dir: Path | None = None, max_tokens: int | None = None) -> BenchResult:
    path = resolve(ref, results_dir)
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ResultError(f"cannot read result {path}: {err}") from None
    try:
        if is_vllm_result(obj):
            return from_vllm(obj, path, max_tokens)
        return BenchResult.model_validate(obj)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ResultError(f"{path} is not a benchmark result: {loc}: {first['msg']}") from None


def from_vllm(obj: dict[str, Any], path: Path, max_tokens: int | None = None) -> BenchResult:
    """A vLLM `bench serve` result file as a one-level BenchResult."""
    point = point_from_vllm(obj, None, max_tokens)
    workload = Workload(
        model=str(obj.get("model_id") or ""),
        input_len=max(1, round(obj.get("total_input_tokens", 0) / max(1, point["completed"])))
        if point["completed"]
        else 1,
        max_tokens=max_tokens or max(obj.get("output_lens") or [1]),
        requests_per_level=obj.get("num_prompts"),
        warmup_requests=0,
    )
    server = ServerRef(url=str(obj.get("base_url") or obj.get("backend") or ""))
    return BenchResult(
        id=path.stem,
        created=str(obj.get("date") or utc_now()),
        label=str(obj.get("label") or ""),
        config_hash=config_hash(None, workload.model_dump(), f"vllm:{workload.model}"),
        server=server,
        workload=workload,
        client=ClientInfo(kind="vllm-bench-serve", where="remote"),
        levels=[point["max_concurrency"]],
        points=[Point.model_validate(point)],
    )


REBUILT = "rebuilt from the benchmark event: the result file is missing"


def of_event(event: Mapping[str, Any], run_path: Path) -> BenchResult:
    """The result a `benchmark` event announced: its file under the run folder, else rebuilt from
    the event itself (a session replayed elsewhere has the events but not results/)."""
    for ref in (str(event.get("path") or ""), str(event.get("id") or "")):
        if ref:
            try:
                return load(ref, run_path / "results")
            except ResultError:
                continue
    return _from_event(event)


def _from_event(event: Mapping[str, Any]) -> BenchResult:
    failed = {str(c) for c in event.get("failed_levels") or []}
    raw = event.get("points")
    compact: dict[str, Any] = raw if isinstance(raw, dict) else {}
    points = []
    for level, value in (event.get("summary") or {}).items():
        point = {**(compact.get(level) or {}), "max_concurrency": int(level)}
        point.setdefault("output_throughput", float(value or 0.0))
        point["level_failed"] = bool(point.get("level_failed")) or level in failed
        points.append(point)
    flags = event.get("flags")
    server = ServerRef(
        name=str(event.get("server") or "") or None,
        command=event.get("command") or None,
        flags=flags if isinstance(flags, dict) else {},
        url=str(event.get("url") or ""),
    )
    workload = Workload.model_validate(
        {k: v for k, v in (event.get("workload") or {}).items() if k in Workload.model_fields}
    )
    return BenchResult(
        id=str(event.get("id") or event.get("seq")),
        created=str(event.get("ts") or ""),
        label=str(event.get("label") or ""),
        config_hash=str(event.get("config_hash") or ""),
        server=server,
        workload=workload,
        client=ClientInfo(),
        levels=[p["max_concurrency"] for p in points],
        points=[Point.model_validate(p) for p in points],
        interrupted=bool(event.get("interrupted")),
        notes=[REBUILT],
    )


RATE_KEY = 1000  # an open level's key where levels are paired: its rate in milli-req/s


def by_rate(result: BenchResult) -> BenchResult:
    """The result with each open-loop point keyed by its target rate (rate x RATE_KEY) instead of
    its request count, for pairing levels across results: two sweeps at 5 req/s meet at one
    level whatever their durations or request counts. Closed levels keep their concurrency; the
    point's name (Point.name) still reads 'rate 5/s'."""
    if all(p.rate is None for p in result.points):
        return result
    points = [
        p if p.rate is None else p.model_copy(update={"max_concurrency": round(p.rate * RATE_KEY)})
        for p in result.points
    ]
    return result.model_copy(
        update={"points": points, "levels": [p.max_concurrency for p in points]}
    )


def sweep_of(result: BenchResult) -> dict[int, float]:
    """{level: output tok/s} as the statistics read it: a failed level is 0.0, a level cut short
    by an interruption is left out (it is not a whole measurement)."""
    return {
        p.max_concurrency: 0.0 if p.level_failed else p.output_throughput
        for p in result.points
        if not p.interrupted or p.level_failed
    }


def gpus_used(result: BenchResult, parallelism: Parallelism | None = None) -> int:
    """GPUs a server used: as given (`agent bench --gpus`), else as its command's parallelism
    flags ask (tools.domain.gpus, as the planner counts them), else 1 - by `parallelism` (the
    run engine's profile table, a user's profile file's too), else by the profile of the engine
    the result names. The per-GPU Pareto chart and the $ per million tokens of a per-GPU price
    both divide or multiply by this."""
    if result.server.gpus:
        return result.server.gpus
    if not result.server.command:
        return 1
    engine = parallelism if parallelism is not None else result.server.engine
    return gpus_of(normalize_command(result.server.command)["flags"], engine)


Shape = tuple[tuple[int, int], ...]  # (level, requests sent) of each level of a sweep


def repeats(measured: list[BenchResult]) -> list[list[dict[int, float]]]:
    """The `repeats` input of tools.domain.stats: sweeps of one configuration (same config hash and
    workload) measured the same way (the same levels with the same number of requests each), in
    the order they were measured. A screen with fewer requests per level is biased against a full
    sweep (more of it is ramp-up and drain), so only like pairs with like: their difference is
    noise. compare, recommend, the report and the view all pass their results through here, so
    the same sweeps meet the same formula (the autopilot pairs its full sweeps the same way)."""
    return [[t.sweep for t in group] for group in _like_groups(measured)]


@dataclass(frozen=True)
class TimedSweep:
    """One sweep of a drift series: its figures, its result ids, and when it finished (the
    `created` of its last result)."""

    sweep: dict[int, float]
    ids: tuple[str, ...]
    finished: str

    @property
    def names(self) -> str:
        """Its results for a reader: `b005`, or `b001-b004` for a sweep cut into calls."""
        short = [i.split("-", 1)[0] for i in self.ids]
        return short[0] if len(short) == 1 else f"{short[0]}-{short[-1]}"


@dataclass(frozen=True)
class SeenDrift:
    """stats.drift over one configuration's series, with the two sweeps it names."""

    drift: stats.Drift
    earlier: TimedSweep
    later: TimedSweep

    def record(self, floor: float | None) -> DriftRecord:
        """As recommendation.json states it."""
        d = self.drift
        return DriftRecord.model_validate({
            "change": round(d.change, 5),
            "size": round(d.size, 5),
            "noise_floor": None if floor is None else round(floor, 5),
            "levels": list(d.levels),
            "from": {"results": list(self.earlier.ids), "finished": self.earlier.finished,
                     "value": round(d.earlier_value, 3)},
            "to": {"results": list(self.later.ids), "finished": self.later.finished,
                   "value": round(d.later_value, 3)},
            "note": f"the baseline moved more than the noise floor: {DRIFTED}",
        })  # fmt: skip


DRIFT_NOTE = (
    "a ratio between sweeps taken at different times measures the machine as much as the "
    "configuration - only paired comparisons (measured alternately) should count"
)
DRIFTED = f"the machine drifted; {DRIFT_NOTE}"


def drift(
    runs: list[BenchResult], kind: str = "geomean", level: int | None = None
) -> SeenDrift | None:
    """The largest move between the sweeps of one configuration's results (the baseline's, as a
    drift series; stats.drift): its sweeps measured alike, the shape swept most often."""
    groups = _like_groups(runs)
    if not groups:
        return None
    series = max(groups, key=len)
    found = stats.drift([t.sweep for t in series], kind, level)
    if found is None:
        return None
    return SeenDrift(found, series[found.earlier], series[found.later])


PAIR = "pair-"  # the label of a launch of a paired comparison (the autopilot's `pair` purpose)


def pairs(
    baseline: list[BenchResult], candidate: list[BenchResult]
) -> list[tuple[list[BenchResult], list[BenchResult]]]:
    """The launch pairs of a paired comparison (issue 29): the results labelled `pair-...` of
    the baseline and of the candidate in measured order, two sweeps in a row, one of each, in
    either order (the autopilot alternates: ABBA) - each pair (the baseline's results, the
    candidate's; a sweep may be split into calls by groups of levels)."""
    runs = [r for r in [*baseline, *candidate] if r.label.startswith(PAIR)]
    base_ids = {r.id for r in baseline}
    ordered = sorted(runs, key=lambda r: (r.created, _number(r.id)))
    sweeps = [parts for _, _, parts in _sweeps(ordered)]
    return stats.launch_pairs(sweeps, lambda parts: parts[0].id in base_ids)[0]


CROSS = "cross-P"  # a crossover period's half (the autopilot's `cross` on a fleet): cross-P03-...


def period_of(label: str) -> int | None:
    """The crossover period a label names (`cross-P03-L12-fa3`: 3), or None: not a crossover's."""
    if not label.startswith(CROSS):
        return None
    number = label[len(CROSS) :].split("-", 1)[0]
    return int(number) if number.isdigit() else None


def crossover_periods(
    baseline: list[BenchResult], candidate: list[BenchResult]
) -> list[tuple[list[BenchResult], list[BenchResult]]]:
    """The crossover periods of the candidate against the baseline (a fleet's: both measured at
    the same time on two boxes, the label naming the period), in period order, each (the
    baseline's results, the candidate's); a period without both halves is left out."""
    found: dict[int, tuple[list[BenchResult], list[BenchResult]]] = {}
    for side, results in enumerate((baseline, candidate)):
        for r in results:
            k = period_of(r.label)
            if k is not None:
                found.setdefault(k, ([], []))[side].append(r)
    return [found[k] for k in sorted(found) if found[k][0] and found[k][1]]


def duet_rounds(
    baseline: list[BenchResult], candidate: list[BenchResult]
) -> tuple[list[tuple[list[BenchResult], list[BenchResult]]], int]:
    """The rounds of the latest duet of the candidate (side b) against the baseline (side a),
    from the results' `duet` part (tools/duet.py): each round as (the baseline's results, the
    candidate's), in round order, and the duet's most rounds (the looks its interval is valid
    over); ([], 0) when there is none."""
    base_ids, mine_ids = {r.id for r in baseline}, {r.id for r in candidate}
    rounds: dict[str, dict[int, dict[str, BenchResult]]] = {}
    looks: dict[str, int] = {}
    for r in sorted([*baseline, *candidate], key=lambda r: (r.created, _number(r.id))):
        part = (r.__pydantic_extra__ or {}).get("duet")
        if not isinstance(part, dict):
            continue
        side = part.get("side")
        if not ((side == "a" and r.id in base_ids) or (side == "b" and r.id in mine_ids)):
            continue  # a duet of other configurations, or of these the other way round
        name = str(part.get("id"))
        rounds.setdefault(name, {}).setdefault(int(part.get("round", 0)), {})[side] = r
        looks[name] = int(part.get("rounds", stats.MAX_PAIRS))
    for name in reversed(list(rounds)):  # the latest duet with a whole round
        whole = [([v["a"]], [v["b"]]) for _, v in sorted(rounds[name].items()) if len(v) == 2]
        if whole:
            return whole, looks[name]
    return [], 0


def _like_groups(measured: list[BenchResult]) -> list[list[TimedSweep]]:
    by_config: dict[str, list[BenchResult]] = {}
    for r in measured:
        key = json.dumps([r.config_hash, workload_key(r.workload.model_dump())], sort_keys=True)
        by_config.setdefault(key, []).append(r)
    groups: dict[tuple[str, Shape], list[TimedSweep]] = {}
    for key, rs in by_config.items():
        for sweep, shape, parts in _sweeps(sorted(rs, key=lambda r: (r.created, _number(r.id)))):
            if sweep:  # a result cut short everywhere measured nothing
                timed = TimedSweep(sweep, tuple(r.id for r in parts), parts[-1].created)
                groups.setdefault((key, shape), []).append(timed)
    return list(groups.values())


def _sweeps(ordered: list[BenchResult]) -> list[tuple[dict[int, float], Shape, list[BenchResult]]]:
    """Each sweep with its shape and its results, merged by the one rule (state.sweeps.grouped).
    Result files tell no launches apart: consecutive results under one label count as one launch
    (so they are one sweep split into calls by groups of levels, as the autopilot measures, unless
    one measured a level again), a result without a label as a launch of its own."""
    each = [sweep_of(r) for r in ordered]
    launch, keyed = 0, []
    for i, r in enumerate(ordered):
        if not r.label or i == 0 or r.label != ordered[i - 1].label:
            launch += 1
        keyed.append((launch, r.label, each[i], str(i)))  # its index in `ordered` for an id
    out = []
    for s in grouped(keyed):
        at = [int(i) for i in s.ids]
        shape = tuple(
            sorted((p.max_concurrency, _sent(ordered[i], p))
                   for i in at for p in ordered[i].points if p.max_concurrency in each[i])
        )  # fmt: skip
        out.append((s.per_level, shape, [ordered[i] for i in at]))
    return out


def _sent(result: BenchResult, point: Point) -> int:
    """A level's requests as its shape counts them: those it sent, or for a closed level with a
    minimum length its count rule - what it sent past that is the clock's, and two sweeps of one
    rule are measured alike whatever each sent."""
    if point.rate is None and min_level_s(result.workload) is not None:
        return requests_for(point.max_concurrency, result.workload)
    return point.num_prompts


def _number(result_id: str) -> int:
    m = _ID.match(result_id)
    return int(m.group(1)) if m else 0
