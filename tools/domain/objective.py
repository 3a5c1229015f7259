"""The objective: the one number a campaign maximises, from output throughput per level."""

from __future__ import annotations

from collections.abc import Mapping

from tools.domain.space import SearchError
from tools.domain.stats import geomean, read_level

OBJECTIVES = ("geomean", "level", "peak", "slo", "max_load")
SLO_KINDS = ("slo", "max_load")  # the objectives that read whether each level met the SLO


def objective_value(
    per_level: Mapping[int, float],
    kind: str = "geomean",
    level: int | None = None,
    slo_ok: Mapping[int, bool] | None = None,
) -> float:
    """One number to maximise from output throughput per concurrency level.

    geomean: the geometric mean over the levels (a failed level, 0, makes it 0); level: the
    throughput at `level`; peak: the best level; slo: the best level whose latency met the SLO
    (`slo_ok`; 0 when none did) - goodput under the SLO; given a `level`, the throughput at that
    level while it meets the SLO (an SLO at one level: 0 when it did not); max_load: the highest
    load (concurrency) that met the SLO (what SGLang's auto_benchmark and vLLM's serve_sla ask; 0
    when none did)."""
    if not per_level:
        return 0.0
    values = list(per_level.values())
    if kind == "geomean":
        return geomean(values)
    if kind == "level":
        if level is None:
            raise SearchError("objective.level must be set for kind = 'level'")
        return per_level.get(level, 0.0)
    if kind == "peak":
        return max(values)
    if kind == "slo":
        ok = slo_ok or {}
        if (one := read_level(kind, level)) is not None:  # an SLO at one level
            return per_level.get(one, 0.0) if ok.get(one) else 0.0
        return max((v for c, v in per_level.items() if ok.get(c)), default=0.0)
    if kind == "max_load":
        ok = slo_ok or {}
        return float(max((c for c, v in per_level.items() if ok.get(c) and v > 0), default=0))
    raise SearchError(f"objective.kind {kind!r} is not one of {', '.join(OBJECTIVES)}")


def by_level(kind: str) -> bool:
    """Whether the objective of a set of levels is the mean of the levels' own (the geometric
    mean): then a duet round's or a crossover's level blocks are its evidence (stats.Paired's
    blocks); the other objectives read one level or the best."""
    return kind == "geomean"


def describe_objective(
    kind: str,
    level: int | None = None,
    ttft_p99_ms: float | None = None,
    tpot_p99_ms: float | None = None,
) -> str:
    if kind == "level":
        return f"output throughput at C={level}"
    if kind == "peak":
        return "peak output throughput over the sweep"
    if kind in SLO_KINDS:
        parts = [
            f"p99 TTFT <= {ttft_p99_ms:g} ms" if ttft_p99_ms else "",
            f"p99 TPOT <= {tpot_p99_ms:g} ms" if tpot_p99_ms else "",
        ]
        limits = " and ".join(p for p in parts if p)
        if kind == "max_load":
            return "the highest concurrency that meets " + limits
        if level is not None:
            return f"output throughput at C={level} with " + limits
        return "best output throughput with " + limits
    return "geometric mean of output throughput over the sweep"
