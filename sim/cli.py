"""`agent sim serve|truth|gpus ...` (the lead's CLI calls `main(argv, ranking)` with argv after
"sim"). Ranking configurations by an objective (`truth --space`, the objective line) is the
campaign's formula, which sim/ may not import: the caller passes it in (`Ranking`, implemented by
tools/domain/lab_truth.py); `python -m sim truth` without it prints the per-level truth only."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any, Protocol

from sim import gpus
from sim.flags import FlagError, parse_server_args
from sim.model import Model
from sim.space import DEFAULT_BASE_FLAGS, DEFAULT_LEVELS, SpaceError, load_space
from sim.truth import latency, throughput_of

USAGE = (
    "usage: agent sim {serve,truth,gpus} ...  "
    "(serve: the server; truth: the model; gpus: GPU-memory reservations)"
)


class Ranking(Protocol):
    """tools/domain/lab_truth.py: the campaign's objective over the truth."""

    def config_value(self, config: Mapping[str, Any], *args: Any, **kwargs: Any) -> float: ...

    def optimum(
        self, space: Mapping[str, Any], *args: Any, **kwargs: Any
    ) -> tuple[dict[str, Any], float]: ...


def main(argv: list[str], ranking: Any = None) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "serve" and any(a in ("-h", "--help") for a in rest):
        serve_parser(rest).print_help()
        return 0
    if command == "serve":
        from sim.serve import main as serve  # the server stack loads only when serving

        return serve(rest)
    if command == "truth":
        return truth(rest, ranking)
    if command == "gpus":
        return show_gpus(rest)
    print(f"agent sim: unknown command {command!r}\n{USAGE}", file=sys.stderr)
    return 2


# what each SGLang flag the simulator accepts does (sim/flags.py parses them); shown by --help
SERVE_HELP = {
    "--model-path": "the model to serve (a name: the simulator loads nothing)",
    "--served-model-name": "the model name the OpenAI API reports (default: --model-path)",
    "--host": "the address to listen on",
    "--port": "the port to listen on (0: any free port, printed in the log)",
    "--tp": "tensor parallelism: GPUs the model is split over",
    "--attention-backend": "the attention kernels; each has its own speed in the model",
    "--cuda-graph-max-bs": "the largest batch replayed as a CUDA graph; bigger batches run eagerly",
    "--disable-cuda-graph": "no CUDA graphs: every decode step runs eagerly (slower)",
    "--speculative-algorithm": "speculative decoding: a draft proposes tokens the model verifies",
    "--speculative-draft-model-path": "the draft model of EAGLE/EAGLE3",
    "--speculative-num-steps": "draft steps per verification",
    "--speculative-eagle-topk": "draft branches kept per step",
    "--speculative-num-draft-tokens": "draft tokens verified per step",
    "--disable-custom-all-reduce": "use NCCL's all-reduce instead of the custom kernel",
    "--enable-flashinfer-allreduce-fusion": "fuse the all-reduce with the next norm (FlashInfer)",
    "--max-running-requests": "the most requests decoded at once; the others wait in a queue",
    "--mem-fraction-static": "the share of GPU memory for the weights and the KV cache",
    "--context-length": "the longest prompt plus output a request may have",
}


def serve_parser(argv: list[str]) -> argparse.ArgumentParser:
    """`agent sim serve`'s parser, every flag with a line of help and its default."""
    from sim.flags import FlagError, build_parser, profile_in

    try:
        profile = profile_in(argv)
    except FlagError:
        profile = None
    p = build_parser("agent sim serve", profile)
    for action in p._actions:
        if not action.option_strings or action.dest == "help":
            continue
        text = action.help or SERVE_HELP.get(action.option_strings[0], "a flag of the profile")
        if action.default not in (None, False) and "default" not in text:
            text += " (default: %(default)s)"
        action.help = text
    return p


def _levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"levels are integers separated by commas: {text!r}"
        ) from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"levels must be >= 1: {text!r}")
    return levels


