"""The highest request rate that meets an SLO: `agent bench --find-max-rate --slo ...`.

What an operator asks ("how much traffic can this configuration take within p99 TTFT 200 ms?"),
as SGLang's auto_benchmark and GuideLLM's sweep answer it. Open-loop levels (Poisson unless
--burstiness says otherwise), each with its own fresh prompts: double the rate from `start`
while the SLO holds (halve while it does not), then bisect between the last rate that met it
and the first that did not until they are within `precision` of each other or `max_probes`
levels were sent. A rate "meets" the SLO when the level did not fail and the p99 of every
metric set is within its limit (tools/domain/stats.limits_met); a level the client could not
send at 95 % of its rate is no evidence either way, and ends the search with a note.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from tools.bench.random_prompts import sweep_seed
from tools.bench.sweep import BenchError, Observer, SweepOutcome, SweepSpec, run_sweep
from tools.domain.stats import limits_met

START_RATE = 1.0  # req/s, when no start is given
MAX_PROBES = 10
PRECISION = 0.1  # stop when the last met rate is within 10 % of the first missed one
CLIENT_BOUND = 0.95


@dataclass
class RateSearch:
    outcome: SweepOutcome  # every probe's point, sorted by rate
    max_rate: float | None  # the highest rate that met the SLO (None: not even the lowest)
    missed_at: float | None  # the lowest rate that missed it (None: never missed)
    client_bound_at: float | None = None  # the rate the client could not send (the search's end)
    probes: list[dict[str, Any]] = field(default_factory=list)  # {"rate", "met"} in probe order

    def summary(self, slo_ms: dict[str, float]) -> str:
        limits = ", ".join(f"p99 {k.upper()} <= {v:g} ms" for k, v in slo_ms.items())
        if self.max_rate is None:
            low = min(p["rate"] for p in self.probes) if self.probes else 0.0
            return f"no rate met {limits} (the lowest tried: {low:g} req/s)"
        if self.missed_at is None:
            return f"every rate tried met {limits}, up to {self.max_rate:g} req/s"
        return (
            f"highest rate meeting {limits}: {self.max_rate:.3g} req/s "
            f"(missed at {self.missed_at:.3g} req/s)"
        )

    def data(self) -> dict[str, Any]:
        return {
            "max_rate": self.max_rate,
            "missed_at": self.missed_at,
            "client_bound_at": self.client_bound_at,
            "probes": self.probes,
        }


async def find_max_rate(
    spec: SweepSpec,
    observer: Observer | None = None,
    start: float = START_RATE,
    max_probes: int = MAX_PROBES,
    precision: float = PRECISION,
) -> RateSearch:
    slo_ms = spec.slo_ms or spec.workload.slo_ms
    if not slo_ms:
        raise BenchError("finding the highest rate needs an SLO: --slo ttft_ms=..,tpot_ms=..")
    if not start > 0:
        raise BenchError(f"the search's start rate must be positive, got {start}")
    base_seed = spec.workload.seed if spec.prompt_seed is None else spec.prompt_seed
    search = RateSearch(SweepOutcome(model=""), None, None)
    rate = start
    while len(search.probes) < max_probes:
        probe = dataclasses.replace(
            spec,
            rates=[rate],
            slo_ms=slo_ms,
            prompt_seed=sweep_seed(base_seed, "rate-search", len(search.probes)),
        )
        got = await run_sweep(probe, observer)
        _merge(search.outcome, got)
        if got.interrupted or not got.points:
            search.outcome.interrupted = got.interrupted
            break
        point = got.points[-1]
        if point.get("achieved_request_rate", 0.0) < CLIENT_BOUND * rate:
            search.client_bound_at = rate
            search.outcome.notes.append(
                f"rate {rate:g}/s: the client could not send at this rate - the search stops "
                "here (no evidence about the server above it)"
            )
            break
        met = limits_met(point, slo_ms)
        search.probes.append({"rate": rate, "met": met})
        if met:
            search.max_rate = max(search.max_rate or 0.0, rate)
        else:
            search.missed_at = rate if search.missed_at is None else min(search.missed_at, rate)
        lo, hi = search.max_rate, search.missed_at
        if lo is not None and hi is not None:
            if (hi - lo) / hi <= precision:
                break
            rate = (lo + hi) / 2
        else:
            rate = rate * 2 if met else rate / 2
    search.outcome.points.sort(key=lambda p: float(p.get("request_rate", 0.0)))
    return search


def _merge(into: SweepOutcome, got: SweepOutcome) -> None:
    into.model = got.model
    into.points += got.points
    into.processes = max(into.processes, got.processes)
    into.prompts = into.prompts or got.prompts
    into.dataset_digest = got.dataset_digest
    into.notes += [n for n in got.notes if n not in into.notes]
