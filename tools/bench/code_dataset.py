"""The built-in `code` dataset: code-review prompts made here from a seed, like `chat`.

Source code repeats itself (the same shapes, names and keywords line after line), which is what
speculative decoding feeds on: next to `random` (nothing to guess) and `chat` (some repetition)
it is the third point of the acceptance calibration (docs/sim.md). Prompts: an instruction and
6-40 small Python methods; answers lognormal, median ~160 tokens.
"""

from __future__ import annotations

import math
import random

from tools.bench.sample import Sample, estimate_tokens

_ASKS = [
    "Fix the bug in this Python code and explain the change:",
    "Review this code and suggest improvements:",
    "Write unit tests for the following methods:",
    "Add type hints and docstrings to this code:",
]
_NAMES = ["user", "order", "item", "price", "count", "total"]
_BODIES = [
    [
        "def get_{a}_{b}(self, {a}, {b}=None):",
        "    if {b} is None:",
        "        {b} = self.{b}",
        "    return self.{a}s.get({a}, {b})",
    ],
    [
        "def set_{a}(self, {a}):",
        "    if not {a}:",
        '        raise ValueError("{a} is required")',
        "    self.{a} = {a}",
    ],
    [
        "def total_{a}(self):",
        "    total = 0",
        "    for {b} in self.{b}s:",
        "        total += {b}.{a}",
        "    return total",
    ],
]
ANSWER_MEDIAN, ANSWER_SIGMA, ANSWER_CLIP = 160.0, 0.6, (16, 1024)


def code_prompt(rng: random.Random, functions: int) -> str:
    lines = [rng.choice(_ASKS), "", "class Store:"]
    for _ in range(functions):
        a, b = rng.sample(_NAMES, 2)
        lines += ["    " + line.format(a=a, b=b) for line in rng.choice(_BODIES)] + [""]
    return "\n".join(lines)


def code_samples(rng: random.Random, n: int) -> list[Sample]:
    out = []
    for _ in range(n):
        text = code_prompt(rng, rng.randint(6, 40))
        answer = round(rng.lognormvariate(math.log(ANSWER_MEDIAN), ANSWER_SIGMA))
        out.append(Sample(text, estimate_tokens(text), min(max(answer, 16), 1024)))
    return out
