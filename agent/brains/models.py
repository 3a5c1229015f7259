"""What each Claude model id accepts: its output limit and how it thinks.

Sources: the model pages of platform.claude.com (max output, thinking column) and the installed
SDK's `ModelParam` literal for the ids. Prices live in agent/brains/pricing.py.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any

from anthropic.types import ModelParam

from tools.domain.config import ModelConfig

ENABLED, ADAPTIVE, DISABLED = "enabled", "adaptive", "disabled"
BOTH = frozenset({ENABLED, ADAPTIVE, DISABLED})
BUDGET = frozenset({ENABLED, DISABLED})  # extended thinking with a budget, no adaptive mode
ADAPTIVE_ONLY = frozenset({ADAPTIVE, DISABLED})
ALWAYS = frozenset({ADAPTIVE})  # adaptive thinking that cannot be switched off


@dataclass(frozen=True)
class ModelSpec:
    max_output: int
    thinking: frozenset[str]  # the `thinking.type` values the model accepts


K = 1000
MODELS: dict[str, ModelSpec] = {
    "claude-haiku-4-5": ModelSpec(64 * K, BUDGET),
    "claude-opus-4-5": ModelSpec(64 * K, BUDGET),
    "claude-sonnet-4-6": ModelSpec(64 * K, BOTH),
    "claude-opus-4-6": ModelSpec(128 * K, BOTH),
    "claude-opus-4-7": ModelSpec(128 * K, ADAPTIVE_ONLY),
    "claude-opus-4-8": ModelSpec(128 * K, ADAPTIVE_ONLY),
    "claude-opus-5": ModelSpec(128 * K, ADAPTIVE_ONLY),
    "claude-sonnet-5": ModelSpec(128 * K, ADAPTIVE_ONLY),
    "claude-sonnet-5-5": ModelSpec(128 * K, ADAPTIVE_ONLY),
    "claude-haiku-5-5": ModelSpec(128 * K, ADAPTIVE_ONLY),
    "claude-mythos-preview": ModelSpec(128 * K, ADAPTIVE_ONLY),
    "claude-opus-5-5": ModelSpec(128 * K, ALWAYS),
    "claude-fable-5": ModelSpec(128 * K, ALWAYS),
    "claude-fable-5-1": ModelSpec(128 * K, ALWAYS),
    "claude-fable-5-2": ModelSpec(128 * K, ALWAYS),
    "claude-mythos-5": ModelSpec(128 * K, ALWAYS),
    "claude-mythos-5-1": ModelSpec(128 * K, ALWAYS),
    "claude-mythos-5-2": ModelSpec(128 * K, ALWAYS),
}
UNKNOWN = ModelSpec(64 * K, ADAPTIVE_ONLY)  # an id priced in [model.prices] but not listed here


def sdk_models() -> set[str]:
    """The model ids the installed SDK's `ModelParam` literal lists."""
    literal = typing.get_args(ModelParam)[0]
    return set(typing.get_args(literal))


def base_id(model: str) -> str:
    """A dated id (claude-haiku-4-5-20251001) without its date."""
    return model.rsplit("-", 1)[0] if model[-8:].isdigit() else model


def spec_of(model: str) -> ModelSpec:
    return MODELS.get(model) or MODELS.get(base_id(model)) or UNKNOWN


def check_model_config(model: str, cfg: ModelConfig) -> None:
    """ValueError (one line) for a [model] section this model would refuse."""
    spec = spec_of(model)
    if cfg.max_tokens > spec.max_output:
        raise ValueError(
            f"[model] max_tokens = {cfg.max_tokens} is above {model}'s output limit of "
            f"{spec.max_output} tokens"
        )
    mode = resolved_mode(spec, cfg)
    if mode not in spec.thinking:
        accepted = " or ".join(repr(_NAMES[m]) for m in sorted(spec.thinking))
        raise ValueError(
            f"{model} does not accept [model] thinking = {cfg.thinking!r}; use {accepted}"
        )
    if mode == ENABLED and cfg.thinking_budget >= cfg.max_tokens:
        raise ValueError(
            f"[model] thinking_budget = {cfg.thinking_budget} must be below max_tokens = "
            f"{cfg.max_tokens} (thinking counts toward max_tokens)"
        )


_NAMES = {ENABLED: "enabled", ADAPTIVE: "adaptive", DISABLED: "off"}


def resolved_mode(spec: ModelSpec, cfg: ModelConfig) -> str:
    """The `thinking.type` to send: "auto" is adaptive where the model has it, else a budget."""
    if cfg.thinking == "auto":
        return ADAPTIVE if ADAPTIVE in spec.thinking else ENABLED
    return DISABLED if cfg.thinking == "off" else cfg.thinking


def thinking_param(model: str, cfg: ModelConfig) -> dict[str, Any]:
    """The request's `thinking` field."""
    mode = resolved_mode(spec_of(model), cfg)
    if mode == DISABLED:
        return {"type": "disabled"}
    if mode == ENABLED:
        return {"type": "enabled", "budget_tokens": cfg.thinking_budget}
    # summarized: the newer models return empty thinking text unless asked, and watch shows it
    return {"type": "adaptive", "display": "summarized"}
