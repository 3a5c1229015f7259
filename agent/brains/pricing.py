"""USD per million tokens, per model id; overridable in config ([model.prices])."""

from __future__ import annotations

from agent.brains.models import MODELS, base_id, sdk_models

# input, output (platform.claude.com model pages); cache writes cost 1.25 x input, reads 0.1 x
PRICES: dict[str, tuple[float, float]] = {
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-opus-4-5": (5.0, 25.0),
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-opus-4-6": (5.0, 25.0),
    "claude-opus-4-7": (5.0, 25.0),
    "claude-opus-4-8": (5.0, 25.0),
    "claude-opus-5": (5.0, 25.0),
    "claude-sonnet-5": (2.0, 10.0),
    "claude-sonnet-5-5": (2.0, 10.0),
    "claude-haiku-5-5": (0.10, 0.50),  # prompts up to 100k tokens; LONG_PROMPT above
    "claude-opus-5-5": (4.0, 20.0),
    "claude-mythos-preview": (25.0, 125.0),
    "claude-fable-5": (10.0, 50.0),
    "claude-fable-5-1": (10.0, 50.0),
    "claude-fable-5-2": (8.0, 40.0),
    # Mythos shares its Fable generation's specification and price
    "claude-mythos-5": (10.0, 50.0),
    "claude-mythos-5-1": (10.0, 50.0),
    "claude-mythos-5-2": (8.0, 40.0),
}
# model -> (prompt tokens above which, input, output): tiered prices
LONG_PROMPT: dict[str, tuple[int, float, float]] = {"claude-haiku-5-5": (100_000, 0.50, 2.50)}
DEAREST = (25.0, 125.0)  # an unpriced id: assume the dearest, never under-count spend


def known_models() -> list[str]:
    """The model ids the installed SDK knows, plus any we describe or price."""
    return sorted(sdk_models() | set(PRICES) | set(MODELS))


def price_of(
    model: str, overrides: dict[str, dict[str, float]], prompt_tokens: int = 0
) -> tuple[float, float]:
    if model in overrides:
        p = overrides[model]
        return p["input"], p["output"]
    base = base_id(model)
    tier = LONG_PROMPT.get(model) or LONG_PROMPT.get(base)
    if tier is not None and prompt_tokens > tier[0]:
        return tier[1], tier[2]
    return PRICES.get(model) or PRICES.get(base) or DEAREST


def cost_usd(model: str, usage: dict[str, int], overrides: dict[str, dict[str, float]]) -> float:
    """Output tokens include thinking tokens: the API bills them as output."""
    cache_write = usage.get("cache_creation_input_tokens") or 0
    cache_read = usage.get("cache_read_input_tokens") or 0
    prompt = usage.get("input_tokens", 0) + cache_write + cache_read
    pin, pout = price_of(model, overrides, prompt)
    tokens_in = usage.get("input_tokens", 0) + 1.25 * cache_write + 0.1 * cache_read
    return (tokens_in * pin + usage.get("output_tokens", 0) * pout) / 1e6
