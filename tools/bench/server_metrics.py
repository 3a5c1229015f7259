"""The server's own view of a level, over time: its /metrics (Prometheus text) polled while the
level runs, the engine's gauges mapped into one neutral series stored with the level's point
(`server_metrics`, docs/benchmark.md). What a person reads to see why a level saturates: how
many requests the engine ran and queued, how full its KV cache was, how many drafted tokens it
accepted.

The names per engine (read off their sources and a real llama-server's /metrics):

  running          sglang:num_running_reqs, vllm:num_requests_running,
                   llamacpp:requests_processing
  waiting          sglang:num_queue_reqs, vllm:num_requests_waiting, llamacpp:requests_deferred
  kv_cache (0-1)   sglang:token_usage, vllm:kv_cache_usage_perc (vllm:gpu_cache_usage_perc
                   before v1), llamacpp:kv_cache_usage_ratio (older builds; 0.3.36 has none)
  spec_acceptance  1 + accepted / drafts over the interval from the spec-decode counters
                   (vllm:spec_decode_num_*_total, llamacpp:spec_decode_num_*_total; the
                   simulator serves vLLM's), else sglang:spec_accept_length

The simulator serves SGLang's gauges (its ideal mode: running, and nothing waiting).
spec_acceptance is an acceptance length: tokens per verification step, the bonus token counted.
A gauge served under several label sets (vLLM's engine, SGLang's dp_rank) is summed for the
request counts and averaged for the fractions. Parsing is prometheus_client's own
(`text_string_to_metric_families`).

Sampling never holds up or fails a benchmark: each scrape has its own deadline, a scrape that
times out is a missing sample, and a server whose /metrics answers something other than 200 with
known gauges (llama-server without --metrics: 501) is sampled no more in that sweep and gets a
note instead. Times are seconds since the level's start, in the modelled box's time (a
simulator's wall clock times its time_scale), like every figure of a point.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

EVERY_S = 0.5  # between scrapes, in the modelled box's time
MIN_WALL_S = 0.25  # but never more often than this on the wall clock (a fast simulator)
SCRAPE_S = 2.0  # one scrape's own deadline: a busy server's late answer is a missing sample

RUNNING = ("sglang:num_running_reqs", "vllm:num_requests_running", "llamacpp:requests_processing")
WAITING = ("sglang:num_queue_reqs", "vllm:num_requests_waiting", "llamacpp:requests_deferred")
KV_CACHE = (
    "sglang:token_usage",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "llamacpp:kv_cache_usage_ratio",
)
ACCEPT_GAUGE = "sglang:spec_accept_length"
SPEC_COUNTERS = (  # (drafts, accepted tokens) per engine, counters
    ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_accepted_tokens_total"),
    ("llamacpp:spec_decode_num_drafts_total", "llamacpp:spec_decode_num_accepted_tokens_total"),
)
FIELDS = ("running", "waiting", "kv_cache", "spec_acceptance")
NO_METRICS = "no /metrics"


class MetricsError(ValueError):
    """A body that is not Prometheus text, or names none of the gauges above."""


@dataclass
class Reading:
    """One scrape: the neutral gauges found (None where the engine serves no such gauge) and
    the spec-decode counters (drafts, accepted) for the acceptance over the next interval."""

    source: str
    running: float | None = None
    waiting: float | None = None
    kv_cache: float | None = None
    accept_gauge: float | None = None
    spec: tuple[float, float] | None = None


def parse(text: str) -> dict[str, list[float]]:
    """{sample name: its values, one per label set} of a Prometheus text body."""
    out: dict[str, list[float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out.setdefault(sample.name, []).append(float(sample.value))
    except (ValueError, TypeError, IndexError) as err:
        raise MetricsError(f"not Prometheus text: {err}") from None
    return out


def read(text: str) -> Reading:
    """The neutral reading of a /metrics body; MetricsError where it names no engine gauge."""
    values = parse(text)

    def first(names: tuple[str, ...], combine: str) -> tuple[str, float] | None:
        for name in names:
            found = [v for v in values.get(name, []) if math.isfinite(v)]
            if found:
                return name, sum(found) if combine == "sum" else sum(found) / len(found)
        return None

    running, waiting = first(RUNNING, "sum"), first(WAITING, "sum")
    kv, gauge = first(KV_CACHE, "mean"), first((ACCEPT_GAUGE,), "mean")
    spec = None
    for drafts, accepted in SPEC_COUNTERS:
        if drafts in values and accepted in values:
            spec = (sum(values[drafts]), sum(values[accepted]))
            break
    named = [x[0] for x in (running, waiting, kv, gauge) if x is not None]
    if not named:
        raise MetricsError("none of the running, waiting or KV-cache gauges of SGLang, vLLM or "
                           "llama.cpp")  # fmt: skip
    return Reading(
        source=named[0].split(":", 1)[0],
        running=None if running is None else running[1],
        waiting=None if waiting is None else waiting[1],
        kv_cache=None if kv is None else kv[1],
        accept_gauge=None if gauge is None else gauge[1],
        spec=spec,
    )


def acceptance(before: Reading | None, now: Reading) -> float | None:
    """Tokens per verification step over the interval (1 + accepted / drafts), from the
    counters where the engine serves them and drafted in it, else the engine's own gauge."""
    if before is not None and before.spec is not None and now.spec is not None:
        drafts = now.spec[0] - before.spec[0]
        if drafts > 0:
            return round(1 + (now.spec[1] - before.spec[1]) / drafts, 4)
    return now.accept_gauge


