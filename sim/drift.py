"""An injected machine drift: the box slows down (or speeds up) on a schedule, as a real one does
when another tenant's job starts, the GPUs heat up or a CPU hog stops (`--drift`).

A schedule is points `SECOND:SPEED` separated by commas, in increasing seconds: from that second
on the box runs at SPEED times its modelled throughput (a step). `SECOND~SPEED` is a ramp
instead: a straight line from the previous point's speed, reaching SPEED at that second. Before
the first point the speed is 1.0 (a first ramp starts from 1.0 at second 0); after the last, the
last point's. "0:1.0,60:0.5" is full speed for a minute, then half; "0:1.0,120~0.4" slows steadily
over two minutes.

`@FILE` reads the schedule from FILE, and reads it again when FILE changes (checked every
RECHECK_S): a drift steered while the lab runs - `echo 0:0.5 > FILE` halves the box's speed at
once, in every server running and every one launched after. A file that stops making sense keeps
the last schedule that did (the server logs why).

Seconds are real (wall-clock) seconds since the drift's start (`--drift-start`, a UNIX time;
default the server's own start). A machine drifts across launches, and each launch is a new
process: a campaign passes one start to all of its servers, so that they share one machine clock.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_POINT = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([:~])\s*([0-9]*\.?[0-9]+)\s*$")
RECHECK_S = 0.5  # real seconds between two looks at a schedule file
MIN_SPEED = 0.01  # a box that does 1 % of its work is already stopped for any measurement


class DriftError(ValueError):
    """A schedule that cannot be read; the message is one line."""


@dataclass(frozen=True)
class Point:
    second: float
    speed: float
    ramp: bool  # reached by a straight line from the previous point (else a step at `second`)


@dataclass(frozen=True)
class Schedule:
    points: tuple[Point, ...]

    def speed(self, second: float) -> float:
        """The box's speed (a factor on its throughput) at `second` of the schedule."""
        speed, since = 1.0, 0.0  # a first ramp starts from full speed at second 0
        for p in self.points:
            if second < p.second:
                if p.ramp and since <= second:
                    part = (second - since) / (p.second - since)
                    return speed + part * (p.speed - speed)
                return speed
            speed, since = p.speed, p.second
        return speed

    def text(self) -> str:
        return ",".join(f"{p.second:g}{'~' if p.ramp else ':'}{p.speed:g}" for p in self.points)


def parse(text: str) -> Schedule:
    """`SECOND:SPEED` (a step) or `SECOND~SPEED` (a ramp), comma-separated, seconds increasing."""
    points: list[Point] = []
    for part in text.split(","):
        found = _POINT.match(part)
        if found is None:
            raise DriftError(
                f"--drift: {part.strip()!r} is not SECOND:SPEED or SECOND~SPEED "
                '(e.g. "0:1.0,60:0.5": full speed, then half from second 60)'
            )
        second, kind, speed = float(found[1]), found[2], float(found[3])
        if speed < MIN_SPEED:
            raise DriftError(f"--drift: speed {speed:g} at second {second:g} is below {MIN_SPEED}")
        if points and second <= points[-1].second:
            raise DriftError(
                f"--drift: second {second:g} does not follow {points[-1].second:g} "
                "(the points go in increasing seconds)"
            )
        points.append(Point(second, speed, kind == "~"))
    return Schedule(tuple(points))


def load(text: str) -> Schedule:
    """`--drift`'s value: a schedule, or `@FILE` holding one (read now)."""
    if not text.startswith("@"):
        return parse(text)
    path = Path(text[1:]).expanduser()
    try:
        content = path.read_text()
    except OSError as err:
        raise DriftError(f"--drift {text}: cannot read {path}: {err.strerror or err}") from None
    return parse(content.strip())


class Live:
    """`--drift`'s schedule as the engine reads it: fixed, or a file read again when it changes."""

    def __init__(self, text: str, on_log: Callable[[str], None] | None = None) -> None:
        self.schedule = load(text)
        self.path = Path(text[1:]).expanduser() if text.startswith("@") else None
        self.on_log = on_log
        self._mtime = self._stat()
        self._checked = time.monotonic()

    def _stat(self) -> float | None:
        try:
            return self.path.stat().st_mtime_ns if self.path is not None else None
        except OSError:
            return None

    def speed(self, second: float) -> float:
        if self.path is not None and time.monotonic() - self._checked >= RECHECK_S:
            self._checked = time.monotonic()
            mtime = self._stat()
            if mtime is not None and mtime != self._mtime:
                self._mtime = mtime
                try:
                    self.schedule = load(f"@{self.path}")
                    said = f"drift schedule now {self.schedule.text()} (from {self.path})"
                except DriftError as err:
                    said = f"drift schedule kept at {self.schedule.text()}: {err}"
                if self.on_log is not None:
                    self.on_log(said)
        return self.schedule.speed(second)
