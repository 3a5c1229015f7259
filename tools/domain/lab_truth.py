"""The simulator's truth ranked by the campaign objective: a configuration's true objective value
and the optimum of a search space, for tests, benchmarks and `agent sim truth --space`.

sim.truth gives the noise-free figures per level (sim/ may not import tools/); the objective is
the one of tools/domain/objective.py and an SLO is met as tools/domain/stats.py says, so a
campaign and its truth are scored by one formula.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from sim.space import DEFAULT_BASE_FLAGS, DEFAULT_LEVELS
from sim.truth import enumerate_space, latency, model_of, throughput_of
from tools.domain import stats
from tools.domain.objective import SLO_KINDS, objective_value


def config_value(
    config: Mapping[str, Any],
    levels: Sequence[int] = DEFAULT_LEVELS,
    objective: str = "geomean",
    input_len: int = 512,
    max_tokens: int = 512,
    base: Sequence[str] = DEFAULT_BASE_FLAGS,
    level: int | None = None,
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
) -> float:
    """The objective value of one configuration (what a campaign is scored on). For 'slo' the
    modelled latencies stand in for the p99 limits ttft_ms and tpot_ms (also for 'max_load')."""
    model = model_of(config, base)
    per = throughput_of(model, levels, input_len, max_tokens)
    slo_ok = None
    if objective in SLO_KINDS:
        slo = SimpleNamespace(ttft_p99_ms=ttft_ms, tpot_p99_ms=tpot_ms)
        slo_ok = {}
        for c in levels:
            lat = latency(model, c, input_len, max_tokens)
            point = {"p99_ttft_ms": lat["ttft_ms"], "p99_tpot_ms": lat["tpot_ms"]}
            slo_ok[c] = per[c] > 0 and stats.slo_met(point, slo)
    return objective_value(per, objective, level, slo_ok)


def optimum(
    space: Mapping[str, Any],
    levels: Sequence[int] = DEFAULT_LEVELS,
    objective: str = "geomean",
    input_len: int = 512,
    max_tokens: int = 512,
    base: Sequence[str] = DEFAULT_BASE_FLAGS,
    **objective_args: Any,
) -> tuple[dict[str, Any], float]:
    """The best configuration of a space and its objective value (first one on ties)."""
    best: tuple[dict[str, Any], float] | None = None
    for config in enumerate_space(space, base):
        value = config_value(
            config, levels, objective, input_len, max_tokens, base, **objective_args
        )
        if best is None or value > best[1]:
            best = (config, value)
    if best is None:
        raise ValueError("the space has no valid configuration")
    return best
