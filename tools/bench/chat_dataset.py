"""The built-in `chat` dataset: chat-like prompts made here, deterministically, from a seed.

Why built in: no download, no licence, the same on every machine, and endless (each sweep's
seed makes new prompts). Lengths are lognormal like ShareGPT's (a few long prompts, many short
ones): prompts median ~90 tokens, answers median ~180 tokens, clipped to [8, 1536] / [8, 1024].
The text comes from a small grammar of questions and context sentences over a fixed vocabulary:
natural enough for a tokenizer to see English, and repetitive the way real chat traffic is (the
same openings, the same topics), which is what speculative decoding and prefix caches feed on.
"""

from __future__ import annotations

import math
import random

from tools.bench.sample import Sample, estimate_tokens

PROMPT_MEDIAN, PROMPT_SIGMA, PROMPT_CLIP = 90.0, 1.1, (8, 1536)
ANSWER_MEDIAN, ANSWER_SIGMA, ANSWER_CLIP = 180.0, 0.8, (8, 1024)

_TOPICS = [
    "a binary search tree",
    "the French revolution",
    "photosynthesis",
    "a REST API",
    "compound interest",
    "a sourdough starter",
    "the water cycle",
    "garbage collection in Java",
    "a marathon training plan",
    "the causes of inflation",
    "a SQL join",
    "climate change",
    "a job interview",
    "quantum entanglement",
    "a wedding speech",
    "the immune system",
]
_ASKS = [
    "Can you explain {t} in simple terms?",
    "What is the best way to learn about {t}?",
    "Write a short summary of {t}.",
    "How would you describe {t} to a ten year old?",
    "What are the most common mistakes people make with {t}?",
    "Give me three examples of {t} and explain each one.",
    "Compare {t} with {u} and list the main differences.",
    "I need help with {t}. Where should I start?",
]
_CONTEXT = [
    "I am a student and I have an exam next week.",
    "My manager asked me to prepare a presentation about this.",
    "I have read a few articles but I am still confused.",
    "Please keep the answer short and use bullet points.",
    "I tried to understand {t} yesterday but it did not make sense to me.",
    "Last time someone told me that {u} works the same way, is that true?",
    "The explanation should be clear, friendly and practical.",
    "Here is what I have so far: {t} is related to {u} in some way.",
    "Could you also add an example that I can try at home?",
    "I would like to understand the reasons, not only the facts.",
]


def chat_samples(rng: random.Random, n: int) -> list[Sample]:
    out = []
    for _ in range(n):
        want = _lognormal(rng, PROMPT_MEDIAN, PROMPT_SIGMA, PROMPT_CLIP)
        text = _prompt(rng, want)
        answer = _lognormal(rng, ANSWER_MEDIAN, ANSWER_SIGMA, ANSWER_CLIP)
        out.append(Sample(text, estimate_tokens(text), answer))
    return out


def _lognormal(rng: random.Random, median: float, sigma: float, clip: tuple[int, int]) -> int:
    value = round(rng.lognormvariate(math.log(median), sigma))
    return min(max(value, clip[0]), clip[1])


def _prompt(rng: random.Random, tokens: int) -> str:
    topic, other = rng.sample(_TOPICS, 2)
    parts = [rng.choice(_ASKS).format(t=topic, u=other)]
    used = estimate_tokens(parts[0])
    while used < tokens:
        sentence = rng.choice(_CONTEXT).format(t=topic, u=rng.choice(_TOPICS))
        parts.insert(len(parts) - 1 if rng.random() < 0.5 else len(parts), sentence)
        used += estimate_tokens(sentence)
    return " ".join(parts)
