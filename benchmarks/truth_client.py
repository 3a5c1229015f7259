"""The hand-run benchmarks' own load client, independent of `agent bench` (tools/bench): closed
loop, C connections each sending its next request when its answer is complete, for a fixed time
(the answers in flight then are waited for and counted), one warm-up request per connection first.
Tokens are the server's `usage.completion_tokens`, `ignore_eos` holds every answer at its length,
and every prompt is new, so no prompt or prefix cache serves one. It shares nothing with the
agent's client but the prompt words (tools/bench/random_prompts), so a bug in one is seen against
the other (benchmarks/drift.py). Not for vLLM's CPU build on a 2-core box: httpx's CPU time per
request comes out of a server that busy-polls both cores (benchmarks/campaign_truth.py says
what it measured there)."""

from __future__ import annotations

import asyncio
import random
import time

import httpx

from tools.bench.random_prompts import make_prompt

REQUEST_S = 120.0  # one request's deadline
MAX_TOKENS = 64


async def level_tok_s(
    client: httpx.AsyncClient,
    url: str,
    level: int,
    seconds: float,
    words: int,
    rng: random.Random,
) -> float:
    """Output tokens per second of `level` connections in closed loop for `seconds`."""

    async def one() -> int:
        body = {"prompt": make_prompt(rng, words), "max_tokens": MAX_TOKENS, "temperature": 0}
        reply = await client.post(f"{url}/v1/completions", json=body | {"ignore_eos": True})
        reply.raise_for_status()
        return int(reply.json()["usage"]["completion_tokens"])

    await asyncio.gather(*(one() for _ in range(level)))  # warm-up, outside the window
    start = time.monotonic()
    end, last, tokens = start + seconds, start, 0

    async def connection() -> None:
        nonlocal last, tokens
        while time.monotonic() < end:
            # not `tokens += await one()`: that reads `tokens` before the await and writes it
            # back after, dropping what the other connections added meanwhile
            got = await one()
            tokens += got
            last = time.monotonic()

    await asyncio.gather(*(connection() for _ in range(level)))
    return tokens / (last - start)
