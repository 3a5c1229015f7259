"""A CPU host's memory bandwidth, measured: a short copy probe run at lab setup, so that the
floor of a CPU lab (docs/physics.md) is this machine's, not a guess.

Each of `threads` threads copies its own buffer (numpy's copy releases the GIL, so they copy at
once), each buffer well past the last-level cache; the bandwidth is the bytes read and written
(two per byte copied, as STREAM's Copy counts them) over the wall time of the best round. The
rounds stop at `seconds` (a round begun goes on: each is a fraction of a second).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import numpy as np

BUFFER_BYTES = 128 << 20  # per thread: 4x the 32 MiB L3 of this lab's machines, not past its RAM
SECONDS = 1.5
MAX_THREADS = 8


@dataclass(frozen=True)
class CopyProbe:
    gb_s: float  # bytes read + written per second, in GB (1e9)
    threads: int
    buffer_bytes: int  # per thread
    rounds: int

    def describe(self) -> str:
        return (
            f"copy probe at lab setup: {self.gb_s:.1f} GB/s ({self.threads} threads, "
            f"{self.buffer_bytes >> 20} MiB each, best of {self.rounds} rounds)"
        )


def cpus() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def copy_bandwidth(
    seconds: float = SECONDS, buffer_bytes: int = BUFFER_BYTES, threads: int | None = None
) -> CopyProbe:
    """Measure; a round is every thread copying its buffer once."""
    n = max(1, min(threads or cpus(), MAX_THREADS))
    count = buffer_bytes // 8
    sources = [np.ones(count, dtype=np.float64) for _ in range(n)]
    targets = [np.empty_like(s) for s in sources]
    for s, t in zip(sources, targets, strict=True):  # touch every page before the clock
        np.copyto(t, s)
    best, rounds = 0.0, 0
    deadline = time.perf_counter() + seconds
    while rounds < 2 or time.perf_counter() < deadline:
        start = threading.Barrier(n + 1)
        workers = [
            threading.Thread(target=_copy, args=(start, s, t))
            for s, t in zip(sources, targets, strict=True)
        ]
        for w in workers:
            w.start()
        start.wait()
        began = time.perf_counter()
        for w in workers:
            w.join()
        took = time.perf_counter() - began
        best = max(best, 2 * n * count * 8 / took / 1e9)
        rounds += 1
        if rounds >= 50:
            break
    return CopyProbe(round(best, 2), n, count * 8, rounds)


def _copy(start: threading.Barrier, source: np.ndarray, target: np.ndarray) -> None:
    start.wait()
    np.copyto(target, source)
