"""What a level of a sweep sends beyond the loop itself - how many requests, which dataset rows -
and the keys and notes that describe its traffic (docs/benchmark.md, Workloads)."""

from __future__ import annotations

from typing import Any

from tools.bench import datasets
from tools.bench.loadgen import LevelRun
from tools.bench.multi_turn import turn_rows
from tools.bench.schema import Point, Workload
from tools.bench.schema import level_name as level_name  # where readers of traffic look

RATE_LEVEL_S = 10.0  # a rate level without --duration or a request count: this long
CLOSED_POOL_PER_C = 64  # a duration-bound closed level prepares this many requests per stream
# a level with a minimum length prepares this many times its count: the most it may send (a
# level that ran through them before its minimum is noted)
MIN_POOL_FACTOR = 16


def requests_for(level: int, workload: Workload) -> int:
    """Requests of a closed level: its count rule (a duration-bound one: the most it may send)."""
    if workload.duration_s is not None:
        return workload.requests_per_level or max(CLOSED_POOL_PER_C * level, 10)
    return workload.requests_per_level or max(5 * level, 10)


def min_level_s(workload: Workload) -> float | None:
    """The least a closed level lasts (model time); None: its count alone decides (a
    duration-bound level lasts its duration, which is no minimum but the length)."""
    if workload.duration_s is not None or not workload.min_level_s:
        return None
    return workload.min_level_s


def pool_for(level: int, workload: Workload) -> int:
    """Requests a closed level prepares: its count, or with a minimum length the most it may
    send - MIN_POOL_FACTOR x its count."""
    count = requests_for(level, workload)
    return count if min_level_s(workload) is None else MIN_POOL_FACTOR * count


def owed(level: int, workload: Workload) -> int:
    """Requests a closed level must send (what a deadline cut before it sent them fails): its
    count; none for a duration-bound level (what it did not send is not part of it)."""
    return 0 if workload.duration_s is not None else requests_for(level, workload)


def requests_at_rate(rate: float, workload: Workload) -> int:
    """Requests of an open level: the duration's worth, else requests_per_level, else 10 s."""
    if workload.duration_s is not None:
        return max(1, round(rate * workload.duration_s))
    return workload.requests_per_level or max(10, round(rate * RATE_LEVEL_S))


def add_samples(
    job: dict[str, Any], data: datasets.Dataset, wl: Workload, seed: int, used: int
) -> int:
    """Put the level's dataset rows in the job; return how many samples the sweep has taken."""
    if data.kind == "random":
        return used
    fixed = wl.lengths == "fixed"

    def rows(samples: list[datasets.Sample]) -> list[list[Any]]:
        return [
            [s.prompt, s.prompt_tokens, wl.max_tokens if fixed else s.output_len or wl.max_tokens]
            for s in samples
        ]

    warm = datasets.level_samples(data, seed, used, wl.warmup_requests)
    job["warm_samples"] = rows(warm)
    if wl.multi_turn:  # conversations turn by turn, one user per stream (multi_turn.py)
        at = used + len(warm)
        turns, taken = turn_rows(
            data, seed, at, job["num_prompts"], job["concurrency"], wl.endpoint,
            wl.max_tokens if fixed else None,
        )  # fmt: skip
        job["samples"] = [[p, t, m or wl.max_tokens] for p, t, m in turns]
        return at + taken
    measured = datasets.level_samples(data, seed, used + len(warm), job["num_prompts"])
    job["samples"] = rows(measured)
    return used + len(warm) + len(measured)


def traffic_keys(point: Point, rate: float | None, wl: Workload, run: LevelRun) -> Point:
    """The level's traffic keys: vLLM's request_rate and burstiness, and the achieved rate."""
    if rate is None:
        return point
    starts = sorted(r.start for r in run.records if r.start > 0)
    span = starts[-1] - starts[0] if len(starts) > 1 else 0.0
    achieved = (len(starts) - 1) / span if span > 0 else 0.0
    keys = {"request_rate": rate, "burstiness": wl.burstiness, "achieved_request_rate": achieved}
    return point.model_copy(update=keys)


def check_traffic(point: Point, rate: float | None, wl: Workload, n: int, notes: list[str]) -> None:
    """An open level that could not keep its rate; a timed closed level, or one with a minimum
    length, that ran out of its `n` prepared requests early."""
    if rate is not None:
        extra = point.model_extra or {}  # traffic_keys' and metrics' untyped keys
        achieved = extra["achieved_request_rate"]
        if achieved < 0.95 * rate:
            notes.append(
                f"rate {rate:g}/s: the client sent {achieved:.2f}/s (late by "
                f"{extra.get('mean_queue_ms', 0):.0f} ms on average): client-bound"
            )
    elif wl.duration_s is not None and point.num_prompts >= n:
        notes.append(
            f"C={point.max_concurrency}: all {n} prepared requests finished before "
            f"{wl.duration_s:g} s: raise requests_per_level for a full-length level"
        )
    elif (least := min_level_s(wl)) is not None and point.num_prompts >= n:
        # the last request was handed out before the minimum had passed (past its count)
        notes.append(
            f"C={point.max_concurrency}: the level sent all {n} requests it may send "
            f"({MIN_POOL_FACTOR} x its count of {n // MIN_POOL_FACTOR}) before its minimum of "
            f"{least:g} s: a shorter level than asked"
        )


def reuse_note(notes: list[str], data: datasets.Dataset, used: int) -> None:
    """A file dataset smaller than the sweep: say that prompts were sent more than once."""
    if data.samples and used > len(data.samples):
        notes.append(
            f"dataset {data.spec} has {len(data.samples)} prompts and this sweep sent {used}: "
            f"{used - len(data.samples)} were sent again (a prefix cache may answer repeats)"
        )
