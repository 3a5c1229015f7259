"""Prefix sharing and a cold prefix cache (docs/benchmark.md, "Prefix sharing").

`shared_prefix` N: every request of a sweep starts with the same system prompt of N tokens (the
word prompts' words, one token each where the server's tokenizer calibration says so; a chat
request carries it as a system message), drawn from the sweep's prompt seed - so a server's
prefix cache can serve it, as it serves a deployment's fixed system prompt.

Between measurements the server's prefix cache is emptied where the engine profile says how
(`[prefix_cache] reset = "post"`: SGLang's POST /flush_cache, vLLM's /reset_prefix_cache): every
level then starts cold, and only what its own warm-up and requests put there is reused.
"""

from __future__ import annotations

import asyncio
import random

import httpx

from tools.bench.http import Target
from tools.bench.random_prompts import make_prompt

RESET_TRIES = 5  # SGLang refuses a flush while requests run: the last level's may still end
RESET_WAIT_S = 0.2


def shared_prefix_text(seed: int, tokens: int, words_per_token: float = 1.0) -> str:
    """The sweep's system prompt of `tokens` tokens ('' for 0)."""
    if tokens <= 0:
        return ""
    words = max(1, round(tokens * words_per_token))
    return make_prompt(random.Random(f"{seed}/shared-prefix"), words)


async def reset_cache(url: str, path: str, timeout: float, total_s: float = 30.0) -> str | None:
    """POST the engine's cache-reset endpoint; None when done, else why not (one line). Each
    POST is a whole operation within `total_s` (httpx's timeouts are per read)."""
    target = Target.parse(url)
    last = ""
    async with httpx.AsyncClient(timeout=timeout) as client:
        for _ in range(RESET_TRIES):
            try:
                async with asyncio.timeout(total_s):
                    resp = await client.post(f"{target.url}{path}")
            except TimeoutError:
                return f"prefix cache not reset: POST {path} did not answer within {total_s:g} s"
            except httpx.HTTPError as err:
                return f"prefix cache not reset: POST {path}: {type(err).__name__}: {err}"
            if resp.status_code == 200:
                return None
            last = f"HTTP {resp.status_code} {resp.text.strip()[:120]}"
            if resp.status_code not in (400, 409, 503):  # not "busy": trying again won't help
                break
            await asyncio.sleep(RESET_WAIT_S)
    return f"prefix cache not reset: POST {path} answered {last}"
