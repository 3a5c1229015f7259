"""`agent lab setup llama.cpp [--dir DIR]`: a real lab on this machine (docs/engines.md).
`agent lab setup vllm [--dir DIR]`: real vLLM's CPU build, in a venv cached outside the project,
and a tiny Llama made here (docs/engines.md).
`agent lab setup eagle3-pipeline [--dir DIR] [--defect]`: the drafter pipeline as long jobs, then
the simulator serving the trained drafter (docs/pipeline.md).

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

ENGINES = ("llama.cpp", "vllm", "eagle3-pipeline")  # the labs that can be set up
PIPELINE = "eagle3-pipeline"
VLLM = "vllm"


def parser() -> argparse.ArgumentParser:
    ap = Parser(prog="agent lab", description="Set up a real lab on this machine.")
    sub = ap.add_subparsers(dest="action", required=True, parser_class=Parser)
    p = sub.add_parser("setup", help="build or find the engine, make models, write agent.toml")
    p.add_argument("engine", choices=ENGINES)
    p.add_argument("--dir", type=Path, help="default: ./llama-lab, ./vllm-lab or ./eagle3-lab")
    p.add_argument(
        "--defect", action="store_true", help="eagle3-pipeline: the data script drops </think>"
    )
    p.add_argument(
        "--time-scale", type=float, help="eagle3-pipeline: the stages run N times faster"
    )
    return ap


def main(argv: list[str]) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.engine == PIPELINE:
        return pipeline(args.dir or Path("eagle3-lab"), args.defect, args.time_scale)
    if args.defect or args.time_scale is not None:
        ap.error("--defect and --time-scale are options of the eagle3-pipeline lab")
    if args.engine == VLLM:
        return vllm(args.dir or Path("vllm-lab"))
    args.dir = args.dir or Path("llama-lab")
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
    if lab.probe is not None:  # this machine's bandwidth, for each level's floor
        print(f"memory: {lab.probe.describe()}")
    print(f"config: {lab.config}")
    quoted = shlex.quote(str(lab.config))
    print(f'next: agent run --config {quoted} --goal "beat baseline" --model autopilot')
    return 0


def vllm(folder: Path) -> int:
    from tools.servers.hf_model import ModelFilesError
    from tools.servers.vllm_cpu.build import BuildError, find_or_build, find_python
    from tools.servers.vllm_cpu.lab import setup

    if find_python() is None:
        print(
            "agent lab: vLLM's CPU venv not found; installing it (minutes, once)", file=sys.stderr
        )
    try:
        python = find_or_build()
    except (BuildError, OSError) as err:
        print(f"agent lab: {err}", file=sys.stderr)
        return 1
    try:
        lab = setup(folder, python)
    except (OSError, RuntimeError, ModelFilesError) as err:
        print(f"agent lab: cannot write the lab into {folder}: {err}", file=sys.stderr)
        return 2
    print(f"vllm: {lab.python} -m vllm.entrypoints.openai.api_server")
    print(f"model: {lab.model}")
    if lab.probe is not None:  # this machine's bandwidth, for each level's floor
        print(f"memory: {lab.probe.describe()}")
    print(f"config: {lab.config}")
    quoted = shlex.quote(str(lab.config))
    print(f'next: agent run --config {quoted} --goal "beat baseline" --model autopilot')
    return 0


def pipeline(folder: Path, defect: bool, scale: float | None) -> int:
    from tools.servers.pipeline_lab import PIPELINE_SCALE, setup

    if scale is not None and not scale > 0:
        print(f"agent lab: --time-scale must be > 0, got {scale:g}", file=sys.stderr)
        return 2
    try:
        lab = setup(folder, defect, scale or PIPELINE_SCALE)
    except OSError as err:
        print(f"agent lab: cannot write the lab into {folder}: {err}", file=sys.stderr)
        return 2
    bug = "; datagen.sh has the </think> defect" if defect else ""
    print(f"host workdir: {lab.work} (scripts/: the stages{bug})")
    print(f"config: {lab.config}")
    quoted = shlex.quote(str(lab.config))
    goal = "train an EAGLE-3 drafter and beat the baseline"
    print(f'next: agent run --config {quoted} --goal "{goal}" --model autopilot')
    return 0
