"""`agent bench`: sweep an OpenAI-compatible server from the terminal, outside any run.

    agent bench --url URL [--model M] [--concurrency 1,2,5,10,30,70,100,250] [--input-len 512]
                [--max-tokens 512] [--requests-per-level N] [--json PATH] ...
                [--dataset random|chat|code|sharegpt:FILE|jsonl:FILE]
                [--request-rate R1,R2,... [--burstiness B]] [--duration S]
                [--min-level-seconds S] [--slo ttft_ms=..,tpot_ms=..,e2el_ms=..] [--find-max-rate]
                [--shared-prefix N] [--multi-turn] [--cache-reset PATH] [--gpus N]
                [--gpu-power all|0,1,..] [--hardware AGENT_TOML [--server-flags FLAGS]]
                [--deadline-head S] [--deadline-first-token S] [--deadline-pace TOK_S]
                [--deadline-floor S] [--deadline-slack X] [--deadline-level S]
                [--deadline-probe S] [--served-before RESULT.json ...]

A progress bar per level, a table at the end; --json writes the result (docs/benchmark.md: the
points carry vLLM `bench serve`'s flat keys). Exit codes: 0 measured, 1 the server could not be
benchmarked (unreachable, or every level failed), 2 bad usage, 130 interrupted (the levels
measured so far are still printed and written).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agent.report.pareto import chart_files
from state.atomic import write_json_atomic
from tools.bench import results, workload_options
from tools.bench.deadlines import DeadlineError, Deadlines
from tools.bench.energy import HostPower
from tools.bench.floor import served_of, stated_physics
from tools.bench.level_traffic import level_name, requests_at_rate
from tools.bench.rate_search import START_RATE, find_max_rate
from tools.bench.schema import BenchResult, ClientInfo, ServerRef, Workload
from tools.bench.sweep import (
    BenchError,
    Observer,
    SweepOutcome,
    SweepSpec,
    run_sweep,
)
from tools.bench.table import sweep_table
from tools.benchmark_outcome import compact_points
from tools.domain.config import ConfigError, HostConfig, load_config
from tools.hosts.local import LocalHost
from tools.learned_deadline import served_ttft_s
from tools.servers.profiles import ProfileError, engine_for

DEFAULT_LEVELS = "1,2,5,10,30,70,100,250"


def levels_arg(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}"
        ) from None
    if not levels or any(c < 1 for c in levels):
        raise argparse.ArgumentTypeError(f"levels must be positive integers: {text!r}")
    return levels


def gpu_power_arg(text: str) -> list[int]:
    """--gpu-power: `all` ([]: every GPU) or the indices nvidia-smi lists, e.g. 0,1."""
    if text.strip() == "all":
        return []
    parts = text.replace(" ", "").split(",")
    if not parts or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"'all' or GPU indices such as 0,1, got {text!r}")
    return [int(p) for p in parts]


def _option(parse: Any) -> Any:
    """A workload_options parser as an argparse type (its message, not argparse's)."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except workload_options.OptionError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    convert.__name__ = parse.__name__.replace("_", " ")
    return convert


def processes_arg(text: str) -> int | None:
    if text == "auto":
        return None
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--processes takes a number or 'auto', got {text!r}"
        ) from None
    if n < 0:
        raise argparse.ArgumentTypeError("--processes must be >= 0")
    return n


# the client's deadlines a user tunes (tools/bench/deadlines.py `Deadlines`, field -> flag), as
# [bench.deadlines] sets them for a run: flag, metavar, unit, what it bounds
DEADLINE_FLAGS = {
    "head_s": ("--deadline-head", "S", "s", "response head: first byte to end of headers"),
    "first_token_s": ("--deadline-first-token", "S", "s", "send to first token"),
    "pace_tok_s": ("--deadline-pace", "TOK_S", "tok/s", "the slowest pace of one stream that "
                   "a request's total deadline allows: first token + max_tokens / pace"),
    "floor_s": ("--deadline-floor", "S", "s", "no request's total deadline is shorter"),
    "slack": ("--deadline-slack", "X", "", "a request's total once the level's pace is known: "
              "X x max_tokens x its seconds per token"),
    "level_s": ("--deadline-level", "S", "s", "a whole level (connections, warm-up, requests)"),
    "probe_s": ("--deadline-probe", "S", "s", "each probe: /v1/models, /server_info, ..."),
}  # fmt: skip