def truth(argv: list[str], ranking: Ranking | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="agent sim truth",
        description="Modelled (noise-free) output tok/s of a command line, or the optimum of a "
        "space. Server flags apply on top of the lab's base flags (--no-base: not).",
    )
    p.add_argument("--concurrency", type=_levels, default=DEFAULT_LEVELS)
    p.add_argument("--input-len", type=int, default=512)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--space", help="a space file (TOML [search] / JSON) or 'default': its optimum")
    kinds = ["geomean", "level", "peak", "slo", "max_load"]  # tools/domain/objective.py
    p.add_argument("--objective", default="geomean", choices=kinds)
    p.add_argument("--level", type=int, help="for --objective level")
    p.add_argument("--ttft-ms", type=float, help="for --objective slo")
    p.add_argument("--tpot-ms", type=float, help="for --objective slo")
    p.add_argument("--no-base", action="store_true", help="do not prepend the lab's base flags")
    p.add_argument("--json", action="store_true")
    ns, server_argv = p.parse_known_args(argv)
    base = [] if ns.no_base else DEFAULT_BASE_FLAGS
    extra = {"level": ns.level, "ttft_ms": ns.ttft_ms, "tpot_ms": ns.tpot_ms}
    extra = {k: v for k, v in extra.items() if v is not None}
    try:
        if ns.space is not None:
            if server_argv:
                raise FlagError(f"--space takes no server flags (got {' '.join(server_argv)})")
            if ranking is None:
                raise FlagError("--space ranks by the campaign's objective: use `agent sim truth`")
            space = load_space(ns.space)
            config, value = ranking.optimum(
                space, ns.concurrency, ns.objective, ns.input_len, ns.max_tokens, base, **extra
            )
            out = {"config": config, "value": round(value, 3)}
            print(json.dumps(out) if ns.json else _describe(out, ns.objective))
            return 0
        model = Model(parse_server_args([*base, *server_argv], prog="agent sim truth"))
    except (FlagError, SpaceError, ValueError) as err:
        print(f"agent sim truth: error: {err}", file=sys.stderr)
        return 2
    per = throughput_of(model, ns.concurrency, ns.input_len, ns.max_tokens)
    if ns.json:
        print(json.dumps({str(c): round(v, 3) for c, v in per.items()}))
        return 0
    if model.failure is not None:
        print(f"this configuration does not start: {model.failure.message}")
        return 0
    print(f"{'C':>5} {'tok/s':>9} {'TTFT ms':>9} {'TPOT ms':>8}")
    for c, v in per.items():
        lat = latency(model, c, ns.input_len, ns.max_tokens)
        print(f"{c:>5} {v:>9.1f} {lat['ttft_ms']:>9.1f} {lat['tpot_ms']:>8.2f}")
    if ranking is not None and ns.objective not in ("slo", "max_load"):
        try:
            value = ranking.config_value(
                {}, ns.concurrency, ns.objective, ns.input_len, ns.max_tokens,
                [*base, *server_argv], **extra,
            )  # fmt: skip
        except ValueError as err:
            print(f"agent sim truth: error: {err}", file=sys.stderr)
            return 2
        print(f"{ns.objective}: {value:.1f}")
    if model.args.spec:
        print(f"acceptance length (tau): {model.tau():.3f}")
    return 0


def _describe(out: dict[str, object], objective: str) -> str:
    config = out["config"]
    assert isinstance(config, dict)
    flags = " ".join(
        f"{k}" if v is True else f"{k} {v}" for k, v in config.items() if v is not False
    )
    return f"optimum ({objective}): {out['value']}\n  {flags or '(no flags)'}"


def show_gpus(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="agent sim gpus",
        description="Simulated GPU memory in use, "
        "like nvidia-smi --query-compute-apps (stale entries are dropped).",
    )
    p.add_argument("--json", action="store_true")
    ns = p.parse_args(argv)
    rows = gpus.reservations()
    print(json.dumps(rows) if ns.json else gpus.render(rows))
    return 0


__all__ = ["Ranking", "main"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
