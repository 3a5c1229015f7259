"""Claude through the official SDK: streamed calls, extended thinking kept across tool use, prompt
caching, cost accounting, token counts for compaction, and recorded exchanges."""

from __future__ import annotations

import asyncio
import copy
import random
import re
from typing import Any

import anthropic
import httpx2

from agent.brains.base import (
    BrainError,
    BrainUnavailable,
    PromptTooLong,
    TokenCount,
    Turn,
    TurnRequest,
    canonical,
    request_delta,
    request_hash,
)
from agent.brains.client import OnWait, PatientAnthropic, backoff_s, status_words
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
TOO_LONG = re.compile(r"prompt is too long", re.IGNORECASE)
# what a broken stream raises inside the SDK's parser: junk JSON, events out of order, an index
# past the blocks, a message that never started (get_final_message asserts one)
MALFORMED = (
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    RuntimeError,
    AssertionError,
)


_RNG = random.Random()  # jitter for a client that is not a PatientAnthropic


class StreamBroken(Exception):
    """A stream that started and did not end with message_stop: cut, dropped or malformed."""


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
        self._previous: dict[str, Any] | None = None  # the last canonical request recorded
        self.on_wait: OnWait | None = None  # told of each wait before a retry (the run logs it)

    def notify_waits(self, on_wait: OnWait) -> None:
        """Announce every retry wait, the SDK's and the stream's, to `on_wait`."""
        self.on_wait = on_wait
        if isinstance(self.client, PatientAnthropic):
            self.client.on_wait = on_wait

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
        try:
            message = await self._stream_retrying(params)
        except anthropic.APIStatusError as err:
            refused = _refused(err)
            if not isinstance(refused, BrainUnavailable) and err.status_code >= 400:
                # recorded: a replay is refused the same way, and the next delta builds on it
                refused.exchange = {
                    "request_hash": digest,
                    "request": delta,
                    "status": err.status_code,
                    "response": err.body if isinstance(err.body, dict) else {},
                }
                self._previous = canon
            raise refused from err
        except anthropic.APIConnectionError as err:
            raise BrainUnavailable(f"cannot reach the Anthropic API: {err}") from err
        self._previous = canon
        response: dict[str, Any] = message.to_dict(mode="json", exclude_none=True)
        usage = usage_of(response.get("usage") or {})
        return Turn(
            content=[_block(b) for b in response["content"]],
            stop_reason=str(message.stop_reason),  # set: the stream reached message_stop
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

    async def _stream_retrying(self, params: dict[str, Any]) -> Any:
        """The final message of a complete stream. A stream that breaks after it started is
        tried again on the overload schedule (the SDK retries the request, not the stream);
        past the client's retries the API counts as unavailable and the loop pauses."""
        retries = self.client.max_retries
        for attempt in range(retries + 1):
            try:
                return await self._stream_once(params)
            except StreamBroken as err:
                if attempt >= retries:
                    tries = f" ({attempt + 1} tries)" if attempt else ""
                    raise BrainUnavailable(f"the Anthropic API: {err}{tries}") from err
                patient = self.client if isinstance(self.client, PatientAnthropic) else None
                wait = backoff_s(attempt, patient.rng if patient else _RNG)
                if patient is not None:
                    await patient.wait(wait, f"the Anthropic API: {err}")
                else:
                    if self.on_wait is not None:
                        self.on_wait(f"the Anthropic API: {err}", wait)
                    await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    async def _stream_once(self, params: dict[str, Any]) -> Any:
        """One streamed call, read to message_stop; StreamBroken when it ends any other way.
        Streamed: a non-streamed call with a large max_tokens is refused by the SDK."""
        events, stopped, opened = 0, False, False
        try:
            async with self.client.messages.stream(
                **params, extra_headers=self.headers(params)
            ) as stream:
                opened = True  # the response began: what fails from here on is the stream's
                async for event in stream:
                    events += 1
                    stopped = stopped or event.type == "message_stop"
                if not stopped:  # a clean end of the body before message_stop: cut short
                    raise StreamBroken(f"the stream ended before message_stop ({events} events)")
                message = await stream.get_final_message()
                if message.stop_reason is None:  # message_stop without a message_delta
                    raise StreamBroken("the stream reached message_stop without a stop_reason")
                return message
        except anthropic.APIStatusError as err:
            if err.status_code == 200 and _error_of(err).get("type") in WORTH_WAITING:
                raise StreamBroken(f"an error event mid-stream: {describe(err)}") from err
            raise
        except StreamBroken:
            raise
        except (anthropic.APIConnectionError, httpx2.TransportError) as err:
            # before the response: the API cannot be reached (the caller pauses on it); after,
            # the stream broke - the SDK wraps a failed read of the body (anthropic >= 2.17) or
            # lets httpx's error through (earlier ones)
            if isinstance(err, anthropic.APIConnectionError) and not opened:
                raise
            cause = err.__cause__ if isinstance(err, anthropic.APIConnectionError) else err
            cause = cause or err
            if isinstance(cause, httpx2.ReadTimeout):  # open and silent past [model] stall
                raise StreamBroken(
                    f"the stream stalled after {events} events: no bytes within the read "
                    "deadline ([model] stall_timeout_s)"
                ) from err
            raise StreamBroken(
                f"the connection dropped mid-stream after {events} events "
                f"({type(cause).__name__}: {cause})"
            ) from err
        except MALFORMED as err:
            raise StreamBroken(
                f"a malformed stream after {events} events ({type(err).__name__}: {err})"
            ) from err

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
            "input": block.get("input"),  # to_dict drops a null input (the model's mistake)
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
    if err.status_code == 413 or TOO_LONG.search(str(error.get("message") or "")):
        return PromptTooLong(f"the prompt is past the model's context: {describe(err)}")
    return BrainError(f"the Anthropic API refused the request: {describe(err)}")


def describe(err: anthropic.APIStatusError) -> str:
    error = _error_of(err)
    status = err.status_code
    if status == 200 and error.get("type") == "overloaded_error":
        status = 529  # an error event in the middle of a stream
    detail = error.get("message")
    return status_words(status) + (f": {detail}" if detail else "")
