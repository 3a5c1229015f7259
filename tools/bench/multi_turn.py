"""Multi-turn replay (`--multi-turn`): a dataset's conversations sent turn by turn, each turn's
prompt the whole history so far - every earlier user message and the data's assistant reply -
and the new user message, as a chat client resends it. Turn k+1 therefore starts with turn k's
prompt: a prefix cache serves it, and the prefill grows only by the new text.

Order: the level's C streams are C users; each plays a conversation turn after turn, then takes
the next one. The requests are listed round-robin over the users (position = round x C + user),
so one user's consecutive turns are C places apart: a closed loop of C dispatches in list order
with at most C in flight, so a turn is sent only after the previous turn of its conversation
finished. (Not so in an open loop, which sends on a clock: the sweep refuses that pairing.)
"""

from __future__ import annotations

import random
from typing import Any

from tools.bench.datasets import Dataset
from tools.bench.sample import estimate_tokens

Exchange = tuple[str, str | None]


def turn_rows(
    ds: Dataset,
    seed: int,
    first: int,
    n: int,
    users: int,
    endpoint: str,
    max_tokens: int | None,
) -> tuple[list[list[Any]], int]:
    """n [prompt, prompt_tokens, max_tokens] rows and how many conversations they took, starting
    with the `first`-th of the seed's permutation. `max_tokens` None: the data's reply lengths."""
    talks = ds.conversations
    order = list(range(len(talks)))
    random.Random(f"{seed}/order").shuffle(order)
    rows: list[list[Any]] = []
    cursor = first
    playing: list[list[Exchange]] = [[] for _ in range(max(1, users))]
    turn = [0] * len(playing)
    while len(rows) < n:
        for u in range(len(playing)):
            if len(rows) >= n:
                break
            if turn[u] >= len(playing[u]):
                playing[u], turn[u] = talks[order[cursor % len(order)]], 0
                cursor += 1
            rows.append(_row(playing[u], turn[u], endpoint, max_tokens))
            turn[u] += 1
    return rows, cursor - first


def _row(talk: list[Exchange], k: int, endpoint: str, max_tokens: int | None) -> list[Any]:
    texts: list[str] = []
    messages: list[dict[str, str]] = []
    for user, reply in talk[:k]:
        texts += [user, reply or ""]
        messages += [{"role": "user", "content": user}]
        messages += [{"role": "assistant", "content": reply}] if reply else []
    user, reply = talk[k]
    texts.append(user)
    messages.append({"role": "user", "content": user})
    prompt: Any = messages if endpoint == "chat" else "\n".join(t for t in texts if t)
    tokens = sum(estimate_tokens(t) for t in texts if t)
    out = max_tokens or (estimate_tokens(reply) if reply else None)
    return [prompt, tokens, out]
