"""Truth: the modelled (noise-free) throughput of a configuration and the optimum of a space.

Pure functions over sim.model, for tests, benchmarks and campaign scoring. A flag dict is
applied on top of the lab's DEFAULT_BASE_FLAGS, exactly as the campaign launches it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from sim.flags import FlagError, ServerArgs, parse_server_args, to_argv
from sim.model import Model
from sim.space import DEFAULT_BASE_FLAGS, DEFAULT_LEVELS, RESERVED, flags_of, validate_space


def model_of(flags: Mapping[str, object], base: Sequence[str] = DEFAULT_BASE_FLAGS) -> Model:
    """The model of base + flags (FlagError when the server would refuse the command line)."""
    return Model(parse_server_args([*base, *to_argv(flags)], prog="sim truth"))


def level_throughput(
    model: Model, level: int, input_len: int = 512, max_tokens: int = 512
) -> float:
    """Steady-state output tok/s of a closed loop of `level` clients (0 if it cannot start).

    With B sequences running, each request costs its prefill plus E decode steps, so
    X = B * L / (E * T(B) + B * P) with T the decode step, P the prefill, L = max_tokens.
    """
    if model.failure is not None or level < 1 or max_tokens < 1:
        return 0.0
    batch = min(level, model.capacity(input_len, max_tokens))
    steps = model.expected_steps(max_tokens - 1)  # the prefill yields the first token
    ms = steps * model.decode_ms(batch) + batch * model.prefill_ms(input_len)
    return 1000.0 * batch * max_tokens / ms


def throughput_of(
    model: Model, levels: Sequence[int], input_len: int = 512, max_tokens: int = 512
) -> dict[int, float]:
    return {c: level_throughput(model, c, input_len, max_tokens) for c in levels}


def throughput(
    flags: Mapping[str, object],
    levels: Sequence[int] = DEFAULT_LEVELS,
    input_len: int = 512,
    max_tokens: int = 512,
    base: Sequence[str] = DEFAULT_BASE_FLAGS,
) -> dict[int, float]:
    """Modelled output tok/s per concurrency level, no noise; 0.0 where the server fails."""
    return throughput_of(model_of(flags, base), levels, input_len, max_tokens)


def latency(
    model: Model, level: int, input_len: int = 512, max_tokens: int = 512
) -> dict[str, float]:
    """Approximate mean TTFT and TPOT (ms) at a level: half a step + prefill + queueing."""
    if model.failure is not None:
        return {"ttft_ms": math.inf, "tpot_ms": math.inf}
    batch = min(level, model.capacity(input_len, max_tokens))
    step = model.decode_ms(batch)
    steps = model.expected_steps(max_tokens - 1)
    per_request = steps * step + batch * model.prefill_ms(input_len)  # one wave of `batch`
    queued = max(0, level - batch) / batch * per_request
    ttft = step / 2 + model.prefill_ms(input_len) + queued
    tpot = steps * step / max(1, max_tokens - 1)
    return {"ttft_ms": ttft, "tpot_ms": tpot}


def objective_value(
    per_level: Mapping[int, float],
    kind: str = "geomean",
    level: int | None = None,
    latencies: Mapping[int, Mapping[str, float]] | None = None,
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
) -> float:
    """geomean (default) | level (per_level[level]) | peak | slo (peak within the limits)."""
    values = {int(k): float(v) for k, v in per_level.items()}
    if not values:
        raise ValueError("objective of an empty result")
    if kind == "geomean":
        if min(values.values()) <= 0:
            return 0.0
        return math.exp(sum(math.log(v) for v in values.values()) / len(values))
    if kind == "level":
        if level is None or level not in values:
            raise ValueError(f"objective 'level' needs a level among {sorted(values)}")
        return values[level]
    if kind == "peak":
        return max(values.values())
    if kind == "slo":
        lat = latencies or {}
        ok = [
            v
            for c, v in values.items()
            if (ttft_ms is None or lat.get(c, {}).get("ttft_ms", math.inf) <= ttft_ms)
            and (tpot_ms is None or lat.get(c, {}).get("tpot_ms", math.inf) <= tpot_ms)
        ]
        return max(ok, default=0.0)
    raise ValueError(f"unknown objective {kind!r} (geomean, level, peak, slo)")


def enumerate_space(
    space: Mapping[str, Any], base: Sequence[str] = DEFAULT_BASE_FLAGS
) -> list[dict[str, Any]]:
    """Every distinct valid configuration: requires honoured, command lines the server refuses
    (e.g. a draft tree too small for its tokens) left out. Each config names every flag."""
    validate_space(dict(space))
    flags = flags_of(dict(space))
    requires: Mapping[str, Mapping[str, Any]] = space.get("requires", {})
    free = [f for f in flags if f not in requires]
    dependent = [f for f in flags if f in requires]
    seen: set[tuple[tuple[str, str], ...]] = set()
    out: list[dict[str, Any]] = []
    for values in itertools.product(*(space[f] for f in free)):
        head = dict(zip(free, values, strict=True))
        options = [space[f] if _holds(requires[f], head) else [False] for f in dependent]
        for tail in itertools.product(*options):
            config = {f: (head | dict(zip(dependent, tail, strict=True)))[f] for f in flags}
            key = tuple((f, repr(v)) for f, v in config.items())
            if key in seen or not _valid(config, base):
                continue
            seen.add(key)
            out.append(config)
    return out


def _holds(needs: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
    for flag, want in needs.items():
        have = config.get(flag, False)
        if (want is True and have is False) or (want is not True and have != want):
            return False
    return True


def _valid(config: Mapping[str, Any], base: Sequence[str]) -> bool:
    try:
        model_of(config, base)
    except FlagError:
        return False
    return True


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


def config_value(
    config: Mapping[str, Any],
    levels: Sequence[int] = DEFAULT_LEVELS,
    objective: str = "geomean",
    input_len: int = 512,
    max_tokens: int = 512,
    base: Sequence[str] = DEFAULT_BASE_FLAGS,
    **objective_args: Any,
) -> float:
    """The objective value of one configuration (what a campaign is scored on)."""
    model = model_of(config, base)
    per = throughput_of(model, levels, input_len, max_tokens)
    lat = (
        {c: latency(model, c, input_len, max_tokens) for c in levels}
        if objective == "slo"
        else None
    )
    return objective_value(per, objective, latencies=lat, **objective_args)


def baseline_of(space: Mapping[str, Any]) -> dict[str, Any]:
    """The space's baseline with every flag named (missing ones omitted = false)."""
    given = dict(space.get("baseline", {}))
    return {f: given.get(f, False) for f in space if f not in RESERVED}


__all__ = [
    "ServerArgs",
    "baseline_of",
    "config_value",
    "enumerate_space",
    "latency",
    "objective_value",
    "optimum",
    "throughput",
]
