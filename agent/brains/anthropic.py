"""Claude through the official SDK: streamed calls, extended thinking kept across tool use, prompt
caching, cost accounting, token counts for compaction, and recorded exchanges."""

from __future__ import annotations

import copy
from typing import Any

import anthropic

from agent.brains.base import (
    BrainError,
    BrainUnavailable,
    TokenCount,
    Turn,
    TurnRequest,
    canonical,
    request_delta,
    request_hash,
)
from agent.brains.client import PatientAnthropic
from agent.brains.models import thinking_param
from agent.brains.pricing import cost_usd

USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
EPHEMERAL = {"type": "ephemeral"}
UNCACHEABLE = ("thinking", "redacted_thinking")  # the API refuses cache_control on these
INTERLEAVED = {"anthropic-beta": "interleaved-thinking-2025-05-14"}  # budgeted thinking + tools
WORTH_WAITING = ("overloaded_error", "rate_limit_error", "api_error")


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
        self.client = client or PatientAnthropic()
        self._previous: dict[str, Any] | None = None  # the last canonical request

    def build(self, req: TurnRequest) -> dict[str, Any]:
        """The request body, with cache breakpoints on tools, system and the last message."""
        messages = copy.deepcopy(req.messages)
        _mark_last_cacheable(messages)
        tools = [dict(t) for t in req.tools]
        if tools:
            tools[-1]["cache_control"] = EPHEMERAL
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": req.max_tokens,
            "system": [{"type": "text", "text": req.system, "cache_control": EPHEMERAL}],
            "messages": messages,
            "thinking": thinking_param(self.model, req.config.model),  # the run's [model]
        }
        if tools:
            params["tools"] = tools
        return params

    def headers(self, params: dict[str, Any]) -> dict[str, str]:
        return INTERLEAVED if params["thinking"]["type"] == "enabled" else {}

    async def next_turn(self, req: TurnRequest) -> Turn:
        params = self.build(req)
        canon = canonical(params)
        digest = request_hash(canon)
        delta = request_delta(self._previous, canon)
        self.check(digest, canon)
        try:  # streamed: a non-streamed call with a large max_tokens is refused by the SDK
            async with self.client.messages.stream(
                **params, extra_headers=self.headers(params)
            ) as stream:
                message = await stream.get_final_message()
        except anthropic.APIStatusError as err:
            raise _refused(err) from err
        except anthropic.APIConnectionError as err:
            raise BrainUnavailable(f"cannot reach the Anthropic API: {err}") from err
        self._previous = canon
        response: dict[str, Any] = message.to_dict(mode="json", exclude_none=True)
        usage = usage_of(response.get("usage") or {})
        return Turn(
            content=[_block(b) for b in response["content"]],
            stop_reason=message.stop_reason or "end_turn",
            usage=usage,
            cost_usd=cost_usd(message.model, usage, self.prices),
            model=message.model,
            exchange={
                "request_hash": digest,
                "request": delta,
                "status": 200,
                "stream": True,
                "response": response,
            },
        )

    async def count_tokens(self, req: TurnRequest) -> TokenCount | None:
        """The prompt's size as the API counts it; None (estimate instead) when it cannot."""
        params = self.build(req)
        body = {k: v for k, v in params.items() if k != "max_tokens"}
        digest = request_hash(canonical(body))
        if not self.check_count(digest):
            return None
        try:
            counted = await self.client.messages.count_tokens(
                **body, extra_headers=self.headers(params)
            )
        except anthropic.APIError:
            return None
        exchange = {
            "endpoint": "count_tokens",
            "request_hash": digest,
            "status": 200,
            "response": {"input_tokens": counted.input_tokens},
        }
        return TokenCount(counted.input_tokens, exchange)

    def check(self, digest: str, canon: dict[str, Any]) -> None:
        """A hook for the replay brain: verify the request before it is sent."""

    def check_count(self, digest: str) -> bool:
        """A hook for the replay brain: whether to ask for a token count at all."""
        return True


def usage_of(raw: dict[str, Any]) -> dict[str, int]:
    """The usage keys we account; thinking_tokens is part of output_tokens, shown apart."""
    usage = {k: v for k in USAGE_KEYS if isinstance(v := raw.get(k), int)}
    thinking = (raw.get("output_tokens_details") or {}).get("thinking_tokens")
    if isinstance(thinking, int):
        usage["thinking_tokens"] = thinking
    return usage


def _mark_last_cacheable(messages: list[dict[str, Any]]) -> None:
    """A cache breakpoint on the newest block that may carry one."""
    if not messages:
        return
    for block in reversed(messages[-1]["content"]):
        if block.get("type") not in UNCACHEABLE and not (
            block.get("type") == "text" and not block["text"]
        ):
            block["cache_control"] = EPHEMERAL
            return


def _block(block: dict[str, Any]) -> dict[str, Any]:
    """Keep what the API accepts back as input; thinking blocks go back verbatim (signature)."""
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
    if kind == "thinking":
        return {"type": "thinking", "thinking": block["thinking"], "signature": block["signature"]}
    return block


def _error_of(err: anthropic.APIStatusError) -> dict[str, Any]:
    """The `error` object of an API error body ({} when there is none)."""
    body = err.body if isinstance(err.body, dict) else {}
    error = body.get("error")
    return error if isinstance(error, dict) else {}


def _refused(err: anthropic.APIStatusError) -> BrainError:
    error = _error_of(err)
    waiting = err.status_code in (429, 529) or err.status_code >= 500
    if waiting or error.get("type") in WORTH_WAITING:  # also an error event mid-stream
        return BrainUnavailable(f"the Anthropic API is unavailable: {describe(err)}")
    return BrainError(f"the Anthropic API refused the request: {describe(err)}")


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
    error = _error_of(err)
    status = err.status_code
    if status == 200 and error.get("type") == "overloaded_error":
        status = 529  # an error event in the middle of a stream
    what = names.get(status, "server error" if status >= 500 else "error")
    detail = error.get("message")
    return f"HTTP {status} {what}" + (f": {detail}" if detail else "")
