"""The metrics of one concurrency level, exactly as vLLM's `bench serve` computes them.

Formulas (shared/reference/serving.md, vllm/benchmarks/serve.py `calculate_metrics`):
- success = HTTP 200 and at least one `choices` message; aggregates are over successes only.
- tpot = (e2el - ttft) / (output_tokens - 1), only when output_tokens > 1.
- itl is pooled over all successful requests (per chunk, not per token).
- request_throughput = completed / dur; output_throughput = sum(out) / dur;
  total_token_throughput = (sum(prompt) + sum(out)) / dur; dur = first dispatch to last completion.
- mean / median / std (population) / percentiles (linear interpolation, numpy's default) in ms;
  an empty list gives 0, as numpy does for vLLM's `np.mean(x or 0)`.
- max_output_tokens_per_s / max_concurrent_requests: vLLM's one-second buckets; like vLLM it
  counts streamed messages, not tokens, in the buckets.
Goodput (vLLM's --goodput): request_goodput = requests meeting every SLO set / dur; ours:
slo_attainment = that count / requests sent (a failed request misses the SLO).
Ours on top: achieved_concurrency = sum(e2el) / dur (Little's law), early_eos, errors by kind,
client CPU, chunks and tokens per chunk, usage_counted (successes whose tokens were counted from
the chunks: the server sent no usage message), and the verdict level_failed: more than
FAILED_SHARE of the requests failed (a level that lost requests measured a different load), or
the level's deadline cut it (tools/bench/deadlines.py).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from tools.bench.deadlines import LEVEL_DEADLINE
from tools.bench.request_record import RequestRecord
from tools.bench.schema import Point

DEFAULT_PERCENTILES: tuple[float, ...] = (50, 90, 99)
METRICS = ("ttft", "tpot", "itl", "e2el")
FAILED_SHARE = 0.01  # a level where more than this share of the requests failed: failed


def level_failed(completed: int, failed: int) -> bool:
    """The level's verdict: nothing completed, or more than FAILED_SHARE of it failed."""
    return completed == 0 or failed > FAILED_SHARE * (completed + failed)


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """numpy.percentile(values, p) with the default 'linear' method, on pre-sorted values."""
    n = len(sorted_values)
    if n == 0:
        return 0.0
    pos = (n - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation (numpy's ddof=0); (0, 0) for no values."""
    n = len(values)
    if n == 0:
        return 0.0, 0.0
    mean = math.fsum(values) / n
    var = math.fsum((v - mean) ** 2 for v in values) / n
    return mean, math.sqrt(var)


def p_word(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def summarize(name: str, values: list[float], percentiles: Iterable[float]) -> dict[str, float]:
    """mean_/median_/std_/pNN_<name>_ms from values in seconds (vLLM's key names)."""
    values.sort()
    mean, std = mean_std(values)
    out = {
        f"mean_{name}_ms": mean * 1000,
        f"median_{name}_ms": percentile(values, 50) * 1000,
        f"std_{name}_ms": std * 1000,
    }
    for p in percentiles:
        out[f"p{p_word(p)}_{name}_ms"] = percentile(values, p) * 1000
    return out


def peak_buckets(successes: list[RequestRecord]) -> tuple[float, int]:
    """vLLM's max_output_tokens_per_s and max_concurrent_requests (one-second buckets)."""
    if not successes:
        return 0.0, 0
    t0 = min(r.start for r in successes)
    t1 = max(r.start + r.latency for r in successes)
    n = math.ceil(t1 - t0) + 1
    tokens = [0] * n
    active = [0] * n
    for r in successes:
        t = r.start + r.ttft
        times = [t]
        for gap in r.itl:
            t += gap
            times.append(t)
        for tt in times:
            b = int(tt - t0)
            if 0 <= b < n:
                tokens[b] += 1
        for s in range(int(r.start - t0), int(r.start + r.latency - t0) + 1):
            active[s] += 1
    return float(max(tokens)), max(active)


def compute_point(
    records: list[RequestRecord],
    duration: float,
    level: int,
    max_tokens: int,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    slo_ms: dict[str, float] | None = None,
    cpu_seconds: float | None = None,
) -> Point:
    """One level's metrics as a `Point` (as vLLM's calculate_metrics returns BenchmarkMetrics):
    the keys a vLLM result has, plus ours. The keys the tools read are its typed fields; the
    rest are its extras, in the order below, as the result file holds them. Its fields set are
    the keys computed here: `model_dump(exclude_unset=True)` is the flat dict, no defaults added
    (a p99 not asked for stays absent there, 0.0 in the result file as before)."""
    ok = [r for r in records if r.success]
    dur = duration if duration > 0 else float("nan")
    out_lens = [r.output_tokens for r in ok]
    total_in = sum(r.prompt_tokens for r in ok)
    total_out = sum(out_lens)
    ttfts = [r.ttft for r in ok]
    e2els = [r.latency for r in ok]
    tpots = [(r.latency - r.ttft) / (r.output_tokens - 1) for r in ok if r.output_tokens > 1]
    itls = [gap for r in ok for gap in r.itl]
    chunks = sum(r.chunks for r in ok)
    peak_tokens, peak_active = peak_buckets(ok)
    good = _good(ok, slo_ms)
    errors = Counter(r.error_kind for r in records if not r.success)
    samples: dict[str, str] = {}
    for r in records:
        if not r.success and r.error_kind not in samples:
            samples[r.error_kind] = r.error
    point: dict[str, Any] = {
        "max_concurrency": level,
        "num_prompts": len(records),
        "request_rate": "inf",
        "duration": duration,
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / dur if ok else 0.0,
        "request_goodput": good / dur if good is not None else None,
        "slo_attainment": good / len(records) if good is not None and records else None,
        "output_throughput": total_out / dur if ok else 0.0,
        "total_token_throughput": (total_in + total_out) / dur if ok else 0.0,
        "max_output_tokens_per_s": peak_tokens,
        "max_concurrent_requests": peak_active,
    }
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        point.update(summarize(name, values, percentiles))
    point.update(
        {
            "achieved_concurrency": math.fsum(e2els) / dur if ok else 0.0,
            "early_eos": sum(1 for r in ok if r.output_tokens < (r.max_tokens or max_tokens)),
            "errors": dict(sorted(errors.items())),
            "error_samples": samples,
            # a level its deadline cut measured less than it was asked to, however few it cut
            "level_failed": level_failed(len(ok), len(records) - len(ok))
            or LEVEL_DEADLINE in errors,
            "usage_counted": sum(1 for r in ok if r.usage_counted),
            "chunks": chunks,
            "tokens_per_chunk": total_out / chunks if chunks else 0.0,
            "mean_queue_ms": (math.fsum(r.queue_time for r in records) / len(records) * 1000)
            if records
            else 0.0,
            "client_cpu_seconds": cpu_seconds,
            "client_cpu_percent": (100.0 * cpu_seconds / dur)
            if cpu_seconds is not None and ok
            else None,
            "client_cpu_us_per_chunk": (1e6 * cpu_seconds / chunks)
            if cpu_seconds is not None and chunks
            else None,
            "input_lens": [r.prompt_tokens for r in records],
            "output_lens": [r.output_tokens if r.success else 0 for r in records],
            "ttfts": [r.ttft for r in records],
        }
    )
    return Point.model_validate(point)


def _good(ok: list[RequestRecord], slo_ms: dict[str, float] | None) -> int | None:
    """How many requests met every SLO set (ttft, tpot, e2el in ms); None when none is set."""
    if not slo_ms:
        return None
    good = 0
    for r in ok:
        tpot = (r.latency - r.ttft) / (r.output_tokens - 1) if r.output_tokens > 1 else 0.0
        values = {"ttft": r.ttft, "tpot": tpot, "e2el": r.latency}
        if all(values[k] * 1000 <= limit for k, limit in slo_ms.items()):
            good += 1
    return good
