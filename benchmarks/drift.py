"""A campaign on the llama.cpp lab on a box whose load steps, against the paired truth of its pick
(issue 29). Two CPU hogs run for the campaign's first minutes and then stop ("falls"), or start
after them and run to its end ("rises"). After the campaign, with no hog, its pick and the baseline
are served at once and measured by a client of this script's own (not `agent bench`), alternated
level by level, the order swapped from one repeat to the next (ABBA). Run by hand
(docs/statistics.md, "On a real engine"):

    PYTHONPATH=. .venv/bin/python benchmarks/drift.py [--directions falls,rises]
        [--hog-minutes 4] [--max-minutes 30] [--repeats 6] [--level-s 4]

Printed per direction: the campaign's exit status and minutes, its verdict and the gain it states
(the paired ratio of a win; "not established" and what it would take otherwise), the pick's
truth - the median over the repeats of the ratio of its geometric mean over the levels to the
baseline's, measured back to back - with the range, and whether the claim is within 15 % of it.

The truth client is benchmarks/truth_client.py (closed loop, fresh prompts, the server's own
token counts). Every process it starts - the campaign, the hogs, the servers - is killed on
every way out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.processes import BenchError, Procs, wait_ready
from benchmarks.truth_client import REQUEST_S, level_tok_s
from tools.bench.prompt_length import calibrate
from tools.domain import stats
from tools.domain.config import free_port, load_config
from tools.domain.space import render_flags
from tools.servers.llama_cpp.build import find
from tools.servers.llama_cpp.lab import setup

AGENT = Path(sys.executable).with_name("agent")
CAMPAIGN_SLACK_S = 600.0  # past --max-minutes: the wrap-up the budget leaves, then it is killed
WITHIN = 0.15  # the bound on a claim against the truth


class DriftError(BenchError):
    """A step that cannot go on (no llama-server, a campaign without a recommendation); one line."""


@dataclass
class Campaign:
    direction: str
    status: int
    minutes: float
    rec: dict[str, Any]
    folder: Path


@dataclass
class Truth:
    ratio: float  # median over the repeats of pick / baseline, geometric means over the levels
    low: float
    high: float
    per_level: dict[int, float]  # the median ratio at each level


class Hogs:
    """Two busy loops, each a process of its own, started and stopped on the campaign's clock."""

    def __init__(self, procs: Procs, count: int = 2) -> None:
        self.procs, self.count = procs, count
        self.live: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        for _ in range(self.count - len(self.live)):
            hog = subprocess.Popen(
                [sys.executable, "-c", "while True: pass"], start_new_session=True
            )
            self.procs.items.append(hog)
            self.live.append(hog)

    def stop(self) -> None:
        for hog in self.live:
            hog.kill()
            hog.wait()
        self.live = []


def run_campaign(
    config: Path, runs: Path, direction: str, args: argparse.Namespace, procs: Procs
) -> Campaign:
    """`agent run` on the lab with the hogs switched at --hog-minutes; its recommendation."""
    argv = [str(AGENT), "run", "--config", str(config), "--goal", "beat baseline"]
    argv += ["--model", "autopilot", "--runs-dir", str(runs), "--run-id", direction]
    argv += ["--max-minutes", str(args.max_minutes)]
    log = runs / f"{direction}.log"
    hogs = Hogs(procs)
    if direction == "falls":
        hogs.start()
    start = time.monotonic()
    with log.open("ab") as out:
        agent = subprocess.Popen(argv, stdout=out, stderr=out, start_new_session=True)
    procs.items.append(agent)
    deadline = start + args.max_minutes * 60 + CAMPAIGN_SLACK_S
    try:
        while agent.poll() is None:
            after = time.monotonic() - start >= args.hog_minutes * 60
            if after and direction == "falls":
                hogs.stop()
            if after and direction == "rises":
                hogs.start()
            if time.monotonic() > deadline:
                raise DriftError(f"the {direction} campaign ran past its deadline; see {log}")
            time.sleep(1.0)
    finally:
        hogs.stop()
    minutes = (time.monotonic() - start) / 60
    found = runs / direction / "recommendation.json"
    if not found.exists():
        raise DriftError(f"the {direction} campaign wrote no recommendation; see {log}")
    rec = json.loads(found.read_text())
    return Campaign(direction, agent.returncode, minutes, rec, runs / direction)


async def serve(command: str, flags: dict[str, Any], work: Path, name: str, procs: Procs) -> str:
    """A llama-server of `flags` on a free port, ready; its URL."""
    port = free_port(18400 + 10 * len(procs.items))
    argv = [*shlex.split(command), *render_flags(flags), "--host", "127.0.0.1"]
    argv += ["--port", str(port)]
    log = work / f"{name}-server.txt"
    with log.open("ab") as out:
        server = subprocess.Popen(argv, stdout=out, stderr=out, start_new_session=True)
    procs.items.append(server)
    url = f"http://127.0.0.1:{port}"
    await wait_ready(url, server, log)
    return url


