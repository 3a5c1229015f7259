"""Read a vLLM `bench serve --save-result` JSON (one concurrency level) into our Point.

vLLM's flat keys are ours, so they are copied as they are. What vLLM does not store is derived:
- achieved_concurrency = mean_e2el_ms x completed / duration (= sum(e2el) / dur, exactly), when
  vLLM reported e2el (it does with --percentile-metrics including e2el), else left out;
- early_eos from output_lens against the max_tokens asked for;
- errors: vLLM keeps one string per request ("" for a success) -> {kind: count}, the kind being
  the message's first words;
- level_failed by our rule (metrics.level_failed: more than 1 % of the requests failed).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tools.bench.metrics import level_failed

DROP = ("itls", "generated_texts")  # per-token and text arrays: large, not needed here


def is_vllm_result(obj: Any) -> bool:
    return isinstance(obj, dict) and "output_throughput" in obj and "points" not in obj


def error_kind(message: str) -> str:
    words = message.strip().split()
    return ("vllm: " + " ".join(words[:4]))[:60] if words else "vllm: unknown"


def point_from_vllm(
    obj: dict[str, Any], level: int | None, max_tokens: int | None
) -> dict[str, Any]:
    point = {k: v for k, v in obj.items() if k not in DROP}
    conc = obj.get("max_concurrency")
    point["max_concurrency"] = int(conc if conc is not None else (level or 0))
    completed = int(obj.get("completed") or 0)
    point["completed"] = completed
    messages = [e for e in obj.get("errors") or [] if e]
    point["failed"] = int(obj.get("failed", len(messages)) or 0)
    kinds = Counter(error_kind(m) for m in messages)
    samples: dict[str, str] = {}
    for m in messages:
        samples.setdefault(error_kind(m), m[:300])
    point["errors"] = dict(kinds)
    point["error_samples"] = samples
    dur = float(obj.get("duration") or 0.0)
    if "mean_e2el_ms" in obj and dur > 0:
        point["achieved_concurrency"] = float(obj["mean_e2el_ms"]) / 1000 * completed / dur
    out_lens = obj.get("output_lens") or []
    if max_tokens:
        point["early_eos"] = sum(1 for n in out_lens if 0 < n < max_tokens)
    point["level_failed"] = level_failed(completed, point["failed"])
    point["request_rate"] = str(obj.get("request_rate", "inf"))
    return point