def _default(name: str, unit: str) -> str:
    value = getattr(Deadlines(), name)
    return "derived from the level's shape" if value is None else f"{value:g} {unit}".strip()


def deadlines_arg(args: argparse.Namespace) -> Deadlines:
    """The deadlines in force: the flags given over the client's defaults. A bad value is one
    line naming its flag (DeadlineError)."""
    given = {}
    for name, (flag, _, unit, _) in DEADLINE_FLAGS.items():
        value = getattr(args, name)
        if value is None:
            continue
        if not 0 < value < math.inf:  # nan fails both
            of = {"s": " of seconds", "tok/s": " of tokens per second"}.get(unit, "")
            raise DeadlineError(f"{flag} must be a positive number{of}, got {value:g}")
        given[name] = value
    return Deadlines(**given)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="agent bench", description="Benchmark an OpenAI-compatible server."
    )
    ap.add_argument("--url", required=True, help="base URL, e.g. http://127.0.0.1:30000")
    ap.add_argument(
        "--model", default="", help="model name to request (default: first of /v1/models)"
    )
    traffic = ap.add_mutually_exclusive_group()
    traffic.add_argument(
        "--concurrency",
        type=levels_arg,
        default=None,
        help=f"comma-separated closed-loop levels (default {DEFAULT_LEVELS})",
    )
    # the options workload_options parses (run_benchmark takes the same), declared alike
    workload_args: list[tuple[Any, str, Any, Any, str]] = [
        (traffic, "--request-rate", workload_options.rates, None,
         "comma-separated request rates (req/s): open-loop levels instead of concurrency"),
        (ap, "--burstiness", workload_options.burstiness, 1.0,
         "with --request-rate: gamma shape of the gaps, 1 = Poisson (default), or constant"),
        (ap, "--dataset", workload_options.dataset, "random",
         "random (default), chat, code, sharegpt:FILE or jsonl:FILE"),
        (ap, "--slo", workload_options.slo, None,
         "per-request limits for goodput, e.g. ttft_ms=200,tpot_ms=50,e2el_ms=5000"),
        (ap, "--shared-prefix", workload_options.shared_prefix, 0,
         "tokens of a system prompt every request shares (default 0)"),
    ]  # fmt: skip
    for group, flag, parse, default, text in workload_args:
        group.add_argument(flag, type=_option(parse), default=default, help=text)
    ap.add_argument(
        "--find-max-rate",
        action="store_true",
        help="search the highest request rate meeting --slo (p99 of each limit); --request-rate "
        "R: start there (default 1 req/s)",
    )
    ap.add_argument("--duration", type=float, default=None, help="seconds per level (model time)")
    ap.add_argument(
        "--min-level-seconds",
        type=_option(workload_options.min_level_seconds),
        default=None,
        metavar="S",
        help="a closed level goes on past its requests until it has lasted S seconds (model "
        "time; up to 16 x its requests); default 0: the requests alone",
    )
    ap.add_argument(
        "--multi-turn",
        action="store_true",
        help="replay the dataset's conversations turn by turn with their growing history",
    )
    ap.add_argument(
        "--cache-reset",
        default=None,
        metavar="PATH",
        help="POST this path before each level for a cold prefix cache "
        "(SGLang and the simulator: /flush_cache; vLLM: /reset_prefix_cache)",
    )
    ap.add_argument(
        "--input-len", type=int, default=512, help="prompt tokens of random prompts (default 512)"
    )
    ap.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="output tokens (default 512; with a dataset: the data's lengths unless given)",
    )
    ap.add_argument(
        "--requests-per-level",
        type=int,
        default=None,
        help="requests per level (default max(5 x C, 10))",
    )
    ap.add_argument("--warmup", type=int, default=2, help="warm-up requests per level (default 2)")
    ap.add_argument("--endpoint", choices=["completions", "chat"], default="completions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--processes",
        type=processes_arg,
        default=None,
        help="client processes: a number, 0 = in this process, auto (default)",
    )
    ap.add_argument("--connect-timeout", type=float, default=10.0, help="seconds (default 10)")
    ap.add_argument(
        "--stall-timeout",
        type=float,
        default=300.0,
        help="fail a request that receives nothing for this long (default 300 s)",
    )
    for name, (flag, metavar, unit, what) in DEADLINE_FLAGS.items():
        ap.add_argument(
            flag,
            dest=name,
            type=float,
            default=None,
            metavar=metavar,
            help=f"deadline: {what} (default {_default(name, unit)})",
        )
    ap.add_argument(
        "--served-before",
        type=Path,
        action="append",
        default=[],
        metavar="RESULT_JSON",
        help="an earlier result of this URL (--json): where it served every level asked for with "
        "the same workload, the first-token deadline is slack x its slowest p99 TTFT there, at "
        "least the floor (a server that then sends keep-alives only is cut there, not after the "
        "static deadline); repeatable",
    )
    ap.add_argument("--label", default="", help="a name for the result")
    ap.add_argument(
        "--gpus",
        type=int,
        default=1,
        help="GPUs the server uses: the Pareto chart's tokens/s per GPU (default 1)",
    )
    ap.add_argument(
        "--gpu-power",
        metavar="all|0,1,..",
        type=gpu_power_arg,
        default=None,
        help="the server runs on this machine: read its GPUs' power with nvidia-smi here (all, "
        "or these indices) for joules per output token; a simulator reports its own",
    )
    ap.add_argument(
        "--hardware",
        type=Path,
        default=None,
        metavar="AGENT_TOML",
        help="each level's bandwidth floor from this agent.toml's [hardware] (docs/physics.md) "
        "where the server states none; its device found by nvidia-smi here if it names none",
    )
    ap.add_argument(
        "--server-flags",
        default="",
        metavar="FLAGS",
        help="with --hardware: the flags the server runs with beyond that agent.toml's command "
        "(its --dtype and KV cache types set the floor's bytes), e.g. '--dtype float32'",
    )
    ap.add_argument("--json", type=Path, default=None, help="write the result JSON here")
    return ap


