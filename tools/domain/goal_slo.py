"""An SLO objective from the goal's usual words: "highest throughput with p99 TTFT under 200 ms",
"TPOT below 50ms", "e2e latency within 5 s", "... the most load that keeps TTFT under 300 ms".

The campaign's objective comes from agent.toml's [objective]; a goal that states latency limits,
in a run whose config left [objective] at its default, asks for the SLO objective instead: kind
"slo" (the best throughput among the levels that met the limits), or "max_load" when the goal
asks for the most load ("max load", "highest concurrency", "most users"). The limits also become
the benchmark's SLO ([bench] slo) where none is set, so every result carries goodput.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import TypeAdapter, ValidationError

from state.numbers import Milliseconds
from tools.domain.config import Config, ObjectiveConfig, UsageError

MILLISECONDS: TypeAdapter[float] = TypeAdapter(Milliseconds)

_NUMBER = r"(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>ms|milliseconds?|s|sec|seconds?)\b"
_RELATION = (
    r"(?:p99\s*)?(?:(?:is|stays?|kept|of|at)\s+)*"
    r"(?:under|below|within|<=?|≤|at most|less than|no more than|max(?:imum)?|of)?\s*"
)
_METRICS = {
    "ttft": r"ttft|time[ -]to[ -]first[ -]token",
    "tpot": r"tpot|itl|time[ -]per[ -]output[ -]token|inter[ -]token latency",
    "e2el": r"e2el|e2e(?: latency)?|end[ -]to[ -]end latency|request latency",
}
_LOAD = re.compile(
    r"\b(max(?:imum)?|most|highest|peak)\s+(load|concurrency|users|traffic|request rate|rate)\b",
    re.I,
)


def goal_limits(goal: str) -> dict[str, float]:
    """{"ttft"|"tpot"|"e2el": p99 limit in ms} the goal states ({} when none)."""
    out: dict[str, float] = {}
    for key, names in _METRICS.items():
        m = re.search(rf"\b(?:{names})\b\s*{_RELATION}{_NUMBER}", goal, re.I)
        if m is None:
            continue
        value = float(m.group("num"))
        out[key] = value if m.group("unit").lower().startswith("m") else value * 1000.0
    return out


def goal_objective(goal: str) -> dict[str, Any] | None:
    """The [objective] the goal asks for, or None when it names no latency limit."""
    limits = goal_limits(goal)
    if not ("ttft" in limits or "tpot" in limits):
        return None  # the objective's limits are TTFT and TPOT; e2e alone only sets goodput
    return {
        "kind": "max_load" if _LOAD.search(goal) else "slo",
        "ttft_p99_ms": limits.get("ttft"),
        "tpot_p99_ms": limits.get("tpot"),
    }


def with_goal_slo(config: Config, goal: str) -> Config:
    """The config a run uses: an SLO objective (and the bench's SLO) from the goal's words, where
    the config did not set them itself."""
    wanted = goal_objective(goal)
    limits = goal_limits(goal)
    for key, ms in limits.items():  # "TTFT under 0 ms", a limit of years: [bench] slo's bounds
        try:
            MILLISECONDS.validate_python(ms)
        except ValidationError as err:
            msg = err.errors()[0]["msg"].replace("Input should be", "should be")
            raise UsageError(f"the goal's {key} limit {ms:g} ms {msg} ms") from None
    update: dict[str, Any] = {}
    if wanted is not None and "objective" not in config.model_fields_set:
        update["objective"] = ObjectiveConfig(**wanted)
    if limits and not config.bench.slo:
        slo = {f"{k}_ms": v for k, v in limits.items()}
        update["bench"] = config.bench.model_copy(update={"slo": slo})
    return config.model_copy(update=update) if update else config
