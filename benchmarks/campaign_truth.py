"""A finished campaign's pick against the truth: every configuration the campaign measured over all
its levels is launched again, one server at a time, in a new random order each round, and swept
by `agent bench` at every level for at least `--level-s` seconds. Its truth is the median over the
rounds of its geometric mean over the levels divided by the baseline's in the same round; the
pick's true rank is its place among them (issue 28, item 3).

    PYTHONPATH=. .venv/bin/python benchmarks/campaign_truth.py RUN [--rounds 3] [--level-s 5]
        [--also NAME=FLAGS ...] [--top N]

Each round launches every configuration afresh, so launch-to-launch variance - large on vLLM's CPU
build - is inside the truth, and the order changes so that a slow drift of the box lands on a
different configuration each round. Printed per configuration: what the campaign measured
(its ratio to the baseline by the run's figures), the truth (median, lowest and highest round),
and the true rank - configurations given with --also (another tuner's pick) ranked beside them;
then the pick's line: its verdict, its true rank of N and true gain. Run by hand on a quiet
machine (docs/engines.md has the figures); every server it starts is killed on every way out.

The client is the agent's own: benchmarks/truth_client.py (httpx, independent of tools/bench)
starved vLLM's CPU build on 2 cores - its engine busy-polls both, and that client's CPU time came
out of the server's: 320 tok/s at C=8 where `agent bench` (1.5 % client CPU) measured 1,043 on the
same server. `agent bench` was checked against vLLM's own client in issue 29 (docs/benchmark.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.report import gather
from agent.report.figures import Figures
from agent.report.measured import norm_flags
from benchmarks.deploy_check import CheckError, ready
from benchmarks.kill_resume_lab import free_port
from benchmarks.processes import BenchError, Procs
from state.events import read_events
from tools.bench import results
from tools.domain import stats
from tools.hosts.local import kill_group
from tools.servers.command import build_command
from tools.servers.profiles import Engine, recorded_engine

AGENT = Path(sys.executable).with_name("agent")
BENCH_S = 1800.0  # one sweep (agent bench's own deadlines end a stuck level first)


class TruthError(BenchError):
    """A run that cannot be measured (no baseline, no recommendation, a server that fails)."""


@dataclass
class Candidate:
    name: str
    flags: dict[str, Any]
    claimed: float | None  # its ratio to the baseline by the campaign's own figures


@dataclass
class Served:
    """How the run's servers are started: its command, engine profile and readiness deadline."""

    command: str
    engine: Engine
    ready_s: float
    levels: list[int]
    input_len: int
    max_tokens: int


def identity(flags: dict[str, Any]) -> str:
    """One configuration however its flags are spelled (agent/report/measured.norm_flags)."""
    return json.dumps(norm_flags(flags))


def candidates(
    f: Figures, also: list[tuple[str, dict[str, Any]]], top: int | None = None
) -> list[Candidate]:
    """The configurations measured at every level of the run (with `top`, only the `top` best
    by the run's own ratios), the baseline first, then each of `also` (name, flags) that is not
    among them."""
    if f.baseline is None:
        raise TruthError("the run measured no baseline")
    levels = set(f.baseline.levels)
    full = [c for c in f.m.configs if levels <= set(c.levels)]
    if top is not None:
        full = sorted(full, key=lambda c: -(f.ratio(c) or 0.0))[:top]
    out: dict[str, Candidate] = {}
    for c in [f.baseline, *full]:
        out.setdefault(identity(c.flags), Candidate(c.name, dict(c.flags), f.ratio(c)))
    for name, flags in also:
        out.setdefault(identity(flags), Candidate(name, flags, None))
    return list(out.values())


