"""Prompts of a given token length without a tokenizer, and the request bodies that carry them.

Each prompt is `input_len` common English words, each with a leading space. Such words are one
token in the BPE vocabularies of Llama, Qwen, Mistral, GPT and DeepSeek models, so the server's
own count (usage.prompt_tokens, which is what the metrics use) lands within a few tokens of the
target (chat templates add their own). Prompts are drawn from a seeded generator and differ from
one request to the next from the first word on, so a prefix cache cannot serve them.
"""

from __future__ import annotations

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


def make_prompt(rng: random.Random, input_len: int) -> str:
    return "".join(" " + rng.choice(_WORDS) for _ in range(input_len)).lstrip()


def request_body(
    model: str,
    prompt: str,
    max_tokens: int,
    endpoint: Endpoint = "completions",
    ignore_eos: bool = True,
    temperature: float = 0.0,
    extra: dict[str, Any] | None = None,
) -> bytes:
    """The JSON body vLLM's `bench serve` sends (openai / openai-chat backends)."""
    body: dict[str, Any] = {"model": model}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
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
    seed: int,
    model: str,
    input_len: int,
    max_tokens: int,
    endpoint: Endpoint = "completions",
    ignore_eos: bool = True,
    temperature: float = 0.0,
) -> list[bytes]:
    """n request bodies, the same for the same seed (one generator per level keeps levels apart)."""
    rng = random.Random(seed)
    return [
        request_body(
            model, make_prompt(rng, input_len), max_tokens, endpoint, ignore_eos, temperature
        )
        for _ in range(n)
    ]
