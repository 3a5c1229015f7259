"""The prefix cache: prompts that start alike share the KV of their common start.

SGLang keeps a radix tree of every prompt it served; a new request's prefill computes only the
tokens after its longest cached prefix. Modelled here in pages of PAGE tokens (vLLM's block
hashing, SGLang with a page size): a page is keyed by the hash of everything up to its end, so a
page matches only when the whole prefix before it matches. Least recently used pages are evicted
beyond the capacity (the KV pool). `flush` empties it, as SGLang's POST /flush_cache does.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

PAGE = 16  # tokens per cached page


def page_keys(tokens: Sequence[str]) -> list[int]:
    """One key per full page: the hash of the tokens up to the page's end (chained)."""
    keys: list[int] = []
    key = 0
    for start in range(0, len(tokens) - PAGE + 1, PAGE):
        key = hash((key, *tokens[start : start + PAGE]))
        keys.append(key)
    return keys


def cacheable(prompt_tokens: int, cached: int) -> int:
    """Cached tokens a prefill may skip: at least one token is always computed (for the logits)."""
    return max(0, min(cached, prompt_tokens - 1))


class PrefixCache:
    def __init__(self, capacity_tokens: int) -> None:
        self.capacity = max(0, capacity_tokens // PAGE)  # in pages
        self.pages: OrderedDict[int, None] = OrderedDict()
        self.hit_tokens = 0  # for the server's counters
        self.query_tokens = 0

    def match(self, keys: Sequence[int]) -> int:
        """Tokens of the longest cached prefix (touching its pages: recently used)."""
        n = 0
        for key in keys:
            if key not in self.pages:
                break
            self.pages.move_to_end(key)
            n += 1
        return n * PAGE

    def insert(self, keys: Sequence[int]) -> None:
        for key in keys:
            self.pages[key] = None
            self.pages.move_to_end(key)
        while len(self.pages) > self.capacity:
            self.pages.popitem(last=False)

    def flush(self) -> None:
        self.pages.clear()

    @property
    def tokens(self) -> int:
        return len(self.pages) * PAGE
