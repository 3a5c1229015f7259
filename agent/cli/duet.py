"""`agent duet`: is B faster than A? Both servers up at once, measured in blocks alternated at each
level until an anytime-valid interval decides (tools/bench/duet.py, docs/statistics.md "Duets").

    agent duet --a URL --b URL [--concurrency 1,8] [--rounds 12] [--max-tokens 128]
               [--input-len 512] [--requests-per-level N] [--model M] [--seed 0] [--json PATH]

Prints each round (B over A at each level, and the objective's ratio: the geometric mean over
the levels) and the decision: "B wins", "no gain worth deploying" or "not established", with the
interval. Exit codes: 0 measured (whatever the decision), 1 a server could not be benchmarked,
2 bad usage, 130 interrupted (the rounds measured so far are printed).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from agent.cli.bench import levels_arg
from state.atomic import write_json_atomic
from tools.bench.duet import DuetOutcome, decision_text, round_lines, run_duet
from tools.bench.schema import Workload
from tools.bench.sweep import BenchError, SweepSpec
from tools.domain import stats

MAX_ROUNDS = 30  # past this a duet has not decided because the gain is under the noise, not short


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="agent duet",
        description="Compare two servers up at once, in blocks alternated at each level.",
    )
    ap.add_argument("--a", required=True, metavar="URL", help="the reference (the baseline)")
    ap.add_argument("--b", required=True, metavar="URL", help="the challenger")
    ap.add_argument("--concurrency", type=levels_arg, default=[1, 8], help="levels (default 1,8)")
    ap.add_argument("--rounds", type=int, default=stats.MAX_PAIRS, help="at most (default 12)")
    ap.add_argument("--max-tokens", type=int, default=128, help="output tokens per request")
    ap.add_argument("--input-len", type=int, default=512, help="prompt tokens per request")
    ap.add_argument("--requests-per-level", type=int, default=None, help="per block")
    ap.add_argument("--model", default="", help="default: the first of /v1/models")
    ap.add_argument("--seed", type=int, default=0, help="prompts and the blocks' order")
    ap.add_argument("--json", type=Path, default=None, help="write the rounds and decision here")
    return ap


def main(argv: list[str]) -> int:
    ap = parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if not 2 <= args.rounds <= MAX_ROUNDS:
        print(f"agent duet: --rounds must be 2 to {MAX_ROUNDS}, got {args.rounds}", file=sys.stderr)
        return 2
    for name in ("max_tokens", "input_len", "requests_per_level"):
        value = getattr(args, name)
        if value is not None and value < 1:
            flag = name.replace("_", "-")
            print(f"agent duet: --{flag} must be positive, got {value}", file=sys.stderr)
            return 2
    workload = Workload(
        model=args.model,
        input_len=args.input_len,
        max_tokens=args.max_tokens,
        seed=args.seed,
        requests_per_level=args.requests_per_level,
    )
    a, b = (
        SweepSpec(url=url, levels=args.concurrency, workload=workload) for url in (args.a, args.b)
    )
    try:
        outcome = asyncio.run(run_duet(a, b, max_rounds=args.rounds, seed=args.seed))
    except BenchError as err:
        print(f"agent duet: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("agent duet: interrupted before the first round finished", file=sys.stderr)
        return 130
    for line in [*round_lines(outcome), decision_text(outcome)]:
        print(line)
    if args.json is not None:
        write_json_atomic(args.json, record(outcome, args))
    return 130 if outcome.stopped == "interrupted" else 0


def record(outcome: DuetOutcome, args: argparse.Namespace) -> dict[str, Any]:
    p = outcome.paired
    found = p.interval()
    return {
        "a": args.a,
        "b": args.b,
        "levels": args.concurrency,
        "max_rounds": outcome.max_rounds,
        "stopped": outcome.stopped,
        "ratio": p.ratio,
        "interval": list(found) if found is not None else None,
        "verdict": outcome.verdict,
        "decision": decision_text(outcome),
        "rounds": [
            {"ratio": r.ratio, "a": r.a, "b": r.b, "first": r.first} for r in outcome.rounds
        ],
    }