@dataclass
class Series:
    """A level's samples, column by column (what the point stores)."""

    source: str = ""
    every_s: float = EVERY_S
    t: list[float] = field(default_factory=list)
    columns: dict[str, list[float | None]] = field(default_factory=lambda: {k: [] for k in FIELDS})
    missed: int = 0  # scrapes that got no answer in time

    def add(self, t: float, reading: Reading, accept: float | None) -> None:
        self.source = self.source or reading.source
        self.t.append(round(t, 3))
        row = (reading.running, reading.waiting, reading.kv_cache, accept)
        for key, value in zip(FIELDS, row, strict=True):
            self.columns[key].append(None if value is None else round(value, 4))

    def dump(self) -> dict[str, Any] | None:
        """The point's `server_metrics`: a column only where some sample had it; None when no
        sample was taken."""
        if not self.t:
            return None
        out: dict[str, Any] = {"source": self.source, "every_s": self.every_s, "t": self.t}
        out |= {k: v for k, v in self.columns.items() if any(x is not None for x in v)}
        if self.missed:
            out["missed"] = self.missed
        return out


class Sampler:
    """Polls `url` (the server's /metrics) from start() to stop(), each scrape under its own
    deadline. `problem` is set (and sampling ends) where the server has no usable /metrics."""

    def __init__(self, url: str, scale: float = 1.0, every_s: float = EVERY_S) -> None:
        self.url, self.scale = url, scale if scale > 0 else 1.0
        self.wall_every = max(MIN_WALL_S, every_s / self.scale)
        self.series = Series(every_s=round(self.wall_every * self.scale, 3))
        self.problem: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._start = 0.0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._start = loop.time()  # the level's start (the client is made after: 0.1 s)
        self._task = loop.create_task(self._poll())

    async def stop(self) -> dict[str, Any] | None:
        """End the polling (at once: a scrape in flight is dropped); the series taken."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        return self.series.dump()

    async def _poll(self) -> None:
        loop = asyncio.get_running_loop()
        before: Reading | None = None
        limits = httpx.Timeout(SCRAPE_S)
        # straight to the server, as the benchmark's own client goes (no HTTP_PROXY detour)
        async with httpx.AsyncClient(timeout=limits, trust_env=False) as client:
            while True:
                at = loop.time()
                try:
                    async with asyncio.timeout(SCRAPE_S):
                        resp = await client.get(self.url)
                except (httpx.HTTPError, TimeoutError, OSError):
                    self.series.missed += 1  # busy or restarting: a gap, not a verdict
                else:
                    if resp.status_code != 200:
                        self.problem = f"{self.url} answered HTTP {resp.status_code}"
                        return
                    try:
                        reading = read(resp.text)
                    except MetricsError as err:
                        self.problem = f"{self.url}: {err}"
                        return
                    t = (at - self._start) * self.scale
                    self.series.add(t, reading, acceptance(before, reading))
                    before = reading
                await asyncio.sleep(max(0.0, self.wall_every - (loop.time() - at)))


def note(problem: str) -> str:
    """The result's note for a server without usable /metrics (501 is llama-server's answer
    when it was started without --metrics)."""
    hint = " (llama-server serves them with --metrics)" if "HTTP 501" in problem else ""
    return f"{NO_METRICS}: {problem} - no server metrics over time{hint}"