async def truth(
    command: str,
    base: dict[str, Any],
    pick: dict[str, Any],
    levels: list[int],
    work: Path,
    args: argparse.Namespace,
    procs: Procs,
) -> Truth:
    """The pick against the baseline, both served at once, alternated level by level (ABBA)."""
    urls = [await serve(command, base, work, "baseline", procs)]
    urls.append(await serve(command, pick, work, "pick", procs))
    words = (await calibrate(urls[0], "target", 64, "/tokenize")).words
    rng = random.Random(f"drift-truth/{work}")
    ratios: list[float] = []
    per_level: dict[int, list[float]] = {c: [] for c in levels}
    limits = httpx.Limits(max_connections=2 * max(levels))
    level_deadline = 2 * REQUEST_S + args.level_s  # the warm-up, the window, the last answers
    async with httpx.AsyncClient(timeout=REQUEST_S, limits=limits) as client:
        for repeat in range(args.repeats):
            order = (0, 1) if repeat % 2 == 0 else (1, 0)
            got: dict[int, dict[int, float]] = {0: {}, 1: {}}
            for level in levels:
                for which in order:
                    measured = level_tok_s(client, urls[which], level, args.level_s, words, rng)
                    try:  # a server that trickles bytes meets each read's timeout late, or never
                        got[which][level] = await asyncio.wait_for(measured, level_deadline)
                    except TimeoutError:
                        raise DriftError(
                            f"C={level} on {urls[which]} took over {level_deadline:.0f} s"
                        ) from None
                per_level[level].append(got[1][level] / got[0][level])
            ratio = stats.geomean(got[1].values()) / stats.geomean(got[0].values())
            print(f"  truth repeat {repeat}: pick / baseline {ratio:.3f}", flush=True)
            ratios.append(ratio)
    return Truth(
        statistics.median(ratios),
        min(ratios),
        max(ratios),
        {c: statistics.median(r) for c, r in per_level.items()},
    )


def claimed(rec: dict[str, Any]) -> tuple[float | None, str]:
    """The gain the recommendation states (None when it claims none) and its words."""
    paired = rec.get("paired") or {}
    if rec["verdict"] == "win":
        ratio = float(paired.get("ratio") or rec["geomean_ratio"])
        return ratio, paired.get("stated") or f"{ratio:.3f}x by the sweeps' means"
    if rec["verdict"] == "baseline":
        return None, "no configuration beat the baseline"
    if not paired:  # not established for want of pairs (the baseline drifted)
        return None, f"{rec['verdict']}: no launch pairs ({rec['geomean_ratio']:.3f}x by the means)"
    return None, f"{rec['verdict']}: {paired.get('stated', '')} {paired.get('needs', '')}".strip()


def row(c: Campaign, t: Truth | None) -> str:
    gain, words = claimed(c.rec)
    head = f"{c.direction:5s} exit {c.status} {c.minutes:5.1f} min | {words}"
    drift = c.rec.get("drift")
    if drift:
        head += f" | drift {drift['change']:+.1%} of the baseline"
    if t is None:
        return head + " | pick = baseline, no truth to measure"
    levels = " ".join(f"C={c_}:{r:.3f}" for c_, r in t.per_level.items())
    head += f" | truth {t.ratio:.3f}x ({t.low:.3f}-{t.high:.3f}; {levels})"
    if gain is None:
        return head + " | claim: none (allowed)"
    off = gain / t.ratio - 1
    return head + f" | claim / truth {off:+.1%} ({'within' if abs(off) <= WITHIN else 'OUTSIDE'})"


async def main_async(args: argparse.Namespace, procs: Procs) -> None:
    binary = find()
    if binary is None:
        raise DriftError("no llama-server: run .ci/build-llama-server first")
    work = Path(tempfile.mkdtemp(prefix="drift-"))
    print(f"work folder: {work}", flush=True)
    lab = setup(work / "lab", binary)
    config = load_config(lab.config)
    base = dict(config.search["baseline"])
    levels = list(config.bench.concurrency)
    runs = work / "runs"
    runs.mkdir()
    lines = []
    for direction in args.directions:
        print(f"{direction}: campaign started {time.strftime('%H:%M:%S')}", flush=True)
        campaign = run_campaign(lab.config, runs, direction, args, procs)
        rec = campaign.rec
        pick = (rec.get("candidate") or {}).get("config") or rec["config"]
        measured = None
        if rec["verdict"] != "baseline":  # the pick is another configuration than the baseline
            measured = await truth(
                config.server.command, base, pick, levels, campaign.folder, args, procs
            )
        procs.kill_all()
        procs.items.clear()
        lines.append(row(campaign, measured))
        print(lines[-1], flush=True)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"\n{when}, 2 hogs for {args.hog_minutes:g} min, truth: {args.repeats} repeats", end="")
    print(f" x {args.level_s:g} s per level")
    print("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directions", default="falls,rises")
    parser.add_argument("--hog-minutes", type=float, default=4.0)
    parser.add_argument("--max-minutes", type=float, default=30.0)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--level-s", type=float, default=4.0)
    args = parser.parse_args()
    args.directions = args.directions.split(",")
    unknown = set(args.directions) - {"falls", "rises"}
    if unknown:
        parser.error(f"--directions: falls and/or rises, got {sorted(unknown)}")
    procs = Procs()
    return procs.run(main_async(args, procs))


if __name__ == "__main__":
    raise SystemExit(main())
