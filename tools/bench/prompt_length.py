"""How many words a prompt needs to be `input_len` tokens on this server's tokenizer.

The word prompts (random_prompts.py) are one token per word on the common BPE vocabularies, but
not on every model's (llama.cpp's tiny test vocabulary took 81-101 tokens for 64 words). Where the
server can count - POST /tokenize on llama.cpp ({"content"}), vLLM and SGLang ({"prompt"}),
/extras/tokenize on llama-cpp-python ({"input"}); the profile's tokens.tokenize_path - a
sample of word prompts is tokenized once per sweep and the word count scaled until the sample
lands within 1 % of input_len (a BOS token and the like included). Without a tokenizer the word
count is input_len, and the result says which path was taken.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from tools.bench.random_prompts import make_prompt

SAMPLE_WORDS = 4096  # words tokenized per round, in at most SAMPLE_PROMPTS prompts
SAMPLE_PROMPTS = 16  # a word prompt's tokens vary (49-89 for 44 words on a tiny llama.cpp model)
ROUNDS = 4
TOLERANCE = 0.01


@dataclass(frozen=True)
class PromptLength:
    words: int  # words per prompt sent
    tokens: int  # the prompt tokens one prompt is expected to count
    method: Literal["tokenizer", "words"]
    detail: str  # how it was found, one line, for the result

    def info(self) -> dict[str, Any]:
        return {
            "length": self.method,
            "words": self.words,
            "expected_tokens": self.tokens,
            "length_detail": self.detail,
        }


def by_words(input_len: int, why: str) -> PromptLength:
    return PromptLength(input_len, input_len, "words", f"one token per word assumed: {why}")


async def calibrate(
    base_url: str,
    model: str,
    input_len: int,
    path: str | None,
    timeout: float = 10.0,
    total_s: float = 30.0,
) -> PromptLength:
    """Scale the word count with the server's own /tokenize; by words when it cannot count."""
    if not path:
        return by_words(input_len, "no tokenize endpoint for this engine")
    url = base_url.rstrip("/") + path
    rng = random.Random(f"calibrate/{input_len}")
    words, tokens = input_len, 0.0
    async with httpx.AsyncClient(timeout=timeout) as client:
        for round_ in range(ROUNDS):
            k = max(1, min(SAMPLE_PROMPTS, SAMPLE_WORDS // words))
            texts = [make_prompt(rng, words) for _ in range(k)]
            answers = await asyncio.gather(*(_count(client, url, model, t, total_s) for t in texts))
            counts = [count for count, _ in answers if count is not None]
            if len(counts) < k:
                return by_words(input_len, next(why for count, why in answers if count is None))
            tokens = sum(counts) / k
            if abs(tokens - input_len) <= max(1.0, TOLERANCE * input_len) or round_ == ROUNDS - 1:
                break
            words = max(1, min(8 * input_len, round(words * input_len / max(tokens, 1.0))))
    return PromptLength(
        words,
        round(tokens),
        "tokenizer",
        f"{path}: {words} words = {tokens:.1f} tokens (mean of the sample) for input_len "
        f"{input_len}",
    )


async def _count(
    client: httpx.AsyncClient, url: str, model: str, text: str, total_s: float
) -> tuple[int | None, str]:
    """The server's token count of `text`, or None and why not."""
    # the text under each engine's field (vLLM/SGLang, llama.cpp, llama-cpp-python): each
    # ignores the others' (the profile's tokens.text_field names them)
    body = {"model": model, "prompt": text, "content": text, "input": text}
    try:
        async with asyncio.timeout(total_s):  # httpx's timeouts are per read: a trickle passes
            resp = await client.post(url, json=body)
    except TimeoutError:
        return None, f"{url} did not answer within {total_s:g} s"
    except httpx.HTTPError as err:
        return None, f"{url} failed: {type(err).__name__}: {err}"
    if resp.status_code != 200:
        return None, f"{url} answered HTTP {resp.status_code}"
    try:
        obj = resp.json()
        count = obj.get("count")
        return (int(count) if isinstance(count, int) else len(obj["tokens"])), ""
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, f"{url} did not answer with tokens: {resp.text[:80]!r}"
