"""Argument parsing shared by the subcommands: bad usage is one line on stderr and exit 2."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path

DEFAULT_RUNS_DIR = "runs"


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"agent {self.prog.split()[-1]}: {message}", file=sys.stderr)
        raise SystemExit(2)


def runs_dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--runs-dir",
        type=Path,
        default=Path(os.environ.get("AGENT_RUNS_DIR", DEFAULT_RUNS_DIR)),
        help="the folder holding run folders (default: ./runs or $AGENT_RUNS_DIR)",
    )


def positive(kind: type[int] | type[float], hint: str = "") -> Callable[[str], float]:
    """An argparse type for a budget: a negative, zero or infinite one would never run out."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}{hint}")
        return value

    return parse


def fleet_args(p: argparse.ArgumentParser) -> None:
    """`agent run --fleet ray [--boxes N]`: trials in parallel on a Ray cluster (docs/fleet.md)."""
    p.add_argument(
        "--fleet",
        choices=["ray"],
        help="run trials in parallel on a Ray cluster: [fleet] of the config, RAY_ADDRESS, or "
        "with --boxes a local cluster of simulated boxes (docs/fleet.md)",
    )
    p.add_argument(
        "--boxes",
        type=positive(int),
        help="with --fleet: start a local Ray cluster of N boxes (the lab) instead of joining one",
    )
