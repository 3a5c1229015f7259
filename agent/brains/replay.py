"""Plays recorded API exchanges back through the real SDK and reports drift.

The SDK is built on httpx2; a MockTransport hands it the recorded responses - as a server-sent
event stream for streamed calls (agent/brains/sse.py) - so parsing, stream accumulation, retries
and error mapping are the SDK's own. Before each call the request the loop built now is hashed and
checked against the recording; on a mismatch the drift is a unified diff against the request
rebuilt from the recording (volatile fields ignored). Token counts (count_tokens) are recorded
exchanges too, answered in their place.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import random
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2

from agent.brains.anthropic import AnthropicBrain
from agent.brains.base import apply_delta
from agent.brains.client import PatientAnthropic
from agent.brains.sse import render_sse


class DriftError(BaseException):
    """The replayed run diverged from the recording; the message holds a readable diff.

    A BaseException, like KeyboardInterrupt: the loop's catch-all for internal errors must not
    swallow it - a drifted replay is over, whatever code it was in."""


@dataclass
class Faults:
    """Inject API faults at `rate` (seeded): the SDK must retry its way through them."""

    rate: float = 0.2
    seed: int = 0
    kinds: tuple[str, ...] = ("429", "500", "529", "timeout", "reset")
    fatal: str | None = None  # "400" or "401": fail the first call for good

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.injected: dict[str, int] = {}


class ReplayBrain(AnthropicBrain):
    name = "replay"

    def __init__(
        self,
        exchanges: list[dict[str, Any]],
        model: str,
        faults: Faults | None = None,
    ) -> None:
        self.exchanges = exchanges
        self.index = 0
        self.faults = faults
        self._recorded: dict[str, Any] | None = None  # the recorded request, rebuilt
        # how the recording ended where its exchanges ran out, when a model call failed there
        # with no exchange kept for it: a call past the last exchange raises it
        self.ending: BaseException | None = None
        transport = httpx2.MockTransport(self._handle)
        client: anthropic.AsyncAnthropic = PatientAnthropic(
            api_key="replay",
            base_url="http://replay.invalid",
            max_retries=8 if faults else 0,
            http_client=httpx2.AsyncClient(transport=transport),
            sleep=_no_wait,  # the retry schedule is the SDK's; waiting it out is not the point
        )
        super().__init__(model, client=client)

    def fresh_session(self) -> None:
        """As after `agent resume`: a new brain has no previous request to send a delta to."""
        self._previous = None

    def check_count(self, digest: str) -> bool:
        """Count where the recording counted; elsewhere the loop estimates, as it did then."""
        if self.index >= len(self.exchanges):
            return False
        recorded = self.exchanges[self.index]
        if recorded.get("endpoint") != "count_tokens":
            return False
        if digest != recorded["request_hash"]:
            raise DriftError(
                f"model call {self.index + 1}: the token count request differs from the recording"
            )
        return True

    def check(self, digest: str, canon: dict[str, Any]) -> None:
        if self.index >= len(self.exchanges):
            if self.ending is not None:  # the recorded call failed: no exchange was kept
                raise self.ending
            raise DriftError(
                f"the loop made model call {self.index + 1}; the recording has "
                f"only {len(self.exchanges)}"
            )
        recorded = self.exchanges[self.index]
        if recorded.get("endpoint") == "count_tokens":
            raise DriftError(
                f"model call {self.index + 1}: the recording counted tokens here; the loop did not"
            )
        self._recorded = apply_delta(self._recorded, recorded["request"])
        if digest != recorded["request_hash"]:
            raise DriftError(
                f"model call {self.index + 1}: the request differs from the "
                f"recording\n{unified(self._recorded, canon)}"
            )

    def _handle(self, request: httpx2.Request) -> httpx2.Response:
        faults = self.faults
        if faults is not None:
            if faults.fatal:
                return _error(int(faults.fatal), faults)
            if faults.rng.random() < faults.rate:
                kind = faults.rng.choice(faults.kinds)
                faults.injected[kind] = faults.injected.get(kind, 0) + 1
                if kind == "timeout":
                    raise httpx2.ReadTimeout("injected timeout", request=request)
                if kind == "reset":
                    raise httpx2.RemoteProtocolError("injected connection reset", request=request)
                return _error(int(kind), faults)
        recorded = self.exchanges[self.index]
        self.index += 1
        if recorded.get("stream"):
            sse = render_sse(recorded["response"])
            return httpx2.Response(200, content=sse, headers={"content-type": "text/event-stream"})
        return httpx2.Response(recorded.get("status", 200), json=recorded["response"])


async def _no_wait(seconds: float) -> None:
    await asyncio.sleep(0)


def _error(status: int, faults: Faults) -> httpx2.Response:
    kinds = {
        400: "invalid_request_error",
        401: "authentication_error",
        429: "rate_limit_error",
        500: "api_error",
        529: "overloaded_error",
    }
    body = {"type": "error", "error": {"type": kinds[status], "message": f"injected {status}"}}
    headers = {"retry-after-ms": "5"} if status == 429 else {}  # short, so tests stay quick
    return httpx2.Response(status, json=body, headers=headers)


def unified(recorded: Any, actual: Any) -> str:
    a = json.dumps(recorded, indent=1, sort_keys=True, ensure_ascii=False).splitlines()
    b = json.dumps(actual, indent=1, sort_keys=True, ensure_ascii=False).splitlines()
    return "\n".join(difflib.unified_diff(a, b, "recorded", "replayed", n=2, lineterm=""))
