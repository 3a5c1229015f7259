"""The workload options `agent bench` and run_benchmark share, parsed one way for both:
--dataset, --request-rate, --burstiness, --duration, --min-level-seconds, --slo
(docs/benchmark.md, Workloads)."""

from __future__ import annotations

import math
from typing import Literal

from tools.bench.datasets import DatasetError, parse_spec

SLO_KEYS = {"ttft_ms": "ttft", "tpot_ms": "tpot", "e2el_ms": "e2el"}


class OptionError(ValueError):
    """A workload option that does not parse; one line for the user."""


def dataset(text: str) -> str:
    try:
        parse_spec(text.strip())
    except DatasetError as err:
        raise OptionError(str(err)) from None
    return text.strip()


def rates(text: str) -> list[float]:
    """'5,20,80' -> [5.0, 20.0, 80.0]: positive, finite request rates (req/s)."""
    try:
        values = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise OptionError(f"request rates are comma-separated numbers, got {text!r}") from None
    if not values or any(not (v > 0 and math.isfinite(v)) for v in values):
        raise OptionError(f"request rates must be positive numbers (req/s), got {text!r}")
    return values


def burstiness(text: str | float) -> float | Literal["constant"]:
    if text == "constant":
        return "constant"
    try:
        value = float(text)
    except ValueError:
        raise OptionError(f"burstiness is a positive number or 'constant', got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise OptionError(f"burstiness must be a positive number or 'constant', got {text!r}")
    return value


def min_level_seconds(text: str) -> float:
    """The least a closed level lasts, in seconds: a finite number >= 0 (0: no minimum)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value >= 0 and math.isfinite(value)):
        raise OptionError(f"--min-level-seconds must be a number of seconds >= 0, got {text}")
    return value


def shared_prefix(text: str) -> int:
    """Tokens of the system prompt every request shares: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"shared prefix is a number of tokens, got {text!r}") from None
    if value < 0:
        raise OptionError(f"shared prefix must be >= 0 tokens, got {value}")
    return value


def slo(text: str) -> dict[str, float]:
    """'ttft_ms=200,tpot_ms=50' -> {"ttft": 200.0, "tpot": 50.0} (vLLM's --goodput keys)."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in SLO_KEYS:
            raise OptionError(
                f"an SLO is KEY=MS with KEY one of {', '.join(SLO_KEYS)}, got {part!r}"
            )
        try:
            limit = float(value)
        except ValueError:
            raise OptionError(f"SLO {key.strip()} needs a number of ms, got {value!r}") from None
        if not limit > 0:
            raise OptionError(f"SLO {key.strip()} must be positive, got {value!r}")
        out[SLO_KEYS[key.strip()]] = limit
    if not out:
        raise OptionError("an empty SLO: give e.g. ttft_ms=200,tpot_ms=50")
    return out
