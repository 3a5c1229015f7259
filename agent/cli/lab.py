"""`agent lab setup llama.cpp [--dir DIR]`: a real lab on this machine (docs/engines.md).

Finds llama-server on PATH or in the cache, else builds it (about 20 minutes on 2 cores, once per
version and CPU); makes a tiny target model and its draft; writes DIR/agent.toml. Exit codes: 0
ready, 1 llama-server could not be found or built, 2 bad usage.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from agent.cli.args import Parser

ENGINES = ("llama.cpp",)  # the engines a lab can be set up for


def parser() -> argparse.ArgumentParser:
    ap = Parser(prog="agent lab", description="Set up a real lab on this machine.")
    sub = ap.add_subparsers(dest="action", required=True, parser_class=Parser)
    p = sub.add_parser("setup", help="build or find the engine, make models, write agent.toml")
    p.add_argument("engine", choices=ENGINES)
    p.add_argument("--dir", type=Path, default=Path("llama-lab"), help="default: ./llama-lab")
    return ap


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    from tools.servers.llama_cpp.build import BuildError, find, find_or_build
    from tools.servers.llama_cpp.lab import setup

    if find() is None:
        print(
            "agent lab: llama-server not found; building it (about 20 minutes on 2 cores, once)",
            file=sys.stderr,
        )
    try:
        binary = find_or_build()
    except BuildError as err:
        print(f"agent lab: {err}", file=sys.stderr)
        return 1
    try:
        lab = setup(args.dir, binary)
    except OSError as err:
        print(f"agent lab: cannot write the lab into {args.dir}: {err}", file=sys.stderr)
        return 2
    print(f"llama-server: {lab.binary}")
    print(f"models: {lab.target}, {lab.draft}")
    print(f"config: {lab.config}")
    quoted = shlex.quote(str(lab.config))
    print(f'next: agent run --config {quoted} --goal "beat baseline" --model autopilot')
    return 0
