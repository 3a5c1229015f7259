"""Truth: the modelled (noise-free) throughput and latency of a configuration, per level, and the
configurations of a space.

Pure functions over sim.model, for tests, benchmarks and campaign scoring. A flag dict is
applied on top of the lab's DEFAULT_BASE_FLAGS, exactly as the campaign launches it. Ranking by
an objective is the campaign's business, with its one formula: tools/domain/lab_truth.py
(config_value, optimum) on top of these.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from sim.flags import FlagError, ServerArgs, parse_server_args, to_argv
from sim.model import Model
from sim.prefix_cache import cacheable
from sim.space import DEFAULT_BASE_FLAGS, DEFAULT_LEVELS, RESERVED, flags_of, validate_space


def model_of(flags: Mapping[str, object], base: Sequence[str] = DEFAULT_BASE_FLAGS) -> Model:
    """The model of base + flags (FlagError when the server would refuse the command line)."""
    return Model(parse_server_args([*base, *to_argv(flags)], prog="sim truth"))


def level_throughput(
    model: Model,
    level: int,
    input_len: int = 512,
    max_tokens: int = 512,
    cached_tokens: int = 0,
    text_score: float = 0.0,
) -> float:
    """Steady-state output tok/s of a closed loop of `level` clients (0 if it cannot start).

    With B sequences running, each request costs its prefill plus E decode steps, so
    X = B * L / (E * T(B) + B * P) with T the decode step, P the prefill of the prompt's
    uncached tokens (`cached_tokens` served by the prefix cache), L = max_tokens; E follows the
    acceptance on text of predictability `text_score` (sim.predictability).
    """
    if model.failure is not None or level < 1 or max_tokens < 1:
        return 0.0
    batch, step, steps, prefill = _wave(
        model, level, input_len, max_tokens, cached_tokens, text_score
    )
    return 1000.0 * batch * max_tokens / (steps * step + batch * prefill)


def floor_share(model: Model, level: int, input_len: int = 512, max_tokens: int = 512) -> float:
    """The modelled throughput's share of the bandwidth floor at `level` (level sequences in one
    batch, each at the mean context input_len + max_tokens / 2: docs/physics.md); 0 where the
    profile models no bandwidth or the server cannot start."""
    step = model.floor_ms(max(1, level), input_len + max_tokens / 2)
    if step <= 0:
        return 0.0
    floor_tok_s = 1000.0 * max(1, level) / step
    return level_throughput(model, level, input_len, max_tokens) / floor_tok_s


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
    model: Model,
    level: int,
    input_len: int = 512,
    max_tokens: int = 512,
    cached_tokens: int = 0,
    text_score: float = 0.0,
) -> dict[str, float]:
    """Approximate mean TTFT and TPOT (ms) at a level: half a step + prefill + queueing (the
    prefill of the tokens the prefix cache does not hold)."""
    if model.failure is not None:
        return {"ttft_ms": math.inf, "tpot_ms": math.inf}
    batch, step, steps, prefill = _wave(
        model, level, input_len, max_tokens, cached_tokens, text_score
    )
    per_request = steps * step + batch * prefill  # one wave of `batch`
    queued = max(0, level - batch) / batch * per_request
    ttft = step / 2 + prefill + queued
    tpot = steps * step / max(1, max_tokens - 1)
    return {"ttft_ms": ttft, "tpot_ms": tpot}


def _wave(
    model: Model, level: int, input_len: int, max_tokens: int, cached_tokens: int, score: float
) -> tuple[int, float, float, float]:
    """One wave of a level's running batch, which throughput and latency both read: (batch,
    decode step ms, decode steps per request, prefill ms of a request's uncached tokens)."""
    batch = min(level, model.capacity(input_len, max_tokens))
    steps = model.expected_steps(max_tokens - 1, score)  # the prefill yields the first token
    return batch, model.decode_ms(batch), steps, _prefill(model, input_len, cached_tokens)


def _prefill(model: Model, input_len: int, cached_tokens: int) -> float:
    return model.prefill_ms(input_len - cacheable(input_len, cached_tokens))


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


def baseline_of(space: Mapping[str, Any]) -> dict[str, Any]:
    """The space's baseline with every flag named (missing ones omitted = false)."""
    given = dict(space.get("baseline", {}))
    return {f: given.get(f, False) for f in space if f not in RESERVED}


__all__ = ["ServerArgs", "baseline_of", "enumerate_space", "latency", "throughput"]
