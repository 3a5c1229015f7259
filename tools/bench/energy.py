"""Energy per level: the power the server's GPUs drew while a level ran, and joules per output
token beside its tok/s (docs/benchmark.md, "Energy").

Where the power comes from, first found:
  simulator   the simulator's modelled power, a gauge on its /metrics (`sim:power_watts`,
              docs/sim.md), read by the /metrics sampler with its other gauges: the modelled
              box's watts, in the modelled box's time like every figure of a point;
  nvidia-smi  `nvidia-smi --query-gpu=index,power.draw --format=csv,noheader,nounits` run on the
              server's host through its Host (local, or over SSH), each call under its own
              deadline, summed over the GPUs the launch was given (CUDA_VISIBLE_DEVICES of its
              command) or over every GPU of the host when the command names none.
Neither: no figure, and one note saying why (NO_POWER).

A GPU whose power.draw is "[N/A]" or "[Not Supported]" has no reading, and neither has the sum:
a part of the GPUs is not their power. A call past its deadline is a missing sample; a call that
says there is no reading (no nvidia-smi, a non-zero exit, no value) ends power sampling for the
sweep.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tools.bench.confighash import normalize_command

if TYPE_CHECKING:
    from tools.hosts.base import Host

QUERY = "nvidia-smi --query-gpu=index,power.draw --format=csv,noheader,nounits"
CALL_S = 5.0  # one nvidia-smi call's deadline (it takes ~0.1-1 s; over SSH a little more)
MODELLED = "sim:power_watts"  # the simulator's gauge
NO_POWER = "no power reading"  # how every note of a level without a figure starts


class PowerUnavailable(Exception):
    """The host has no power reading (no nvidia-smi, no GPU, power.draw [N/A]); one line."""


class PowerTimeout(Exception):
    """One power call ran past its deadline: a missing sample, not a verdict."""


def parse_power(text: str, gpus: list[int] | None) -> float:
    """Watts summed over `gpus` (None: every GPU listed) from nvidia-smi's
    `index, power.draw` lines; PowerUnavailable where one of them has no reading."""
    found: dict[int, str] = {}
    for line in text.splitlines():
        index, _, value = (part.strip() for part in line.partition(","))
        if index.isdigit() and value:
            found[int(index)] = value
    if not found:
        first = text.strip().splitlines()[:1]
        raise PowerUnavailable(f"nvidia-smi listed no GPU ({first[0] if first else 'no output'})")
    wanted = sorted(found) if gpus is None else gpus
    total = 0.0
    for gpu in wanted:
        if gpu not in found:
            raise PowerUnavailable(f"GPU {gpu} (CUDA_VISIBLE_DEVICES) is not among nvidia-smi's")
        try:
            watts = float(found[gpu])
        except ValueError:
            raise PowerUnavailable(f"GPU {gpu} reports power.draw {found[gpu]}") from None
        if not math.isfinite(watts) or watts < 0:
            raise PowerUnavailable(f"GPU {gpu} reports power.draw {found[gpu]}")
        total += watts
    return total


def launch_gpus(command: str | None) -> list[int] | None:
    """The GPU indices a launch command gives its server (CUDA_VISIBLE_DEVICES=2,3 ...); None
    where it names none (all of the host's) or names them by UUID (not matched here: all)."""
    if not command:
        return None
    try:
        env = normalize_command(command)["env"]
    except ValueError:
        return None
    devices = str(env.get("CUDA_VISIBLE_DEVICES", "")).split(",")
    if not all(d.strip().isdigit() for d in devices):
        return None
    return [int(d) for d in devices]


class HostPower:
    """The power of a server's GPUs read on its host, one nvidia-smi call per read."""

    source = "nvidia-smi"

    def __init__(self, host: Host, gpus: list[int] | None = None, call_s: float = CALL_S):
        self.host, self.gpus, self.call_s = host, gpus, call_s

    @property
    def which(self) -> str:
        """The GPUs summed, as the point records them: "0,1", or "all"."""
        return "all" if self.gpus is None else ",".join(map(str, self.gpus))

    async def read(self) -> float:
        """Watts now; PowerUnavailable (the host has no reading) or PowerTimeout."""
        command = f"command -v nvidia-smi >/dev/null || exit 127; {QUERY}"
        try:  # the host's own deadline kills the command; ours bounds the call (an SSH channel)
            async with asyncio.timeout(self.call_s + 2.0):
                res = await self.host.run(command, timeout=self.call_s, cwd="/")
        except TimeoutError:
            res = None
        if res is None or res.timed_out:
            raise PowerTimeout(f"nvidia-smi on {self.host.name} took over {self.call_s:g} s")
        if res.exit_code == 127:
            raise PowerUnavailable("no nvidia-smi")
        if res.exit_code != 0:
            said = (res.stdout.strip() or res.stderr.strip()).splitlines()
            raise PowerUnavailable(
                f"nvidia-smi exited {res.exit_code}" + (f": {said[-1][:120]}" if said else "")
            )
        return parse_power(res.stdout, self.gpus)


def joules_per_token(mean_w: float | None, duration_s: float, output_tokens: int) -> float | None:
    """The level's energy over its output tokens: mean power x the level's duration (the one its
    tok/s is over, in the modelled box's time against a simulator) / its output tokens; None
    without a power reading or without tokens. The one formula of the figure."""
    if mean_w is None or output_tokens <= 0 or not duration_s > 0:
        return None
    return mean_w * duration_s / output_tokens


NO_POWER_TAIL = " - no joules per output token"


def no_power_note(why: str) -> str:
    return f"{NO_POWER}: {why}{NO_POWER_TAIL}"


@dataclass
class LevelPower:
    """What one level's sampler read of the power: its source, the GPUs summed (nvidia-smi), the
    samples in watts, the calls that ran past their deadline, and why there is none."""

    source: str = ""  # "simulator" | "nvidia-smi"; "" while nothing was read
    gpus: str = ""  # nvidia-smi: "0,1" or "all"
    watts: list[float] = field(default_factory=list)
    at: list[float] = field(default_factory=list)  # each sample's time.perf_counter()
    missed: int = 0
    problem: str | None = None  # the host has no reading (PowerUnavailable's line)

    def add(self, watts: float, at: float) -> None:
        """A sample and when it was asked for (a scrape's send, a call's midpoint)."""
        self.watts.append(watts)
        self.at.append(at)

    def during(self, start: float, end: float) -> list[float]:
        """The samples taken between the level's first dispatch and its last completion (the
        requests' perf_counter clock, CLOCK_MONOTONIC: a client process's too): the window its
        duration and tok/s are over, not the idle moment before its first request. A level
        shorter than the sampling interval has none in it: all of its samples then."""
        inside = [w for w, t in zip(self.watts, self.at, strict=True) if start <= t <= end]
        return inside or list(self.watts)
