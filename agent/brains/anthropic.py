"""Claude through the official SDK, with prompt caching, cost accounting and recorded exchanges."""

from __future__ import annotations

import copy
import json
from typing import Any

import anthropic

from agent.brains.base import (
    BrainError,
    Turn,
    TurnRequest,
    canonical,
    request_delta,
    request_hash,
)
from agent.brains.pricing import cost_usd

USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
EPHEMERAL = {"type": "ephemeral"}


class AnthropicBrain:
    name = "anthropic"

    def __init__(
        self,
        model: str,
        prices: dict[str, dict[str, float]] | None = None,
        client: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        self.model = model
        self.prices = prices or {}
        # the SDK retries 408/409/429/5xx and connection errors itself, honouring retry-after
        self.client = client or anthropic.AsyncAnthropic(max_retries=4)
        self._previous: dict[str, Any] | None = None  # the last canonical request

    def build(self, req: TurnRequest) -> dict[str, Any]:
        """The request body, with cache breakpoints on tools, system and the last message."""
        messages = copy.deepcopy(req.messages)
        if messages and messages[-1]["content"]:
            messages[-1]["content"][-1]["cache_control"] = EPHEMERAL
        tools = [dict(t) for t in req.tools]
        if tools:
            tools[-1]["cache_control"] = EPHEMERAL
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": req.max_tokens,
            "system": [{"type": "text", "text": req.system, "cache_control": EPHEMERAL}],
            "messages": messages,
        }
        if tools:
            params["tools"] = tools
        return params

    async def next_turn(self, req: TurnRequest) -> Turn:
        params = self.build(req)
        canon = canonical(params)
        digest = request_hash(canon)
        delta = request_delta(self._previous, canon)
        self.check(digest, canon)
        try:
            raw = await self.client.messages.with_raw_response.create(**params)
        except anthropic.APIStatusError as err:
            raise BrainError(f"the Anthropic API refused the request: {describe(err)}") from err
        except anthropic.APIConnectionError as err:
            raise BrainError(f"cannot reach the Anthropic API: {err}") from err
        self._previous = canon
        message = await raw.parse()
        usage = {k: v for k in USAGE_KEYS if (v := getattr(message.usage, k, None)) is not None}
        return Turn(
            content=[_block(b.model_dump(exclude_none=True)) for b in message.content],
            stop_reason=message.stop_reason or "end_turn",
            usage=usage,
            cost_usd=cost_usd(message.model, usage, self.prices),
            model=message.model,
            exchange={
                "request_hash": digest,
                "request": delta,
                "status": raw.status_code,
                "response": json.loads(raw.http_response.text),
            },
        )

    def check(self, digest: str, canon: dict[str, Any]) -> None:
        """A hook for the replay brain: verify the request before it is sent."""


def _block(block: dict[str, Any]) -> dict[str, Any]:
    """Keep what the API accepts back as input."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block["text"]}
    if kind == "tool_use":
        return {
            "type": "tool_use",
            "id": block["id"],
            "name": block["name"],
            "input": block["input"],
        }
    return block


def describe(err: anthropic.APIStatusError) -> str:
    names = {
        400: "bad request",
        401: "authentication failed (check ANTHROPIC_API_KEY)",
        403: "permission denied",
        404: "not found (check the model name)",
        413: "request too large",
        429: "rate limited",
        529: "overloaded",
    }
    what = names.get(err.status_code, "server error" if err.status_code >= 500 else "error")
    body = err.body if isinstance(err.body, dict) else {}
    detail = (
        (body.get("error") or {}).get("message") if isinstance(body.get("error"), dict) else None
    )
    return f"HTTP {err.status_code} {what}" + (f": {detail}" if detail else "")
