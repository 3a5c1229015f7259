"""Where prompts come from: `random` (random_prompts.py), a ShareGPT-format JSON file, a JSONL
file, or the built-in `chat` and `code` datasets (chat_dataset.py, code_dataset.py).

A dataset is a list of Samples (prompt text, its token estimate, the answer's length). Each
level of a sweep takes its own slice of one permutation of the dataset drawn from the sweep's
prompt seed, so levels never repeat each other and each sweep (its own seed) sends them in
another order; `chat` is generated from the seed, so no sweep ever re-sends another's prompts.
A file smaller than a sweep needs is reused in order and the result says so (`notes`).

Token counts without a tokenizer: words and punctuation marks (sample.estimate_tokens); the
server's usage message, when it sends one, is what the metrics count.

ShareGPT format: a JSON list of {"conversations": [{"from": "human"|"gpt", "value": TEXT}, ...]}
(vLLM's `--dataset-name sharegpt`): the first human turn is the prompt, the reply after it gives
the output length. JSONL: one object a line, {"prompt": TEXT, "output_len": N (optional)} or
{"messages": [{"role", "content"}, ...]} (the last user message is the prompt, an assistant
message after it gives the output length).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.bench.chat_dataset import chat_samples
from tools.bench.code_dataset import code_samples
from tools.bench.sample import Sample, estimate_tokens

KINDS = ("random", "chat", "code", "sharegpt", "jsonl")
BUILT_IN = ("random", "chat", "code")  # generated here from the seed: no file


class DatasetError(ValueError):
    """A dataset that cannot be used; one line for the user."""


@dataclass(frozen=True)
class Dataset:
    kind: str  # random | chat | sharegpt | jsonl
    spec: str  # as given: "sharegpt:FILE"
    digest: str  # the file's content hash ("" for random and chat): what compare checks
    samples: list[Sample]  # [] for random and chat (generated per level)
    # every entry's exchanges [(user, assistant or None)], for multi-turn replay (multi_turn.py)
    conversations: list[list[tuple[str, str | None]]] = field(default_factory=list)


def parse_spec(spec: str) -> tuple[str, str]:
    """'sharegpt:FILE' -> ('sharegpt', 'FILE'); raises DatasetError on an unknown kind."""
    kind, _, path = spec.partition(":")
    if kind not in KINDS:
        raise DatasetError(
            f"unknown dataset {spec!r}: random, chat, code, sharegpt:FILE or jsonl:FILE"
        )
    if kind in ("sharegpt", "jsonl") and not path:
        raise DatasetError(f"dataset {kind} needs a file: {kind}:FILE")
    if kind in BUILT_IN and path:
        raise DatasetError(f"dataset {kind} takes no file, got {spec!r}")
    return kind, path


def load(spec: str) -> Dataset:
    kind, path = parse_spec(spec)
    if kind in BUILT_IN:
        return Dataset(kind, spec, "", [])
    try:
        raw = Path(path).read_bytes()
    except OSError as err:
        raise DatasetError(f"cannot read dataset {path}: {err.strerror or err}") from None
    talks: list[list[tuple[str, str | None]]] = []
    samples = _sharegpt(raw, path, talks) if kind == "sharegpt" else _jsonl(raw, path, talks)
    if not samples:
        raise DatasetError(f"dataset {path} has no usable prompt")
    return Dataset(kind, spec, hashlib.sha256(raw).hexdigest()[:16], samples, talks)


def level_samples(ds: Dataset, seed: int, offset: int, n: int) -> list[Sample]:
    """n samples starting at `offset` of the seed's permutation (offsets past the end wrap)."""
    if ds.kind == "chat":
        return chat_samples(random.Random(f"{seed}/chat/{offset}"), n)
    if ds.kind == "code":
        return code_samples(random.Random(f"{seed}/code/{offset}"), n)
    order = list(range(len(ds.samples)))
    random.Random(f"{seed}/order").shuffle(order)
    return [ds.samples[order[(offset + i) % len(order)]] for i in range(n)]


def _sharegpt(raw: bytes, path: str, talks: list[list[tuple[str, str | None]]]) -> list[Sample]:
    try:
        data = json.loads(raw)
    except ValueError as err:
        raise DatasetError(f"{path} is not JSON: {err}") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: a ShareGPT file is a JSON list of {{'conversations': [...]}}")
    samples = []
    for entry in data:
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list):
            continue
        roles = [_role(t.get("from")) for t in turns if isinstance(t, dict)]
        texts = [str(t.get("value") or "") for t in turns if isinstance(t, dict)]
        sample = _first_exchange(roles, texts)
        if sample is not None:
            samples.append(sample)
            talks.append(exchanges(roles, texts))
    return samples


def _jsonl(raw: bytes, path: str, talks: list[list[tuple[str, str | None]]]) -> list[Sample]:
    samples = []
    for number, line in enumerate(raw.decode(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row: Any = json.loads(line)
        except ValueError:
            raise DatasetError(f"{path}:{number} is not a JSON object") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{path}:{number} is not a JSON object")
        if isinstance(row.get("prompt"), str):
            out = row.get("output_len")
            if out is not None and (not isinstance(out, int) or out < 1):
                raise DatasetError(f"{path}:{number}: output_len must be a positive integer")
            samples.append(Sample(row["prompt"], estimate_tokens(row["prompt"]), out))
            talks.append([(row["prompt"], None)])
        elif isinstance(row.get("messages"), list):
            msgs = [m for m in row["messages"] if isinstance(m, dict)]
            roles = [_role(m.get("role")) for m in msgs]
            sample = _last_exchange(roles, [str(m.get("content") or "") for m in msgs])
            if sample is None:
                raise DatasetError(f"{path}:{number}: no user message in `messages`")
            samples.append(sample)
            talks.append(exchanges(roles, [str(m.get("content") or "") for m in msgs]))
        else:
            raise DatasetError(f"{path}:{number}: needs a 'prompt' string or a 'messages' list")
    return samples


def _role(name: Any) -> str:
    return {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}.get(
        str(name), "other"
    )


def exchanges(roles: list[str], texts: list[str]) -> list[tuple[str, str | None]]:
    """A conversation's (user, the assistant's reply or None) pairs, in order."""
    out: list[tuple[str, str | None]] = []
    for i, role in enumerate(roles):
        if role == "user" and texts[i].strip():
            out.append((texts[i], None))
        elif role == "assistant" and out and out[-1][1] is None:
            out[-1] = (out[-1][0], texts[i])
    return out


def _first_exchange(roles: list[str], texts: list[str]) -> Sample | None:
    for i, role in enumerate(roles):
        if role == "user" and texts[i].strip():
            answer = next(
                (texts[j] for j in range(i + 1, len(roles)) if roles[j] == "assistant"), ""
            )
            out = estimate_tokens(answer) if answer.strip() else None
            return Sample(texts[i], estimate_tokens(texts[i]), out)
    return None


def _last_exchange(roles: list[str], texts: list[str]) -> Sample | None:
    users = [i for i, r in enumerate(roles) if r == "user" and texts[i].strip()]
    if not users:
        return None
    i = users[-1]
    answer = next((texts[j] for j in range(i + 1, len(roles)) if roles[j] == "assistant"), "")
    return Sample(texts[i], estimate_tokens(texts[i]), estimate_tokens(answer) if answer else None)
