"""USD per million tokens, per model id; overridable in config ([model.prices])."""

from __future__ import annotations

import typing

from anthropic.types import ModelParam

# input, output; cache writes cost 1.25 x input, cache reads 0.1 x input
PRICES: dict[str, tuple[float, float]] = {
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-6": (5.0, 25.0),
    "claude-opus-4-7": (5.0, 25.0),
    "claude-opus-4-8": (5.0, 25.0),
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-sonnet-5": (3.0, 15.0),
    "claude-sonnet-5-5": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-haiku-5-5": (1.0, 5.0),
}


def known_models() -> list[str]:
    """The model ids the installed SDK knows, plus any we price."""
    literal = typing.get_args(ModelParam)[0]
    return sorted(set(typing.get_args(literal)) | set(PRICES))


def price_of(model: str, overrides: dict[str, dict[str, float]]) -> tuple[float, float]:
    if model in overrides:
        p = overrides[model]
        return p["input"], p["output"]
    base = model.rsplit("-", 1)[0] if model[-8:].isdigit() else model  # dated ids: drop the date
    return PRICES.get(model) or PRICES.get(base) or (15.0, 75.0)  # unknown: assume the dearest


def cost_usd(model: str, usage: dict[str, int], overrides: dict[str, dict[str, float]]) -> float:
    pin, pout = price_of(model, overrides)
    tokens_in = (
        usage.get("input_tokens", 0)
        + 1.25 * (usage.get("cache_creation_input_tokens") or 0)
        + 0.1 * (usage.get("cache_read_input_tokens") or 0)
    )
    return (tokens_in * pin + usage.get("output_tokens", 0) * pout) / 1e6