class _Bars(Observer):
    def __init__(self, bars: Progress) -> None:
        self.bars = bars
        self.tasks: dict[int, Any] = {}
        self.names: dict[int, str] = {}  # an open level's name by its request count

    def level_start(self, level: int, requests: int) -> None:
        name = self.names.get(level, f"C={level}")
        self.tasks[level] = self.bars.add_task(name, total=requests)

    def progress(self, level: int, done: int) -> None:
        self.bars.update(self.tasks[level], completed=done)

    def level_end(self, level: int, point: dict[str, Any]) -> None:
        task = self.tasks[level]
        verdict = (
            "FAILED" if point.get("level_failed") else f"{point['output_throughput']:.1f} tok/s"
        )
        self.bars.update(
            task,
            completed=point.get("num_prompts", 0),
            description=f"{level_name(point)} {verdict}",
        )


class _SearchBars(_Bars):
    """A rate search's probes: each a bar named by its rate once it ends."""

    def level_start(self, level: int, requests: int) -> None:
        self.tasks[level] = self.bars.add_task("rate probe", total=requests)


def main(argv: list[str]) -> int:
    ap = parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    for name in ("input_len", "max_tokens", "requests_per_level", "warmup", "duration", "gpus"):
        value = getattr(args, name)
        if value is not None and value < (0 if name == "warmup" else 1):
            print(
                f"agent bench: --{name.replace('_', '-')} must be positive, got {value}",
                file=sys.stderr,
            )
            return 2
    if args.cache_reset is not None and not args.cache_reset.startswith("/"):
        print(
            f"agent bench: --cache-reset is a path such as /flush_cache, got {args.cache_reset!r}",
            file=sys.stderr,
        )
        return 2
    try:
        deadlines = deadlines_arg(args)
    except DeadlineError as err:
        print(f"agent bench: {err}", file=sys.stderr)
        return 2
    console = Console(stderr=False)
    if args.request_rate is None and args.concurrency is None and not args.find_max_rate:
        args.concurrency = levels_arg(DEFAULT_LEVELS)
    if args.multi_turn and (args.request_rate or args.find_max_rate):
        print("agent bench: --multi-turn runs closed loops: use --concurrency", file=sys.stderr)
        return 2
    if args.multi_turn and args.dataset.partition(":")[0] not in ("sharegpt", "jsonl"):
        print(
            "agent bench: --multi-turn needs conversations: --dataset sharegpt:FILE or jsonl:FILE",
            file=sys.stderr,
        )
        return 2
    if args.find_max_rate and (args.slo is None or args.concurrency is not None):
        why = "an --slo" if args.slo is None else "rates, not --concurrency"
        print(f"agent bench: --find-max-rate needs {why}", file=sys.stderr)
        return 2
    if args.find_max_rate and args.request_rate is not None and len(args.request_rate) > 1:
        print(
            "agent bench: --find-max-rate takes one --request-rate (where to start)",
            file=sys.stderr,
        )
        return 2
    if args.burstiness != 1.0 and args.request_rate is None and not args.find_max_rate:
        print("agent bench: --burstiness applies to --request-rate levels", file=sys.stderr)
        return 2
    workload = Workload(
        endpoint=args.endpoint,
        model=args.model,
        input_len=args.input_len,
        max_tokens=args.max_tokens or 512,
        dataset=args.dataset,
        lengths="data" if args.dataset != "random" and args.max_tokens is None else "fixed",
        seed=args.seed,
        requests_per_level=args.requests_per_level,
        warmup_requests=args.warmup,
        traffic="rate" if args.request_rate or args.find_max_rate else "concurrency",
        burstiness=args.burstiness,
        duration_s=args.duration,
        min_level_s=args.min_level_seconds or None,
        slo_ms=args.slo or {},
        shared_prefix=args.shared_prefix,
        cache_reset=args.cache_reset,
        multi_turn=args.multi_turn,
    )
    if args.served_before and args.concurrency:
        try:
            deadlines, said = learned_deadlines(deadlines, args, workload)
        except results.ResultError as err:
            print(f"agent bench: --served-before: {err}", file=sys.stderr)
            return 2
        console.print(said, markup=False, highlight=False)
    spec = SweepSpec(
        url=args.url,
        levels=args.concurrency or [],
        rates=args.request_rate,
        slo_ms=args.slo,
        workload=workload,
        processes=args.processes,
        connect_timeout_s=args.connect_timeout,
        stall_timeout_s=args.stall_timeout,
        deadlines=deadlines,
        no_power="the server's host is not read without --gpu-power (nvidia-smi on this machine)",
    )
    if args.gpu_power is not None:
        here = LocalHost(HostConfig(name="local"))
        spec.power = HostPower(here, args.gpu_power or None)
    if args.hardware is not None:
        try:
            config = load_config(args.hardware)
            precision = engine_for(config).profile.precision
        except (ConfigError, ProfileError) as err:
            print(f"agent bench: --hardware: {err}", file=sys.stderr)
            return 2
        hardware = config.hardware
        # the dtypes it serves in: agent.toml's command with the flags this server added
        command = f"{config.server.command} {args.server_flags}"
        here = LocalHost(HostConfig(name="local"))
        stated = stated_physics(hardware, args.gpus, here, served=served_of(precision, command))
        spec.physics, spec.no_physics = asyncio.run(stated)
        if hardware is None:
            spec.no_physics = f"no floor: {args.hardware} has no [hardware] (docs/physics.md)"
    columns = (
        TextColumn("{task.description:<22}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    try:
        with Progress(*columns, console=console) as progress:
            bars = _Bars(progress)
            for rate in args.request_rate or []:
                bars.names[requests_at_rate(rate, workload)] = f"rate {rate:g}/s"
            if args.find_max_rate:
                start = (args.request_rate or [START_RATE])[0]
                search = asyncio.run(find_max_rate(spec, _SearchBars(progress), start))
                outcome = search.outcome
                outcome.notes.insert(0, search.summary(workload.slo_ms))
                args.request_rate = [p["request_rate"] for p in outcome.points]
                args.rate_search = {"slo_ms": workload.slo_ms, **search.data()}
            else:
                outcome = asyncio.run(run_sweep(spec, bars))
    except BenchError as err:
        print(f"agent bench: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("agent bench: interrupted before the first level finished", file=sys.stderr)
        return 130
    return _report(console, args, workload, outcome, deadlines)


def learned_deadlines(
    deadlines: Deadlines, args: argparse.Namespace, workload: Workload
) -> tuple[Deadlines, str]:
    """The first-token deadline learned from earlier results of this URL (--served-before), as
    run_benchmark learns it from the run's (tools/learned_deadline.py); and a line saying which.
    Raises results.ResultError for a file that is not a result."""
    seen = []
    for path in args.served_before:
        r = results.load(str(path))
        seen.append({
            "server": r.server.name, "flags": r.server.flags, "url": r.server.url,
            "workload": r.workload.model_dump(), "points": compact_points(r),
        })  # fmt: skip
    ttft_s = served_ttft_s(seen, ServerRef(url=args.url), workload, args.concurrency, None)
    if ttft_s is None:
        static = f"{deadlines.first_token_s:g} s"
        return deadlines, f"first-token deadline {static}: not every level served there before"
    learned = deadlines.served(ttft_s)
    return learned, (
        f"first-token deadline {learned.first_token_s:g} s, learned: slack "
        f"{deadlines.slack:g} x p99 TTFT {ttft_s * 1000:.0f} ms served before, at least "
        f"{deadlines.floor_s:g} s"
    )


def _report(
    console: Console,
    args: argparse.Namespace,
    workload: Workload,
    outcome: SweepOutcome,
    deadlines: Deadlines,
) -> int:
    workload.model, workload.dataset_digest = outcome.model, outcome.dataset_digest
    client = ClientInfo(
        processes=outcome.processes,
        event_loop="uvloop" if outcome.processes else "asyncio",
        connect_timeout_s=args.connect_timeout,
        stall_timeout_s=args.stall_timeout,
        deadlines=deadlines.to_job(),  # the values in force, defaults included
    )
    result = results.build_result(
        result_id=results.slug(args.label) or "bench",
        server=ServerRef(url=args.url, gpus=args.gpus),
        workload=workload,
        client=client,
        levels=args.concurrency or [p["max_concurrency"] for p in outcome.points],
        points=outcome.points,
        label=args.label,
        interrupted=outcome.interrupted,
        notes=outcome.notes,
        physics=outcome.physics,
    )
    result.request_rates = args.request_rate or []
    result.prompts = outcome.prompts
    if getattr(args, "rate_search", None) and result.__pydantic_extra__ is not None:
        result.__pydantic_extra__["rate_search"] = args.rate_search  # the probes and the answer
    console.print(sweep_table(result), markup=False, highlight=False, soft_wrap=True)
    if args.json is not None:
        try:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(args.json, result.dump())
        except OSError as err:
            print(f"agent bench: cannot write {args.json}: {err}", file=sys.stderr)
            return 1
        console.print(f"wrote {args.json}", markup=False, highlight=False)
        for path in _charts(args.json, result):
            console.print(f"wrote {path}", markup=False, highlight=False)
    if outcome.interrupted:
        return 130
    if not outcome.points or all(p.get("level_failed") for p in outcome.points):
        return 1
    return 0


def _charts(json_path: Path, result: BenchResult) -> list[Path]:
    """Latency vs throughput and the Pareto chart beside the JSON (r.json: r.latency.png, ...)."""
    written = []
    for name, png in chart_files([(result.label or result.id, result)]):
        path = json_path.with_name(f"{json_path.stem}.{name}.png")
        try:
            path.write_bytes(png)
        except OSError as err:
            print(f"agent bench: cannot write {path}: {err}", file=sys.stderr)
            continue
        written.append(path)
    return written


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
