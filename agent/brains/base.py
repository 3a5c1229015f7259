"""The one-method brain protocol, and the request/turn it exchanges with the loop."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from state.fold import RunState
from tools.domain.config import Config


@dataclass
class TurnRequest:
    system: str
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    max_tokens: int
    state: RunState  # read-only: the autopilot plans from the fold, a model from the messages
    config: Config
    purpose: Literal["step", "summary"] = "step"  # "summary": write the compaction summary


@dataclass
class Turn:
    content: list[dict[str, Any]]  # API content blocks: text, tool_use {id, name, input}
    stop_reason: str
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float = 0.0
    model: str = ""
    exchange: dict[str, Any] | None = None  # the HTTP exchange to record (anthropic brain)
    # a planner brain's reason for a call (the autopilot: each start_server's experiment), by its
    # tool_use id: recorded as `planned` events beside the message, read back by the planner
    plans: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        return [b for b in self.content if b.get("type") == "tool_use"]

    @property
    def text(self) -> str:
        return "\n".join(b["text"] for b in self.content if b.get("type") == "text")

    @property
    def thinking(self) -> str:
        """The (summarised) thinking of the turn; its blocks go back to the API verbatim."""
        parts = [b["thinking"] for b in self.content if b.get("type") == "thinking"]
        return "\n\n".join(p for p in parts if p.strip())


@dataclass
class TokenCount:
    """A prompt's size in tokens as the API counts it, and the exchange to record."""

    tokens: int
    exchange: dict[str, Any] | None = None


class Brain(Protocol):
    name: str

    async def next_turn(self, request: TurnRequest) -> Turn: ...


class TokenCounter(Protocol):
    """A brain that can measure a prompt before sending it (compaction asks; None: estimate)."""

    async def count_tokens(self, request: TurnRequest) -> TokenCount | None: ...


class BrainError(Exception):
    """The brain cannot go on (bad credentials, a rejected request); the run saves and exits 1."""

    exchange: dict[str, Any] | None = None  # the refused exchange, recorded: a replay meets it


class PromptTooLong(BrainError):
    """The prompt is past the model's context (HTTP 400 "prompt is too long", 413 request too
    large): the loop compacts the conversation and asks again."""


class BrainUnavailable(BrainError):
    """The API is overloaded, rate-limited or unreachable after the SDK's retries: worth waiting
    for (the loop pauses the run for up to [model] overload_wait_minutes)."""


# --- the canonical request: what is hashed and recorded -------------------------------------------
VOLATILE = ("cache_control",)


def canonical(params: dict[str, Any]) -> dict[str, Any]:
    """The request without volatile fields (cache markers move to the newest message each call)."""
    stripped: dict[str, Any] = _strip(params)
    return stripped


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in VOLATILE}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def request_hash(canon: dict[str, Any]) -> str:
    blob = json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def request_delta(prev: dict[str, Any] | None, canon: dict[str, Any]) -> dict[str, Any]:
    """Only what is new since the previous request: storing whole bodies would grow the log
    quadratically over a long campaign."""
    prev = prev or {}
    delta = {k: v for k, v in canon.items() if k != "messages" and prev.get(k) != v}
    old, new = prev.get("messages", []), canon.get("messages", [])
    if old and new[: len(old)] == old:
        delta["messages_from"] = len(old)
        delta["messages"] = new[len(old) :]
    else:
        delta["messages_from"] = 0
        delta["messages"] = new
    return delta


def apply_delta(prev: dict[str, Any] | None, delta: dict[str, Any]) -> dict[str, Any]:
    """Rebuild a recorded request from the previous one and its delta."""
    out = {k: v for k, v in (prev or {}).items() if k != "messages"}
    out.update({k: v for k, v in delta.items() if k not in ("messages", "messages_from")})
    out["messages"] = (prev or {}).get("messages", [])[: delta["messages_from"]] + delta["messages"]
    return out
