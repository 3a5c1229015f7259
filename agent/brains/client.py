"""The SDK client with a patient retry schedule for an overloaded or rate-limited API.

The SDK retries 408/409/429/5xx and connection errors itself, honouring retry-after; its own
backoff (0.5 s doubling to 8 s) gives up after about 7 s of 529s. For 429 and 529 without a
retry-after this client waits longer, with full jitter so that many clients do not retry in step.
Beyond its retries the loop pauses the run (agent/loop.py, [model] overload_wait_minutes).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import anthropic

Sleep = Callable[[float], Awaitable[None]]
PATIENT = (429, 529)  # rate limited, overloaded: waiting is the cure
RETRIES = 6
FIRST_WAIT_S, MAX_WAIT_S = 2.0, 60.0  # doubling: 2, 4, 8, 16, 32, 60 s at most (before jitter)


def backoff_s(attempt: int, rng: random.Random) -> float:
    """Full jitter: a random wait in [half, all] of the doubled step."""
    step = min(FIRST_WAIT_S * 2.0**attempt, MAX_WAIT_S)
    return step * rng.uniform(0.5, 1.0)


class PatientAnthropic(anthropic.AsyncAnthropic):
    def __init__(
        self, *args: Any, sleep: Sleep = asyncio.sleep, seed: int | None = None, **kwargs: Any
    ) -> None:
        kwargs.setdefault("max_retries", RETRIES)
        super().__init__(*args, **kwargs)
        self.sleep, self.rng = sleep, random.Random(seed)
        self.waited_s = 0.0  # total retry waits, for tests and the run's wait events

    async def _sleep_for_retry(  # the SDK's hook between two attempts of one request
        self, *, retries_taken: int, max_retries: int, options: Any, response: Any
    ) -> None:
        headers = response.headers if response is not None else None
        patient = response is not None and response.status_code in PATIENT
        if patient and self._parse_retry_after_header(headers) is None:
            wait = backoff_s(retries_taken, self.rng)
        else:
            wait = self._calculate_retry_timeout(max_retries - retries_taken, options, headers)
        self.waited_s += wait
        await self.sleep(wait)
