"""Time and words of a pipeline stage: model time runs `scale` times faster than the wall clock
(like the simulator's --time-scale), and the log shows the modelled box's times, tqdm-style."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable


class StageFailed(Exception):
    """The stage fails; the log already says why. `code` is its exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def say(line: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    sys.stdout.write(f"[{stamp}] {line}\n")
    sys.stdout.flush()


def hms(seconds: float) -> str:
    s = max(0, int(seconds))
    return (
        f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
        if s >= 3600
        else f"{s // 60:02d}:{s % 60:02d}"
    )


class Clock:
    """Runs `total` units of work that take `unit_s` model seconds each, printing progress lines
    with the rate and the ETA (model time), and failing where a fault was asked for."""

    def __init__(self, scale: float, fail: str | None = None, fail_at: float = 0.5) -> None:
        self.scale = scale
        self.fail, self.fail_at = fail, fail_at
        self.began = time.monotonic()  # the stage's start: elapsed and rate span its parts

    def run(
        self,
        label: str,
        total: int,
        unit_s: float,
        unit: str,
        extra: Callable[[int], str] | None = None,
        before: int = 0,
        of: int | None = None,
    ) -> None:
        """`total` units, a progress line about every 5 %; the fault (if any) at fail_at. A part
        of a longer run (an epoch) shows the whole: `before` units done already, `of` in all."""
        whole = of or total
        every = max(1, whole // 20)
        done = 0
        while done < total:
            step = min(every, total - done)
            time.sleep(step * unit_s / self.scale)
            done += step
            model_elapsed = (time.monotonic() - self.began) * self.scale
            rate = (before + done) / model_elapsed if model_elapsed > 0 else 0.0
            left = (whole - before - done) / rate if rate > 0 else 0.0
            pct = 100 * (before + done) // whole
            bar = "#" * (pct // 10)
            tail = f" {extra(done)}" if extra else ""
            sys.stdout.write(
                f"{label}: {pct:3d}%|{bar:<10}| {before + done}/{whole} "
                f"[{hms(model_elapsed)}<{hms(left)}, {rate:.2f} {unit}/s]{tail}\n"
            )
            sys.stdout.flush()
            if self.fail and before + done >= self.fail_at * whole:
                self.fault(label)

    def fault(self, where: str) -> None:
        kind, self.fail = self.fail, None
        if kind == "oom":
            sys.stdout.write(
                "Traceback (most recent call last):\n"
                f'  File "/workspace/specforge/{where}.py", line 212, in <module>\n'
                "    outputs = model(input_ids, output_hidden_states=True)\n"
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.81 GiB. GPU 0 "
                "has a total capacity of 93.10 GiB of which 2.41 GiB is free.\n"
            )
            raise StageFailed("CUDA out of memory")
        if kind == "disk":
            sys.stdout.write(
                "Traceback (most recent call last):\n"
                f'  File "/workspace/specforge/{where}.py", line 97, in <module>\n'
                "    f.write(record)\n"
                "OSError: [Errno 28] No space left on device\n"
            )
            raise StageFailed("no space left on device")
        if kind == "killed":
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)  # what the kernel's OOM killer does
        raise StageFailed(f"unknown fault {kind!r}", 2)
