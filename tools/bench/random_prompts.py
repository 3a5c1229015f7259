"""Prompts of a given token length without a tokenizer, and the request bodies that carry them.

Each prompt is a number of common English words, each with a leading space. Such words are one
token in the BPE vocabularies of Llama, Qwen, Mistral, GPT and DeepSeek models, so `input_len`
words land near `input_len` tokens; where the server can tokenize, tools/bench/prompt_length.py
scales the word count so they land within a few % on any vocabulary. Prompts are drawn from a
seeded generator and differ from one request to the next from the first word on, so a prefix
cache cannot serve them - and each sweep draws from its own seed (`sweep_seed`), so no sweep
re-sends what an earlier one sent.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any, Literal

import orjson

Endpoint = Literal["completions", "chat"]
PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}

_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "that",
    "with",
    "as",
    "on",
    "by",
    "at",
    "from",
    "his",
    "her",
    "they",
    "this",
    "which",
    "but",
    "not",
    "are",
    "had",
    "have",
    "one",
    "all",
    "were",
    "when",
    "there",
    "can",
    "more",
    "also",
    "new",
    "time",
    "first",
    "year",
    "two",
    "into",
    "other",
    "after",
    "over",
    "only",
    "most",
    "some",
    "people",
    "may",
    "world",
    "many",
    "work",
    "city",
    "state",
    "such",
    "these",
    "like",
    "than",
    "then",
    "out",
    "used",
    "part",
    "made",
    "known",
    "found",
    "each",
    "both",
    "where",
    "life",
    "under",
    "well",
    "great",
    "number",
    "while",
    "early",
    "three",
    "school",
    "water",
    "place",
    "house",
    "name",
    "began",
    "high",
    "again",
    "long",
    "system",
    "later",
    "small",
    "line",
    "during",
    "form",
    "music",
    "song",
    "since",
    "family",
    "game",
    "around",
    "river",
    "being",
    "based",
    "named",
    "area",
    "north",
    "south",
    "west",
    "east",
    "group",
    "often",
    "title",
    "own",
    "order",
    "might",
    "said",
    "light",
    "hand",
    "head",
    "king",
    "party",
    "point",
    "power",
    "role",
    "side",
    "team",
    "today",
    "book",
    "body",
    "death",
]


def make_prompt(rng: random.Random, words: int) -> str:
    return "".join(" " + rng.choice(_WORDS) for _ in range(words)).lstrip()


def sweep_seed(*parts: object) -> int:
    """A prompt seed for one sweep from what makes it unique (the run, the call, the result id):
    the same parts give the same prompts, any other parts prompts no earlier sweep sent."""
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=6).digest()
    return int.from_bytes(digest, "big")


def level_seed(prompt_seed: int, level: int, part: Literal["measured", "warmup"]) -> str:
    """The generator seed of one level's measured or warm-up prompts (random.Random hashes a
    str seed with SHA-512: the same on every machine and Python run)."""
    return f"{prompt_seed}/{level}/{part}"


def request_body(
    model: str,
    prompt: str | list[dict[str, str]],
    max_tokens: int,
    endpoint: Endpoint = "completions",
    ignore_eos: bool = True,
    temperature: float = 0.0,
    extra: dict[str, Any] | None = None,
    prefix: str = "",
) -> bytes:
    """The JSON body vLLM's `bench serve` sends (openai / openai-chat backends); a shared
    `prefix` goes first (a chat: as the system message). A list prompt is a chat's messages so
    far (multi_turn.py)."""
    body: dict[str, Any] = {"model": model}
    if endpoint == "chat":
        system = [{"role": "system", "content": prefix}] if prefix else []
        turns = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        body["messages"] = [*system, *turns]
    else:
        body["prompt"] = f"{prefix} {prompt}" if prefix else prompt
    body.update(
        {
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    if ignore_eos:
        body["ignore_eos"] = True
    if extra:
        body.update(extra)
    return orjson.dumps(body)


def bodies(
    n: int,
    seed: int | str,
    model: str,
    words: int,
    max_tokens: int,
    endpoint: Endpoint = "completions",
    ignore_eos: bool = True,
    temperature: float = 0.0,
    extra: dict[str, Any] | None = None,
    prefix: str = "",
) -> list[bytes]:
    """n request bodies of `words`-word prompts, the same for the same seed (one generator per
    level keeps levels apart); `extra` fields go into every body (e.g. cache_prompt: false)."""
    rng = random.Random(seed)
    style = (endpoint, ignore_eos, temperature, extra, prefix)
    return [request_body(model, make_prompt(rng, words), max_tokens, *style) for _ in range(n)]
