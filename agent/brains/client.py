"""The SDK client with a patient retry schedule for an overloaded or rate-limited API.

The SDK retries 408/409/429/5xx and connection errors itself, honouring retry-after; its own
backoff (0.5 s doubling to 8 s) gives up after about 7 s of 529s. For 429 and 529 without a
retry-after this client waits longer, with full jitter so that many clients do not retry in step;
a retry-after is honoured up to RETRY_AFTER_MAX_S. The brain retries a stream that broke after it
started (the SDK's retries cover the request, not the stream) on the same schedule. Each wait is
announced (`on_wait`: the run logs a model_wait event with the next try's time) and is a plain
sleep the loop can cancel: a stop or a budget does not wait for it. Beyond these retries the loop
pauses the run (agent/loop.py, [model] overload_wait_minutes).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import anthropic

Sleep = Callable[[float], Awaitable[None]]
OnWait = Callable[[str, float], None]  # (why, seconds until the next try)
PATIENT = (429, 529)  # rate limited, overloaded: waiting is the cure
RETRIES = 6
FIRST_WAIT_S, MAX_WAIT_S = 2.0, 60.0  # doubling: 2, 4, 8, 16, 32, 60 s at most (before jitter)
RETRY_AFTER_MAX_S = 600.0  # a retry-after of a day must not hold one request for a day
STATUS_WORDS = {
    400: "bad request",
    401: "authentication failed (check ANTHROPIC_API_KEY)",
    403: "permission denied",
    404: "not found (check the model name)",
    408: "request timeout",
    409: "conflict",
    413: "request too large",
    429: "rate limited",
    529: "overloaded",
}


def status_words(status: int) -> str:
    """HTTP 529 overloaded, HTTP 503 server error, ..."""
    what = STATUS_WORDS.get(status, "server error" if status >= 500 else "error")
    return f"HTTP {status} {what}"


def backoff_s(attempt: int, rng: random.Random) -> float:
    """Full jitter: a random wait in [half, all] of the doubled step."""
    step = min(FIRST_WAIT_S * 2.0**attempt, MAX_WAIT_S)
    return step * rng.uniform(0.5, 1.0)


STALL_TIMEOUT_S = 90.0  # [model] stall_timeout_s's default


def stall_timeout(seconds: float) -> anthropic.Timeout:
    """The SDK's timeouts with the read timeout - the longest wait for the next bytes of a
    response, a streamed one's included - at `seconds`: a stall (the connection open, nothing
    sent) ends there as a broken stream, retried, instead of after the SDK's 600 s."""
    default = anthropic.DEFAULT_TIMEOUT
    return anthropic.Timeout(
        connect=default.connect, read=seconds, write=default.write, pool=default.pool
    )


class PatientAnthropic(anthropic.AsyncAnthropic):
    def __init__(
        self, *args: Any, sleep: Sleep = asyncio.sleep, seed: int | None = None, **kwargs: Any
    ) -> None:
        kwargs.setdefault("max_retries", RETRIES)
        kwargs.setdefault("timeout", stall_timeout(STALL_TIMEOUT_S))
        super().__init__(*args, **kwargs)
        self.sleep, self.rng = sleep, random.Random(seed)
        self.waited_s = 0.0  # total retry waits, for tests and the run's wait events
        self.on_wait: OnWait | None = None

    async def _sleep_for_retry(  # the SDK's hook between two attempts of one request
        self, *, retries_taken: int, max_retries: int, options: Any, response: Any
    ) -> None:
        headers = response.headers if response is not None else None
        patient = response is not None and response.status_code in PATIENT
        retry_after = self._parse_retry_after_header(headers)
        if patient and retry_after is None:
            wait = backoff_s(retries_taken, self.rng)
        else:
            wait = self._calculate_retry_timeout(max_retries - retries_taken, options, headers)
        why = status_words(response.status_code) if response is not None else "connection failed"
        await self.wait(min(wait, RETRY_AFTER_MAX_S), f"the Anthropic API: {why}")

    async def wait(self, seconds: float, why: str) -> None:
        """One wait before the next try, announced first."""
        self.waited_s += seconds
        if self.on_wait is not None:
            self.on_wait(why, seconds)
        await self.sleep(seconds)
