"""What a report is made of, gathered from a run folder: the events first, the result files where
they exist (a recorded session replayed elsewhere has the events but not results/).

Benchmarks of the same configuration (same flags, same workload) are one Contender; repeated
measurements of it give the noise floor. The baseline is the configuration of the search space's
`baseline` table (else the one labelled baseline, else the first measured); the winner is the
configuration of recommendation.json (else the best geometric-mean ratio to the baseline).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from state.events import Event

# our names -> the names a result or an event may use (vLLM's flat keys first)
METRICS = {
    "output_throughput": ("output_throughput",),
    "ttft_p50": ("p50_ttft_ms", "median_ttft_ms", "ttft_p50_ms", "ttft_p50"),
    "ttft_p99": ("p99_ttft_ms", "ttft_p99_ms", "ttft_p99"),
    "tpot_p50": ("p50_tpot_ms", "median_tpot_ms", "tpot_p50_ms", "tpot_p50"),
    "tpot_p99": ("p99_tpot_ms", "tpot_p99_ms", "tpot_p99"),
}
WORKLOAD_KEYS = ("input_len", "max_tokens", "endpoint")


def parse_ts(ts: str) -> datetime | None:
    """An event's `ts` (UTC ISO-8601 with a Z)."""
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return float(value)


def _merge(out: dict[int, dict[str, Any]], level: Any, raw: Any) -> None:
    try:
        c = int(level)
    except (TypeError, ValueError):
        return
    slot = out.setdefault(c, {})
    if not isinstance(raw, dict):  # a bare number: the summary's output throughput
        raw = {"output_throughput": raw}
    for ours, names in METRICS.items():
        for name in names:
            value = _number(raw.get(name))
            if value is not None:
                slot[ours] = value
                break
    # vLLM's `failed` counts failed requests; the level's verdict is `level_failed`
    verdict = any(raw.get(k) is True for k in ("level_failed", "failed"))  # not a count of 1
    if verdict or ("output_throughput" in raw and raw["output_throughput"] is None):
        slot["failed"] = True


def level_metrics(event: Event, result: dict[str, Any] | None = None) -> dict[int, dict[str, Any]]:
    """{level: {output_throughput, ttft_p50, ttft_p99, tpot_p50, tpot_p99, failed?}} from a
    `benchmark` event (its summary and any compact per-level metrics) and its result file."""
    out: dict[int, dict[str, Any]] = {}
    for level, value in (event.get("summary") or {}).items():
        _merge(out, level, value)
    for key in ("levels", "metrics", "points"):
        block = event.get(key)
        items = block.items() if isinstance(block, dict) else []
        if isinstance(block, list):
            items = [(p.get("max_concurrency") or p.get("level"), p) for p in block]
        for level, raw in items:
            _merge(out, level, raw)
    for point in (result or {}).get("points") or []:
        if isinstance(point, dict):
            _merge(out, point.get("max_concurrency"), point)
    for level in event.get("failed_levels") or []:
        _merge(out, level, {"failed": True})
    return out


def norm_flags(flags: dict[str, Any] | None) -> dict[str, Any]:
    """Flags as compared: omitted flags dropped, values as the command line spells them."""
    return {
        k: True if v is True else str(v)
        for k, v in sorted((flags or {}).items())
        if v is not False and v is not None
    }


def flags_text(flags: dict[str, Any]) -> str:
    return " ".join(k if v is True else f"{k} {v}" for k, v in norm_flags(flags).items())


def flags_change(flags: dict[str, Any] | None, base: dict[str, Any] | None) -> str:
    """How a configuration differs from the baseline, e.g. `--attention-backend triton, -X`."""
    a, b = norm_flags(flags), norm_flags(base)
    parts = [(k if v is True else f"{k} {v}") for k, v in a.items() if b.get(k) != v]
    parts += [f"no {k}" for k in b if k not in a]
    return ", ".join(parts) or "(baseline flags)"