async def serve_and_measure(
    s: Served, c: Candidate, args: argparse.Namespace, procs: Procs
) -> dict[int, float]:
    """Launch c's server, measure it at each level, stop it: tok/s per level."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "server.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                ["bash", "-c", build_command(s.command, c.flags, s.engine, port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            procs.items.append(proc)  # killed by Procs.run on Ctrl-C or SIGTERM
            try:  # in the loop, not a thread: SIGTERM (Procs.run) ends it at once
                await ready(s.engine, proc, log_path, port, s.ready_s)
                return await measure(url, s, args)
            except CheckError as e:
                raise TruthError(f"{c.name}: {e}") from None
            finally:
                await kill_group(proc.pid)  # the agent's own: SIGTERM, a grace, SIGKILL
                proc.poll()  # reaped when gone; else Procs.run reaps it at the end


async def measure(url: str, s: Served, args: argparse.Namespace) -> dict[int, float]:
    """`agent bench` at every level, at least `--level-s` seconds each: tok/s per level."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        argv = [str(AGENT), "bench", "--url", url, "--concurrency", ",".join(map(str, s.levels))]
        argv += ["--input-len", str(s.input_len), "--max-tokens", str(s.max_tokens)]
        argv += ["--min-level-seconds", f"{args.level_s:g}", "--json", str(out)]
        bench = await asyncio.create_subprocess_exec(
            *argv,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own group, with any client processes it starts
        )
        try:
            _, err = await asyncio.wait_for(bench.communicate(), BENCH_S)
        except TimeoutError:
            raise TruthError(f"agent bench on {url} ran past {BENCH_S:.0f} s") from None
        finally:  # past its deadline, or this script ended (SIGTERM cancels this task)
            if bench.returncode is None:
                await kill_group(bench.pid)
                await bench.wait()
        if bench.returncode != 0 or not out.exists():
            last = (err.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
            raise TruthError(f"agent bench exited {bench.returncode}: {last}")
        return results.sweep_of(results.load(str(out)))


async def main_async(args: argparse.Namespace, procs: Procs) -> None:
    f = gather(args.run, read_events(args.run / "events.jsonl").events)
    rec = f.m.recommendation
    if rec is None or rec.config is None:
        raise TruthError(f"{args.run} has no recommendation: the campaign did not finish")
    server = f.m.state.config.get("server") or {}
    bench = f.m.state.config.get("bench") or {}
    assert f.baseline is not None
    served = Served(
        str(server["command"]),
        recorded_engine(server),
        float(server.get("ready_timeout_s") or 600),
        sorted(f.baseline.levels),
        int(bench.get("input_len") or 64),
        int(bench.get("max_tokens") or 64),
    )
    cands = candidates(f, [("the pick", rec.config), *args.also], args.top)
    print(f"run {args.run}: {len(cands)} configurations x {args.rounds} rounds", flush=True)
    rng = random.Random(f"campaign-truth/{args.run.name}")
    ratios: dict[int, list[float]] = {i: [] for i in range(len(cands))}
    for r in range(args.rounds):
        order = list(range(len(cands)))
        rng.shuffle(order)
        geo: dict[int, float] = {}
        for i in order:
            sweep = await serve_and_measure(served, cands[i], args, procs)
            geo[i] = stats.geomean(sweep.values())
            shown = " ".join(f"C={lv}:{v:.0f}" for lv, v in sweep.items())
            print(f"  round {r} {time.strftime('%H:%M:%S')} {cands[i].name}: {shown}", flush=True)
        for i in ratios:
            ratios[i].append(geo[i] / geo[0])
    truth = {i: statistics.median(rs) for i, rs in ratios.items()}
    ranked = sorted(truth, key=lambda i: -truth[i])
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.rounds} rounds", end="")
    print(f" x {args.level_s:g} s per level, levels {served.levels}")
    for rank, i in enumerate(ranked, 1):
        c, rs = cands[i], ratios[i]
        claimed = "-" if c.claimed is None else f"{c.claimed:.3f}x"
        print(
            f"  {rank:2d}. {c.name}: campaign {claimed}, truth {truth[i]:.3f}x "
            f"({min(rs):.3f}-{max(rs):.3f}) {identity(c.flags)}"
        )
    at = next(i for i, c in enumerate(cands) if identity(c.flags) == identity(rec.config))
    print(
        f"pick ({rec.verdict}): {cands[at].name}, "
        f"true rank {ranked.index(at) + 1} of {len(cands)}, true gain {truth[at]:.3f}x; "
        f"the best by the truth {truth[ranked[0]]:.3f}x"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished run folder")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--level-s", type=float, default=5.0)
    parser.add_argument(
        "--top",
        type=int,
        metavar="N",
        help="only the N best configurations by the campaign's own ratios (with the baseline, "
        "the pick and --also): a shorter truth, the rank among those",
    )
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="NAME=FLAGS",
        help="another configuration to rank, FLAGS as JSON in agent.toml's form (another "
        "tuner's pick: benchmarks/vllm_sweep.py prints one)",
    )
    args = parser.parse_args()
    try:
        args.also = [(n, dict(json.loads(f))) for n, _, f in (a.partition("=") for a in args.also)]
    except ValueError as e:
        parser.error(f"--also: NAME={{json flags}}: {e}")
    if args.top is not None and args.top < 1:
        parser.error("--top: at least 1")
    if not (args.run / "events.jsonl").exists():
        parser.error(f"{args.run} is not a run folder (no events.jsonl)")
    procs = Procs()
    return procs.run(main_async(args, procs))


if __name__ == "__main__":
    raise SystemExit(main())
