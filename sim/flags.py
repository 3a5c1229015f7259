"""Server flags, named as SGLang names them, plus the simulator's own (--hardware, --time-scale...).

`parse_server_args` is shared by `sim serve` and `sim truth`, so the truth of a command line is
computed from exactly what the server would run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sim import drift
from sim import profile as profiles
from sim.hardware import PROFILES


class FlagError(ValueError):
    """A command line the server refuses; the message is one line."""


@dataclass(frozen=True)
class ServerArgs:
    model_path: str | None = None  # default: the hardware profile's model
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    tp: int = 1
    attention_backend: str = "flashinfer"
    cuda_graph_max_bs: int = 160
    disable_cuda_graph: bool = False
    speculative_algorithm: str | None = None
    speculative_draft_model_path: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    disable_custom_all_reduce: bool = False
    enable_flashinfer_allreduce_fusion: bool = False
    max_running_requests: int | None = None
    mem_fraction_static: float | None = None
    context_length: int | None = None
    hardware: str = "reference"
    load_seconds: float = 3.0
    time_scale: float = 1.0
    seed: int | None = None
    noise: float = 0.02
    ideal_ttft_ms: float | None = None
    ideal_itl_ms: float | None = None
    hang_seconds: float | None = None
    log_interval: int = 40
    drift: str | None = None  # a schedule of the box's speed (sim/drift.py)
    drift_start: float | None = None  # UNIX time of the schedule's second 0 (default: our start)
    profile: str | None = None  # a profile file or shipped name (sim/profiles/): the box's physics
    extra: tuple[tuple[str, str | bool | None], ...] = ()  # the profile's own flags, as given

    @property
    def ideal(self) -> bool:
        return self.ideal_ttft_ms is not None or self.ideal_itl_ms is not None

    @property
    def spec(self) -> bool:
        return self.speculative_algorithm is not None

    def flag_values(self) -> dict[str, object]:
        """Every flag by its command-line name (a profile's conditions read these)."""
        out: dict[str, object] = {
            "--" + name.replace("_", "-"): value for name, value in vars(self).items()
        }
        out["--tp"] = self.tp
        out.update(self.extra)
        return out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise FlagError(message)


def _positive(kind: Callable[[str], float]) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    convert.__name__ = getattr(kind, "__name__", "value")
    return convert


def build_parser(
    prog: str = "sim serve", profile: profiles.Profile | None = None
) -> argparse.ArgumentParser:
    p = _Parser(
        prog=prog,
        description="A GPU-free inference server that behaves like SGLang.",
        allow_abbrev=False,
    )
    a = p.add_argument
    a("--model-path", "--model", dest="model_path")
    a("--served-model-name")
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--tp", "--tp-size", "--tensor-parallel-size", dest="tp", type=_positive(int), default=1)
    a("--attention-backend", choices=["flashinfer", "triton", "fa3"], default="flashinfer")
    a("--cuda-graph-max-bs", type=_positive(int), default=160)
    a("--disable-cuda-graph", action="store_true")
    a("--speculative-algorithm", choices=["EAGLE3", "EAGLE", "NGRAM"])
    a("--speculative-draft-model-path")
    a("--speculative-num-steps", type=_positive(int))
    a("--speculative-eagle-topk", type=_positive(int))
    a("--speculative-num-draft-tokens", type=_positive(int))
    a("--disable-custom-all-reduce", action="store_true")
    a("--enable-flashinfer-allreduce-fusion", action="store_true")
    a("--max-running-requests", type=_positive(int))
    a("--mem-fraction-static", type=_positive(float))
    a("--context-length", type=_positive(int))
    sim = p.add_argument_group("simulator only")
    b = sim.add_argument
    b("--hardware", choices=sorted(PROFILES), default="reference", help="the box to imitate")
    b("--load-seconds", type=float, default=3.0, help="model load time, real seconds")
    b("--time-scale", type=_positive(float), default=1.0, help="run the physics N times faster")
    b("--seed", type=int, help="noise seed (default: random, printed in the log)")
    b("--noise", type=float, default=0.02, help="relative noise of step times (0 = none)")
    b("--ideal-ttft-ms", type=float, help="ideal mode: fixed time to first token")
    b("--ideal-itl-ms", type=float, help="ideal mode: fixed inter-token latency")
    b("--hang-seconds", type=float, help="real seconds a doomed start hangs before it fails")
    b("--log-interval", type=_positive(int), default=40, help="decode steps between log lines")
    b(
        "--drift",
        help='the box slows or speeds up on a schedule: "0:1.0,60:0.5" (SECOND:SPEED '
        "steps, SECOND~SPEED ramps; real seconds; @FILE: read from FILE, again when it changes)",
    )
    b("--drift-start", type=float, help="UNIX time of the drift's second 0 (default: this start)")
    b("--profile", help="the box's physics: a profile file or a shipped name (sim/profiles/)")
    if profile is not None and profile.flags:
        own = p.add_argument_group(f"flags of profile {profile.name}")
        for spec in profile.flags:
            try:
                if not spec.choices:
                    own.add_argument(spec.name, dest=spec.dest, action="store_true")
                else:
                    kind: Callable[[str], Any] = int if spec.integer else str
                    choices = [kind(c) for c in spec.choices]
                    default = kind(spec.default) if spec.default is not None else None
                    own.add_argument(spec.name, dest=spec.dest, type=kind, choices=choices,
                                     default=default)  # fmt: skip
            except (argparse.ArgumentError, ValueError) as err:
                raise FlagError(f"profile {profile.name}: flag {spec.name}: {err}") from None
    return p


def profile_in(argv: Sequence[str]) -> profiles.Profile | None:
    """The profile a command line names (--profile X or --profile=X; the last one wins)."""
    found: str | None = None
    for i, word in enumerate(argv):
        if word == "--profile" and i + 1 < len(argv):
            found = argv[i + 1]
        elif word.startswith("--profile="):
            found = word.split("=", 1)[1]
    if found is None:
        return None
    try:
        return profiles.load(found)
    except profiles.ProfileError as err:
        raise FlagError(str(err)) from None


def parse_server_args(argv: Sequence[str], prog: str = "sim serve") -> ServerArgs:
    """Parse and check a command line; FlagError (one line) when the server would refuse it."""
    profile = profile_in(argv)
    values = vars(build_parser(prog, profile).parse_args(list(argv)))
    extra = tuple((spec.name, values.pop(spec.dest)) for spec in (profile.flags if profile else ()))
    args = ServerArgs(**values, extra=extra)
    check(args)
    return args


SPEC_PARAMS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
DEFAULT_SPEC = (3, 1, 4)


def check(args: ServerArgs) -> None:
    """The argument checks SGLang does before loading anything (ValueError in its log)."""
    if not 0 <= args.noise < 0.5:
        raise FlagError(f"--noise must be in [0, 0.5), got {args.noise}")
    if args.drift is not None:
        try:
            drift.load(args.drift)
        except drift.DriftError as err:
            raise FlagError(str(err)) from None
        if args.ideal:
            raise FlagError("--drift slows the modelled engine: not with --ideal-ttft-ms/-itl-ms")
    elif args.drift_start is not None:
        raise FlagError("--drift-start needs --drift (the schedule it starts)")
    if args.load_seconds < 0:
        raise FlagError(f"--load-seconds must be >= 0, got {args.load_seconds}")
    if args.mem_fraction_static is not None and not 0 < args.mem_fraction_static < 1:
        raise FlagError(f"--mem-fraction-static must be in (0, 1), got {args.mem_fraction_static}")
    given = [getattr(args, name) is not None for name in SPEC_PARAMS]
    if not args.spec:
        if any(given):
            raise FlagError(
                "--speculative-num-* and --speculative-eagle-topk need --speculative-algorithm"
            )
        return
    if any(given) and not all(given):
        raise FlagError(
            "set --speculative-num-steps, --speculative-eagle-topk and "
            "--speculative-num-draft-tokens together (or none for the defaults 3, 1, 4)"
        )
    steps, topk, tokens = spec_params(args)
    if topk == 1 and tokens != steps + 1:
        raise FlagError(
            f"speculative_num_draft_tokens ({tokens}) must equal speculative_num_steps + 1 "
            f"({steps + 1}) when speculative_eagle_topk is 1"
        )
    if tokens - 1 > steps * topk:
        raise FlagError(
            f"speculative_num_draft_tokens ({tokens}) exceeds the draft tree: at most "
            f"speculative_num_steps * speculative_eagle_topk + 1 = {steps * topk + 1}"
        )


def spec_params(args: ServerArgs) -> tuple[int, int, int]:
    """(num_steps, eagle_topk, num_draft_tokens), the defaults filled in."""
    if args.speculative_num_steps is None:
        return DEFAULT_SPEC
    assert args.speculative_eagle_topk is not None and args.speculative_num_draft_tokens is not None
    return (
        args.speculative_num_steps,
        args.speculative_eagle_topk,
        args.speculative_num_draft_tokens,
    )


def to_argv(flags: Mapping[str, object]) -> list[str]:
    """{"--flag": value} as argv: true = the switch, false/None = omitted, else "--flag value"."""
    argv: list[str] = []
    for flag, value in flags.items():
        if not flag.startswith("--"):
            raise FlagError(f"flag names start with '--': {flag!r}")
        if value is True:
            argv.append(flag)
        elif value is False or value is None:
            continue
        else:
            argv += [flag, str(value)]
    return argv
