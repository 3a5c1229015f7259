"""`python -m sim.pipeline STAGE [options]`: one stage of the drafter pipeline (docs/pipeline.md).

Exit codes: 0 done, 1 the stage failed (the log says why), 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sim.pipeline import stages
from sim.pipeline.clock import Clock, StageFailed, say

STAGES = ("datagen", "check", "extract", "vocab", "train", "convert")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m sim.pipeline", description=__doc__)
    ap.add_argument("stage", choices=STAGES)
    ap.add_argument("--workdir", type=Path, default=Path("."), help="where the files go")
    ap.add_argument("--time-scale", type=float, default=1.0, help="run N times faster")
    ap.add_argument("--fail", choices=["oom", "disk", "killed"], help="fail this way part-way")
    ap.add_argument("--fail-at", type=float, default=0.5, help="where the fault hits (0..1)")
    ap.add_argument("--samples", type=int, default=10000, help="datagen: how many; check: expect")
    ap.add_argument("--defect", action="store_true", help="datagen: drop some </think> tags")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=3, help="train: epochs")
    ap.add_argument("--ckpt", help="convert: checkpoint folder (default: the latest)")
    ap.add_argument("--out", default="drafter", help="convert: output folder")
    ap.add_argument("--keep-layout", action="store_true", help="convert: keep midlayer.* keys")
    return ap


def main(argv: list[str]) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if not args.time_scale > 0 or not 0 <= args.fail_at <= 1:
        ap.error("--time-scale must be > 0 and --fail-at in [0, 1]")
    if args.samples <= 0 or args.epochs <= 0:
        ap.error("--samples and --epochs must be > 0")
    work = args.workdir
    clock = Clock(args.time_scale, args.fail, args.fail_at)
    try:
        work.mkdir(parents=True, exist_ok=True)
        if args.stage == "datagen":
            stages.datagen(work, clock, args.samples, args.defect, args.seed)
        elif args.stage == "check":
            stages.check(work, args.samples)
        elif args.stage == "extract":
            stages.extract(work, clock)
        elif args.stage == "vocab":
            stages.vocab(work, clock)
        elif args.stage == "train":
            stages.train(work, clock, args.epochs)
        else:
            stages.convert(work, clock, args.ckpt, args.out, args.keep_layout)
    except StageFailed as err:
        say(f"{args.stage} failed: {err}")
        return err.code
    except KeyboardInterrupt:
        say(f"{args.stage} interrupted")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
