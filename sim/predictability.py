"""How predictable a text is, and what that does to speculative acceptance.

A draft model guesses the next tokens; it guesses right more often on text that repeats itself
(code, templated chat, boilerplate) than on random words. The score is measurable on any text:
the share of its tokens (words and punctuation marks, lower-cased) whose 3-token context was
already followed by the same token earlier in the text - what prompt-lookup drafting would have
guessed. Random word prompts score ~0, the built-in chat dataset ~0.2, code-like text ~0.5+.

The hardware profile's acceptance (alpha) is calibrated on random tokens (the seeds' campaign), so
a score of 0 leaves it as it is; a score s lifts it towards ALPHA_CEILING:
alpha(s) = alpha + (ALPHA_CEILING - alpha) * s. docs/sim.md gives the calibration table.
"""

from __future__ import annotations

import re

ALPHA_CEILING = 0.95  # a perfectly predictable text: nearly every draft token accepted
CONTEXT = 3  # tokens of context a guess looks back on
STEP = 0.01  # scores are rounded to this (acceptance tables are cached per value)
_TOKEN = re.compile(r"\w+|[^\w\s]")


def score(text: str) -> float:
    """Share of tokens predicted by an earlier occurrence of their context, in [0, 1]."""
    tokens = [t.lower() for t in _TOKEN.findall(text)]
    if len(tokens) <= CONTEXT:
        return 0.0
    seen: set[tuple[str, ...]] = set()
    hits = 0
    for i in range(CONTEXT, len(tokens)):
        gram = tuple(tokens[i - CONTEXT : i + 1])
        hits += gram in seen
        seen.add(gram)
    return round(hits / (len(tokens) - CONTEXT) / STEP) * STEP


def lift(alpha: float, predictability: float) -> float:
    """The per-token acceptance on text of this predictability (alpha is random tokens')."""
    s = min(max(predictability, 0.0), 1.0)
    return alpha + (max(ALPHA_CEILING, alpha) - alpha) * s