@dataclass
class Measurement:
    id: str
    label: str
    server: str
    flags: dict[str, Any] | None
    command: str
    workload: dict[str, Any]
    levels: dict[int, dict[str, Any]]
    seq: int
    from_file: bool


@dataclass
class Contender:
    name: str
    flags: dict[str, Any] | None
    command: str
    workload: dict[str, Any]
    runs: list[Measurement] = field(default_factory=list)

    def samples(self, level: int, key: str = "output_throughput") -> list[float]:
        out = []
        for run in self.runs:
            m = run.levels.get(level, {})
            if not m.get("failed") and m.get(key) is not None:
                out.append(m[key])
        return out

    @property
    def levels(self) -> list[int]:
        return sorted({c for r in self.runs for c in r.levels if self.samples(c)})

    def value(self, level: int, key: str = "output_throughput") -> float | None:
        s = self.samples(level, key)
        return sum(s) / len(s) if s else None

    def throughput(self) -> dict[int, float]:
        return {c: v for c in self.levels if (v := self.value(c)) is not None}

    @property
    def failed_levels(self) -> list[int]:
        bad = {c for r in self.runs for c, m in r.levels.items() if m.get("failed")}
        return sorted(c for c in bad if not self.samples(c))


def level_ratios(a: Contender, b: Contender) -> dict[int, float]:
    ta, tb = a.throughput(), b.throughput()
    return {c: ta[c] / tb[c] for c in sorted(set(ta) & set(tb)) if tb[c] > 0}


def geomean_ratio(a: Contender, b: Contender) -> float | None:
    ratios = [r for r in level_ratios(a, b).values() if r > 0]
    return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None


def load_result(run_path: Path, event: Event) -> dict[str, Any] | None:
    """The full result JSON of a benchmark event, if it is here (a replayed session lacks it)."""
    candidates = []
    if event.get("path"):
        p = Path(event["path"])
        candidates.append(p if p.is_absolute() else run_path / p)
    if event.get("id"):
        candidates.append(run_path / "results" / f"{event['id']}.json")
    for path in candidates:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return data
    return None


def measurement(run_path: Path, event: Event) -> Measurement:
    result = load_result(run_path, event)
    server = event.get("server")
    server_name = server.get("name", "") if isinstance(server, dict) else str(server or "")
    flags = event.get("flags")
    if flags is None and isinstance(server, dict):
        flags = server.get("flags")
    workload = event.get("workload") or (result or {}).get("workload") or {}
    command = event.get("command") or (server.get("command") if isinstance(server, dict) else "")
    return Measurement(
        id=str(event.get("id", event["seq"])),
        label=str(event.get("label") or ""),
        server=server_name,
        flags=flags if isinstance(flags, dict) else None,
        command=str(command or ""),
        workload={k: workload.get(k) for k in WORKLOAD_KEYS if k in workload},
        levels=level_metrics(event, result),
        seq=event["seq"],
        from_file=result is not None,
    )


def group(measurements: list[Measurement]) -> list[Contender]:
    """One Contender per configuration (flags, or the command when a result has no flags)."""
    by_key: dict[str, Contender] = {}
    for m in measurements:
        ident: Any = norm_flags(m.flags) if m.flags is not None else (m.command or m.server or m.id)
        key = json.dumps([ident, m.workload], sort_keys=True, default=str)
        if key not in by_key:
            by_key[key] = Contender(name="", flags=m.flags, command=m.command, workload=m.workload)
        by_key[key].runs.append(m)
    contenders = list(by_key.values())
    used: set[str] = set()
    for c in contenders:  # a readable, unique name: the latest label, else the server's name
        base = next((r.label for r in reversed(c.runs) if r.label), "") or c.runs[-1].server
        name, n = base or c.runs[-1].id, 2
        while name in used:
            name, n = f"{base} #{n}", n + 1
        used.add(name)
        c.name = name
    return contenders
