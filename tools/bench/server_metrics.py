"""The server's own view of a level, over time: its /metrics (Prometheus text) polled while the
level runs, the engine's gauges mapped into one neutral series stored with the level's point
(`server_metrics`, docs/benchmark.md). What a person reads to see why a level saturates: how
many requests the engine ran and queued, how full its KV cache was, how many drafted tokens it
accepted.

The names per engine are its profile's `[metrics]` (tools/servers/profiles/*.toml, read through
tools/domain/engines.py), e.g.

  running          sglang:num_running_reqs, vllm:num_requests_running,
                   llamacpp:requests_processing, trtllm_num_requests_running
  waiting          sglang:num_queue_reqs, vllm:num_requests_waiting, llamacpp:requests_deferred
  kv_cache (0-1)   sglang:token_usage, vllm:kv_cache_usage_perc (vllm:gpu_cache_usage_perc
                   before v1), llamacpp:kv_cache_usage_ratio, trtllm_kv_cache_utilization
  spec_acceptance  1 + accepted / drafts over the interval from the spec-decode counters
                   (vllm:spec_decode_num_*_total, llamacpp:spec_decode_num_*_total; the
                   simulator serves vLLM's), else the engine's acceptance-length gauge
                   (sglang:spec_accept_length, trtllm_spec_decode_acceptance_length)

A sweep told its engine's names reads those; one that was not (a bare URL, a profile that names
none) reads every built-in profile's. TensorRT-LLM serves its Prometheus text at
/prometheus/metrics (its /metrics is JSON): the path is the profile's too.
The simulator serves SGLang's gauges (its ideal mode: running, and nothing waiting).
spec_acceptance is an acceptance length: tokens per verification step, the bonus token counted.
A gauge served under several label sets (vLLM's engine, SGLang's dp_rank) is summed for the
request counts and averaged for the fractions. Parsing is prometheus_client's own
(`text_string_to_metric_families`).

The same sampler reads the power of the level (tools/bench/energy.py): the simulator's modelled
power from the same scrape (`sim:power_watts`), else, where the sweep was given the server's host,
nvidia-smi there - one call in flight at a time, each under its own deadline, started after the
level's first scrape showed no modelled power.

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
import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tools.bench.energy import MODELLED, HostPower, LevelPower, PowerUnavailable
from tools.domain.engines import Metrics, all_metrics

EVERY_S = 0.5  # between scrapes, in the modelled box's time
MIN_WALL_S = 0.25  # but never more often than this on the wall clock (a fast simulator)
SCRAPE_S = 2.0  # one scrape's own deadline: a busy server's late answer is a missing sample

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
    draft_tokens: float | None = None  # the draft tokens proposed, a counter (vLLM's)
    power_w: float | None = None  # the simulator's modelled power (sim:power_watts)


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


def read(text: str, names: Metrics | None = None) -> Reading:
    """The neutral reading of a /metrics body, by the engine's names (None, or a profile that
    names none: every built-in profile's); MetricsError where it names no engine gauge."""
    values = parse(text)
    known = names if names is not None and names.named() else all_metrics()

    def first(candidates: list[str], combine: str) -> tuple[str, float] | None:
        for name in candidates:
            found = [v for v in values.get(name, []) if math.isfinite(v)]
            if found:
                return name, sum(found) if combine == "sum" else sum(found) / len(found)
        return None

    running, waiting = first(known.running, "sum"), first(known.waiting, "sum")
    kv, gauge = first(known.kv_cache, "mean"), first(known.accept_length, "mean")
    spec = None
    for drafts, accepted in known.spec_counters:
        if drafts in values and accepted in values:
            spec = (sum(values[drafts]), sum(values[accepted]))
            break
    drafted = first(known.spec_draft_tokens, "sum")
    power = first([MODELLED], "sum")
    named = [x[0] for x in (running, waiting, kv, gauge) if x is not None]
    if not named:
        raise MetricsError("none of the running, waiting or KV-cache gauges its engine profile "
                           "names")  # fmt: skip
    return Reading(
        source=re.split(r"[:_]", named[0], maxsplit=1)[0],  # sglang:..., trtllm_...
        running=None if running is None else running[1],
        waiting=None if waiting is None else waiting[1],
        kv_cache=None if kv is None else kv[1],
        accept_gauge=None if gauge is None else gauge[1],
        spec=spec,
        draft_tokens=None if drafted is None else drafted[1],
        power_w=None if power is None else power[1],
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
    # the level's first and latest reading of the spec-decode counters (speculation_of)
    spec_first: Reading | None = None
    spec_last: Reading | None = None

    def add(self, t: float, reading: Reading, accept: float | None) -> None:
        self.source = self.source or reading.source
        if reading.spec is not None:
            self.spec_first = self.spec_first or reading
            self.spec_last = reading
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
        spec = speculation_of(self)
        if spec is not None:
            out["speculation"] = spec
        return out


def speculation_of(series: Series) -> dict[str, Any] | None:
    """The level's speculation as a whole (docs/physics.md, "Speculation against the floor"):
    from the spec-decode counters' growth between its first and latest scrape, the drafts
    (verification steps), the accepted draft tokens and, where the engine counts them, the draft
    tokens proposed; the acceptance length 1 + accepted / drafts; the share of the tokens that
    came from accepted drafts, accepted / (drafts + accepted) (a step yields its accepted drafts
    and one token of the target); the acceptance rate, accepted / proposed. Without counters, the
    mean of the engine's acceptance-length gauge (SGLang's), and the share it implies. None where
    nothing was drafted in the level or the engine serves neither."""
    first, last = series.spec_first, series.spec_last
    if first is not None and last is not None and first.spec is not None and last.spec is not None:
        drafts, accepted = last.spec[0] - first.spec[0], last.spec[1] - first.spec[1]
        if drafts <= 0 or accepted < 0:
            return None
        out: dict[str, Any] = {"drafts": drafts, "accepted": accepted}
        out["accept_length"] = round(1 + accepted / drafts, 4)
        out["token_share"] = round(accepted / (drafts + accepted), 4)
        if first.draft_tokens is not None and last.draft_tokens is not None:
            proposed = last.draft_tokens - first.draft_tokens
            if proposed > 0:
                out["draft_tokens"] = proposed
                out["accept_rate"] = round(accepted / proposed, 4)
        return out
    gauge = [x for x in series.columns["spec_acceptance"] if x is not None]
    length = sum(gauge) / len(gauge) if gauge else 0.0
    if length <= 1:  # no gauge, or a server that does not speculate
        return None
    return {"accept_length": round(length, 4), "token_share": round(1 - 1 / length, 4)}


class Sampler:
    """Polls `url` (the server's /metrics; None: not) from start() to stop(), each scrape under
    its own deadline and read by `names` (its engine profile's), and reads the level's power
    (`power`: the server's host, where known). `problem` is set (and scraping ends) where the
    server has no usable /metrics; `power` holds what was read of the power, and why nothing
    was."""

    def __init__(
        self,
        url: str | None,
        scale: float = 1.0,
        every_s: float = EVERY_S,
        power: HostPower | None = None,
        names: Metrics | None = None,
    ) -> None:
        self.url, self.scale = url, scale if scale > 0 else 1.0
        self.names = names  # the engine profile's /metrics names (None: every built-in's)
        self.wall_every = max(MIN_WALL_S, every_s / self.scale)
        self.series = Series(every_s=round(self.wall_every * self.scale, 3))
        self.problem: str | None = None
        self.power = LevelPower()
        self._host = power
        self._call: asyncio.Task[float] | None = None  # the nvidia-smi call in flight
        self._call_at = 0.0  # when it started (time.perf_counter: the requests' clock)
        self._task: asyncio.Task[None] | None = None
        self._start = 0.0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._start = loop.time()  # the level's start (the client is made after: 0.1 s)
        self._task = loop.create_task(self._poll())

    async def stop(self) -> dict[str, Any] | None:
        """End the polling (at once: a scrape or power call in flight is dropped); the series
        taken."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        call, self._call = self._call, None
        if call is not None and not call.done() and not self.power.watts:
            # a level shorter than one nvidia-smi call: its answer is the level's one sample
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait([call])  # the call's own deadline bounds it
        if call is not None and call.done():
            self._took(call)
        elif call is not None:
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await call
        return self.series.dump()

    async def _poll(self) -> None:
        loop = asyncio.get_running_loop()
        before: Reading | None = None
        limits = httpx.Timeout(SCRAPE_S)
        # straight to the server, as the benchmark's own client goes (no HTTP_PROXY detour)
        async with httpx.AsyncClient(timeout=limits, trust_env=False) as client:
            while self.url is not None or self._host is not None:
                at = loop.time()
                if self.url is not None:
                    before = await self._scrape(client, at, before)
                self._power_call()
                await asyncio.sleep(max(0.0, self.wall_every - (loop.time() - at)))

    async def _scrape(
        self, client: httpx.AsyncClient, at: float, before: Reading | None
    ) -> Reading | None:
        """One scrape into the series; the reading for the next one's interval."""
        assert self.url is not None
        sent = time.perf_counter()  # the power sample's time: the server reads it on arrival
        try:
            async with asyncio.timeout(SCRAPE_S):
                resp = await client.get(self.url)
        except (httpx.HTTPError, TimeoutError, OSError):
            self.series.missed += 1  # busy or restarting: a gap, not a verdict
            return before
        if resp.status_code != 200:
            self.problem, self.url = f"{self.url} answered HTTP {resp.status_code}", None
            return before
        try:
            reading = read(resp.text, self.names)
        except MetricsError as err:
            self.problem, self.url = f"{self.url}: {err}", None
            return before
        self.series.add((at - self._start) * self.scale, reading, acceptance(before, reading))
        if reading.power_w is not None:  # the simulator's modelled box: its power, not the host's
            if self.power.source != "simulator":
                self.power = LevelPower(source="simulator")
            self.power.add(reading.power_w, sent)
            self._host = None
        return reading

    def _power_call(self) -> None:
        """The host's power: the call that finished taken, the next one started (one at a
        time: a slow nvidia-smi is sampled as often as it answers)."""
        call = self._call
        if call is not None and not call.done():
            return
        if call is not None:
            self._took(call)
            self._call = None
        if self._host is not None:
            self._call_at = time.perf_counter()
            self._call = asyncio.get_running_loop().create_task(self._host.read())

    def _took(self, call: asyncio.Task[float]) -> None:
        host, power = self._host, self.power
        if call.cancelled() or power.source == "simulator":
            return
        err = call.exception()
        if isinstance(err, PowerUnavailable):
            name = host.host.name if host is not None else "?"
            power.problem, self._host = f"host {name} reports none ({err})", None
        elif err is not None:  # PowerTimeout, or a lost SSH channel: a gap, not a verdict
            power.missed += 1
        else:
            power.source = HostPower.source
            power.gpus = host.which if host is not None else "all"
            power.add(call.result(), (self._call_at + time.perf_counter()) / 2)  # ~when read


def note(problem: str) -> str:
    """The result's note for a server without usable /metrics (501 is llama-server's answer
    when it was started without --metrics)."""
    hint = " (llama-server serves them with --metrics)" if "HTTP 501" in problem else ""
    return f"{NO_METRICS}: {problem} - no server metrics over time{hint}"
