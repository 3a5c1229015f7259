"""Chaos: hostile engines against the benchmark client, each run for real (issue 23).

    .venv/bin/python -m benchmarks.chaos [--only NAME ...] [--hang-s 60]

Each scenario starts a hostile server on 127.0.0.1 (tests/hostile_server.py) and sweeps it
through `run_sweep`, the path run_benchmark takes (client processes as run_benchmark starts them),
with the deadlines scaled down (DEADLINES: what a user sets in seconds, here in fractions of one)
so the table runs in about a minute. Per scenario: the right outcome, the outcome, the seconds to
it, and what was left running after it - client processes, sockets of this process still open to
the server's port, asyncio tasks. A run past `--hang-s` is a hang; a level measured where the
engine misbehaved throughout is a false finish. The last line:
"scenarios N, hangs 0, false finishes 0, left running 0"; the exit status is 1 otherwise.

Adding scenarios (the faulty model API, say): anything with `name`, `expect` (the right outcome,
a few words) and `async run() -> Outcome` goes into SCENARIOS (or another list passed to
`run_all`); `Outcome.right` says whether it ended as it should, `false_finish` whether it ended as
if all were well when it was not. `left_running()` is the check every scenario gets.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tests.hostile_server import HostileServer
from tools.bench.deadlines import Deadlines
from tools.bench.schema import ServerRef, Workload
from tools.bench.sweep import BenchError, SweepOutcome, SweepSpec, run_sweep
from tools.learned_deadline import served_ttft_s

DEADLINES = Deadlines(
    head_s=0.5, first_token_s=1.5, pace_tok_s=1000.0, floor_s=2.0, probe_s=1.0, slack=4.0
)
STALL_S = 60.0  # the old guard, far beyond the deadlines: it must not be what ends a scenario


@dataclass
class Outcome:
    name: str
    expect: str
    got: str
    seconds: float
    right: bool
    false_finish: bool = False
    hang: bool = False
    left: list[str] = field(default_factory=list)
    replay: str = ""  # `agent replay --check` of the scenario's run, where it ran a campaign


class Scenario(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def expect(self) -> str: ...

    async def run(self) -> Outcome: ...


# --- what a scenario may leave behind ----------------------------------------------------------
def _children() -> list[str]:
    """Live child processes of this one (the client's shard processes)."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:60]
            found.append(f"process {entry.name} ({cmd.strip()})")
    return found


def _sockets_to(port: int) -> list[str]:
    """Sockets of this process still connected to `port` (ESTABLISHED, or CLOSE_WAIT: the server
    closed and the client did not)."""
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            remote_port = int(cols[2].rsplit(":", 1)[1], 16)
            if remote_port == port and cols[3] in ("01", "08") and cols[9] in inodes:
                found.append(f"socket to :{port} ({'open' if cols[3] == '01' else 'CLOSE_WAIT'})")
    return found


def _tasks() -> list[str]:
    me = asyncio.current_task()
    return [f"task {t.get_coro()!r}"[:80] for t in asyncio.all_tasks() if t is not me]


async def left_running(port: int) -> list[str]:
    await asyncio.sleep(0.1)  # closes and exits in progress settle
    return _children() + _sockets_to(port) + _tasks()


# --- the engine's side ---------------------------------------------------------------------------
Expect = tuple[
    str, str
]  # ("failed", error kind) | ("error", text in the message) | ("measured", "")


@dataclass
class EngineScenario:
    """A hostile engine swept once: `server` sets its behaviour, `during` acts while it runs."""

    name: str
    expect_as: Expect
    server: dict[str, Any] = field(default_factory=dict)
    levels: tuple[int, ...] = (2,)
    requests: int = 4
    model: str = "hostile"
    deadlines: Deadlines = DEADLINES
    during: Callable[[HostileServer], Awaitable[None]] | None = None
    last_measured: bool = False  # the right outcome also needs the last level measured
    only_kind: bool = True  # every failure of that kind (else: that kind among others)
    hang_s: float = 60.0

    @property
    def expect(self) -> str:
        what, detail = self.expect_as
        return f"{what} {detail}".strip()

    async def run(self) -> Outcome:
        srv = HostileServer(**self.server)
        await srv.start()
        helper = asyncio.ensure_future(self.during(srv)) if self.during else None
        t0 = time.monotonic()
        got, hang = await self._sweep(srv.url)
        seconds = time.monotonic() - t0
        if helper is not None:
            helper.cancel()
            await asyncio.gather(helper, return_exceptions=True)
        await srv.stop()
        left = await left_running(srv.port)
        text, right, false_finish = self._judge(got)
        return Outcome(self.name, self.expect, text, seconds, right and not hang, false_finish,
                       hang, left)  # fmt: skip

    async def _sweep(self, url: str) -> tuple[SweepOutcome | BenchError | None, bool]:
        """One sweep within `hang_s`: what it gave (None: nothing) and whether it hung - the sweep
        keeps what it had when cancelled, which is a hang here."""
        got: SweepOutcome | BenchError | None = None
        try:
            async with asyncio.timeout(self.hang_s):
                got = await run_sweep(self._spec(url))
        except BenchError as err:
            return err, False
        except TimeoutError:
            return None, True
        if isinstance(got, SweepOutcome) and got.interrupted:
            return None, True
        return got, False

    def _spec(self, url: str) -> SweepSpec:
        wl = Workload(
            model=self.model,
            input_len=8,
            max_tokens=8,
            requests_per_level=self.requests,
            warmup_requests=1,
        )
        return SweepSpec(
            url=url,
            levels=list(self.levels),
            workload=wl,
            stall_timeout_s=STALL_S,
            tokenize_path=None,
            deadlines=self.deadlines,
        )

    def _judge(self, got: SweepOutcome | BenchError | None) -> tuple[str, bool, bool]:
        """(the outcome in words, whether it is the right one, whether it is a false finish)."""
        what, detail = self.expect_as
        if got is None:
            return "hang", False, False
        if isinstance(got, BenchError):
            return f"error: {got}"[:70], what == "error" and detail in str(got), False
        points = got.points
        failed = [p for p in points if p["level_failed"]]
        kinds = sorted({k for p in points for k in p["errors"]})
        text = f"{len(failed)}/{len(points)} levels failed ({', '.join(kinds) or 'no errors'})"
        measured = len(points) - len(failed)
        if what == "measured":
            return text, bool(points) and not failed, False
        if what == "error":
            return text, False, measured > 0
        first_failed = bool(points) and points[0]["level_failed"] and detail in points[0]["errors"]
        if self.last_measured:  # a disruption in the first level, then the server is back
            return text, first_failed and not points[-1]["level_failed"], False
        # the requests a level did not send once its first ones waited out (`abandoned`) go with
        # the kind that made it give up
        named = set(kinds) - {"abandoned"}
        kind_ok = named == {detail} if self.only_kind else detail in named
        return text, len(failed) == len(points) > 0 and kind_ok, measured > 0


@dataclass
class LearnedScenario(EngineScenario):
    """Swept once whole, then again after the engine went to keep-alives only (issue 49, item 8):
    the second sweep's first-token deadline is learned from the first's p99 TTFT
    (tools/learned_deadline.py), so it is cut there, not at the static deadline."""

    learned: float | None = None  # the second sweep's first-token deadline

    async def run(self) -> Outcome:
        srv = HostileServer(**self.server)
        await srv.start()
        t0 = time.monotonic()
        first = await run_sweep(self._spec(srv.url))
        wl = self._spec(srv.url).workload
        seen = {"server": None, "url": srv.url, "flags": {}, "workload": wl.model_dump(),
                "points": {str(p["max_concurrency"]): p for p in first.points}}  # fmt: skip
        ttft_s = served_ttft_s([seen], ServerRef(url=srv.url), wl, list(self.levels), None)
        self.deadlines = self.deadlines if ttft_s is None else self.deadlines.served(ttft_s)
        self.learned = self.deadlines.first_token_s
        got, hang = await self._sweep(srv.url)
        seconds = time.monotonic() - t0
        await srv.stop()
        left = await left_running(srv.port)
        text, right, false_finish = self._judge(got)
        right = right and ttft_s is not None and self.learned < STATIC_FIRST_TOKEN_S
        text = f"{text}; cut at {self.learned:g} s" if self.learned is not None else text
        return Outcome(self.name, self.expect, text, seconds, right and not hang, false_finish,
                       hang, left)  # fmt: skip


STATIC_FIRST_TOKEN_S = 30.0  # the learned-deadline row's static deadline (600 s by default)


async def _restart_after(srv: HostileServer, completions: int, down_s: float) -> None:
    while srv.completions < completions:
        await asyncio.sleep(0.01)
    await srv.restart(down_s)


ENGINE: list[EngineScenario] = [
    EngineScenario("healthy engine (control)", ("measured", "")),
    EngineScenario("header byte every 50 ms, never ends", ("failed", "head_timeout"),
                   {"mode": "trickle_head"}),
    EngineScenario("`: keepalive` comments forever", ("failed", "ttft_timeout"),
                   {"mode": "keepalive"}),
    EngineScenario("accepts, never answers", ("failed", "ttft_timeout"), {"mode": "silent"}),
    EngineScenario("tokens past max_tokens, forever", ("failed", "over_max_tokens"),
                   {"mode": "past_max", "gap_s": 0.01}),
    EngineScenario("tokens slower than the pace", ("failed", "deadline"),
                   {"mode": "slow_ok", "gap_s": 0.4}),
    EngineScenario("chunk of 1 MiB announced, comments in it", ("failed", "ttft_timeout"),
                   {"mode": "chunk_lie"}),
    EngineScenario("chunk smaller than its bytes", ("failed", "bad_response"),
                   {"mode": "chunk_short"}),
    EngineScenario("Content-Length 1 MB, then silence", ("failed", "deadline"),
                   {"mode": "length_lie"}),
    EngineScenario("`data: {not json`", ("failed", "bad_response"), {"mode": "junk_json"}),
    EngineScenario('`{"choices": 5}`', ("failed", "bad_response"), {"mode": "choices_5"}),
    EngineScenario("`event: error` then [DONE]", ("failed", "stream_error"),
                   {"mode": "error_event"}),
    EngineScenario("error message mid-stream", ("failed", "stream_error"),
                   {"mode": "error_mid"}),
    EngineScenario("stream without [DONE]", ("failed", "incomplete"), {"mode": "no_done"}),
    EngineScenario("/v1/models trickled", ("error", "did not answer within"),
                   {"models": "trickle"}, model=""),
    EngineScenario("/server_info trickled", ("measured", ""), {"info": "trickle"}),
    EngineScenario("level past its deadline (valid, slow)", ("failed", "level_deadline"),
                   {"mode": "slow_ok", "gap_s": 0.05}, levels=(1,), requests=40,
                   deadlines=Deadlines(**{**DEADLINES.to_job(), "level_s": 2.0})),
    EngineScenario("dies mid-level", ("failed", "connect"),
                   {"mode": "slow_ok", "gap_s": 0.01, "die_after": 4}, levels=(1, 2),
                   requests=6, only_kind=False),
    EngineScenario("restarts on the same port mid-level", ("failed", "disconnect"),
                   {"mode": "slow_ok", "gap_s": 0.01}, levels=(1, 1, 1, 1, 1), requests=6,
                   during=lambda s: _restart_after(s, 3, 0.3), last_measured=True),
    # round four (issue 49)
    EngineScenario("choices with indexes 0, 0, 7 for n=1", ("failed", "bad_response"),
                   {"mode": "extra_choices"}),
    LearnedScenario("keep-alives after serving whole", ("failed", "ttft_timeout"),
                    {"mode": "keepalive", "healthy_first": 5},
                    deadlines=Deadlines(**{**DEADLINES.to_job(),
                                           "first_token_s": STATIC_FIRST_TOKEN_S})),
]  # fmt: skip


async def run_all(scenarios: Sequence[Scenario]) -> list[Outcome]:
    out = []
    for s in scenarios:
        result = await s.run()
        out.append(result)
        mark = "ok" if result.right and not result.left else "WRONG"
        print(
            f"{result.name[:42]:42} {result.expect[:24]:24} {result.got[:58]:58} "
            f"{result.seconds:6.2f} {len(result.left):4}  {mark}",
            flush=True,
        )
        for thing in result.left:
            print(f"    left running: {thing}")
    return out


def summary(results: Sequence[Outcome]) -> str:
    hangs = sum(r.hang for r in results)
    false = sum(r.false_finish for r in results)
    left = sum(1 for r in results if r.left)
    return f"scenarios {len(results)}, hangs {hangs}, false finishes {false}, left running {left}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", help="scenarios whose name contains one of these")
    ap.add_argument("--hang-s", type=float, default=60.0, help="a run past this is a hang")
    ns = ap.parse_args(argv)
    chosen = [s for s in ENGINE if not ns.only or any(w in s.name for w in ns.only)]
    for s in chosen:
        s.hang_s = ns.hang_s
    print(
        f"deadlines: head {DEADLINES.head_s:g} s, first token {DEADLINES.first_token_s:g} s, "
        f"total max({DEADLINES.floor_s:g} s, first token + max_tokens / "
        f"{DEADLINES.pace_tok_s:g} tok/s), probes {DEADLINES.probe_s:g} s; stall {STALL_S:g} s"
    )
    print(f"{'scenario':42} {'right outcome':24} {'outcome':58} {'s':>6} {'left':>4}")
    results = asyncio.run(run_all(chosen))
    right = sum(r.right for r in results)
    print(f"right outcomes {right}/{len(results)}")
    line = summary(results)
    print(line)
    bad = right < len(results) or any(r.hang or r.false_finish or r.left for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
