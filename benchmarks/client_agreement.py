"""The project's benchmark client against an independent one - vLLM's own `bench serve` - on one
llama-server, alternated level by level: does `agent bench` measure what vLLM's client measures?
Run by hand (docs/benchmark.md, "Agreement with vLLM's client"):

    PYTHONPATH=. .venv/bin/python benchmarks/client_agreement.py [--levels 1,2,4,8] [--repeats 3]
        [--requests 32] [--threads N] [--pydeps DIR]

It makes the lab's tiny model (tools/servers/llama_cpp/tiny_model.py), starts one llama-server on
127.0.0.1 with the lab's baseline flags (tools/servers/llama_cpp/lab.py), and for each repeat and
level runs both clients one after the other, the order swapped from one run to the next (ABBA),
with the same request count, prompt and answer lengths, warm-up requests, ignore_eos and
temperature 0. Each run of either client gets prompts no earlier run sent (a prompt cache hit would
favour whichever client came second), drawn the same way: our word prompts, calibrated once on the
server's /tokenize to `--input-len` tokens; vLLM's client reads them from a JSONL file
(`--dataset-name custom`, which needs pandas in vLLM's venv or in `--pydeps`: `pip install
--target DIR pandas`, then remove DIR/numpy* so that vLLM's own numpy is the one imported).
vLLM's client runs in one long-lived process of vLLM's python (its import takes 15-35 s on this
box), which calls vLLM's own `main` once per run, unchanged.

The figure compared: output tokens per second of each run, as each client defines its window
(ours: first request sent to last answer complete; vLLM: just before the first dispatch to after
the last task returned) and with the tokens counted the same way - completed requests times
max_tokens, every answer being max_tokens long with ignore_eos (ours checks it against the
server's usage counts; vLLM's own token count of a llama-server stream re-tokenizes the text with
the client's tokenizer - llama-server puts its usage in the last `choices` message, which vLLM's
client does not read - and is printed beside it, `vllm own`, to show what that does).

Printed per level: the median of each client over the repeats, their ratio, the paired ratios'
range (each repeat's pair was measured back to back), failed requests, the load average, and from
llama-server's own log per run: its decode ms per token, the stagger of request starts, and its
own output tok/s over the run's measured requests - each client's figure over that one is the
comparison no drift of the box between runs can move. The
server (and every client process) is killed on every way out: the end, an error, Ctrl-C, SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.processes import KILL_S, BenchError, Procs, wait_ready
from tools.bench.prompt_length import calibrate
from tools.bench.random_prompts import make_prompt
from tools.domain.config import free_port
from tools.servers.llama_cpp.build import find
from tools.servers.llama_cpp.lab import search_space
from tools.servers.llama_cpp.tiny_model import make_models
from tools.servers.vllm_cpu.build import find_python
from tools.servers.vllm_cpu.tiny_model import make_model_with

ROOT = Path(__file__).resolve().parents[1]
VLLM_START_S = 300.0  # vLLM's client imported (torch) on a loaded box
RUN_SLACK_S = 120.0  # a run's deadline: this plus `requests x max_tokens / 2 tok/s`
DONE = "AGREE-DONE"

# Run by vLLM's python: vLLM's own `bench serve` entry (add_cli_args, main), once per line of
# JSON argv on stdin; the `vllm` console script needs metadata vllm-cpu does not install.
VLLM_RUNNER = f"""
import json, sys, traceback
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
print("{DONE} ready", flush=True)
for line in sys.stdin:
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    try:
        main(parser.parse_args(json.loads(line)))
        print("{DONE} ok", flush=True)
    except BaseException:
        traceback.print_exc()
        print("{DONE} failed", flush=True)
"""


class AgreementError(BenchError):
    """A step that cannot go on (no llama-server, no vLLM venv, a client failed); one line."""


@dataclass
class Run:
    client: str  # "ours" | "vllm"
    level: int
    repeat: int
    tok_s: float  # completed x max_tokens / the client's own duration
    own_tok_s: float  # the client's own output_throughput
    failed: int
    load: float  # the 1-minute load average when the run started
    server_ms: float = 0.0  # llama-server's own decode time per token in this run (its log)
    stagger_ms: float = 0.0  # median gap from a request's start on the server to the nearest other
    server_tok_s: float = 0.0  # the server's own output tok/s over the run's measured requests
    completed: int = 0
    client_cpu_s: float = 0.0  # the client's CPU seconds over the run


def server_argv(
    binary: Path, model: Path, port: int, slots: int | None, threads: int | None = None
) -> list[str]:
    """llama-server with the lab's baseline flags (`slots`: another --parallel, `threads`: another
    --threads)."""
    flags = dict(search_space(model, os.cpu_count() or 1)["baseline"])
    if slots is not None:
        flags["--parallel"] = slots
    if threads is not None:
        flags["--threads"] = threads
    argv = [str(binary), "-m", str(model), "--ctx-size", "4096", "--no-webui", "--metrics"]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    for flag, value in flags.items():
        argv += [flag, str(value)]
    return argv


class VllmClient:
    """vLLM's `bench serve`, one long-lived process; `run` is one invocation of its main."""

    def __init__(self, python: Path, pydeps: Path | None, log: Path, procs: Procs) -> None:
        self.python, self.pydeps, self.log, self.procs = python, pydeps, log, procs
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, work: Path) -> None:
        runner = work / "vllm_runner.py"
        runner.write_text(VLLM_RUNNER)
        env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1", PYTHONPATH="")
        if self.pydeps is not None:
            env["PYTHONPATH"] = str(self.pydeps)
        self.out = self.log.open("ab")
        self.proc = await asyncio.create_subprocess_exec(
            str(self.python), str(runner), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=self.out, env=env, cwd=work,
            start_new_session=True,
        )  # fmt: skip
        self.procs.items.append(self.proc)
        await self._until_done(VLLM_START_S)

    async def _until_done(self, deadline_s: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        async with asyncio.timeout(deadline_s):
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    raise AgreementError(f"vLLM's client exited; see {self.log}")
                self.out.write(line)
                text = line.decode(errors="replace").strip()
                if text.startswith(DONE):
                    return text.split()[-1]

    async def stop(self) -> None:
        """End of input: the runner's loop ends and the process exits (within KILL_S)."""
        if self.proc is None or self.proc.stdin is None or self.proc.returncode is not None:
            return
        self.proc.stdin.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), KILL_S)

    async def run(self, argv: list[str], deadline_s: float) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(argv).encode() + b"\n")
        await self.proc.stdin.drain()
        try:
            outcome = await self._until_done(deadline_s)
        except TimeoutError:
            raise AgreementError(f"vLLM's client ran past {deadline_s:g} s") from None
        if outcome != "ok":
            raise AgreementError(f"vLLM's client failed; see {self.log}")


@dataclass
class Setup:
    url: str
    model: str
    args: argparse.Namespace
    work: Path
    words: int
    vllm: VllmClient
    tokenizer: Path
    procs: Procs
    log: Path
    server_log: Path


def prompts_file(setup: Setup, seed: str) -> Path:
    """The run's prompts for vLLM's client: our word prompts, from a seed no other run used."""
    rng = random.Random(seed)
    path = setup.work / f"prompts-{seed.replace('/', '-')}.jsonl"
    with path.open("w") as f:
        for _ in range(setup.args.requests):
            f.write(json.dumps({"prompt": make_prompt(rng, setup.words)}) + "\n")
    return path


def _clock(line: str) -> float:
    """llama.cpp's log clock (`M.SS.mmm.uuu` since the server started), in seconds."""
    m, sec, milli, micro = line.split()[0].split(".")
    return 60 * int(m) + int(sec) + int(milli) / 1e3 + int(micro) / 1e6


def _task(line: str) -> int:
    return int(line.split("| task", 1)[1].split("|", 1)[0])


def server_view(log: Path, offset: int, completed: int) -> tuple[float, float, float]:
    """What llama-server logged after `offset` (one run): its own decode time per token
    (`print_timing: ... eval time = X ms / N tokens`); the median gap from each request's start
    (`launch_slot_`) to the nearest other's - a few ms when a pair of requests is sent together
    and prefilled in one batch, a prefill or more when they start apart; and the server's own
    output tok/s over the run's last `completed` requests (the measured ones: the warm-ups end
    before they start) - their tokens over their first start to their last release."""
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    ms = tokens = 0.0
    starts: dict[int, float] = {}
    ends: dict[int, float] = {}
    generated: dict[int, float] = {}
    for line in text.splitlines():
        if "print_timing" in line and " eval time =" in line and "prompt eval" not in line:
            right = line.split(" eval time =", 1)[1]
            n = float(right.split("/", 1)[1].split("tokens", 1)[0])
            ms += float(right.split("ms", 1)[0])
            tokens += n
            generated[_task(line)] = n
        elif "launch_slot_" in line:
            starts[_task(line)] = _clock(line)
        elif "release:" in line and "| task" in line:
            ends[_task(line)] = _clock(line)
    at = sorted(starts.values())
    near = [
        min(b - a if a else float("inf"), c - b if c else float("inf"))
        for a, b, c in zip([0.0, *at[:-1]], at, [*at[1:], 0.0], strict=True)
    ]
    near = [x for x in near if x != float("inf")]
    stagger = 1000 * statistics.median(near) if near else 0.0
    measured = sorted((t for t in ends if t in starts), key=ends.__getitem__)[-completed:]
    span = max(ends[t] for t in measured) - min(starts[t] for t in measured) if measured else 0
    own = sum(generated.get(t, 0.0) for t in measured) / span if span > 0 else 0.0
    return (ms / tokens if tokens else 0.0), stagger, own


def cpu_seconds(pid: int) -> float:
    """utime + stime of a live process (/proc/PID/stat), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_deadline(args: argparse.Namespace) -> float:
    return RUN_SLACK_S + args.requests * args.max_tokens / 2.0


async def run_ours(setup: Setup, level: int, repeat: int) -> Run:
    args = setup.args
    out = setup.work / f"ours-{level}-{repeat}.json"
    argv = [
        sys.executable, "-m", "agent.cli", "bench", "--url", setup.url, "--model", setup.model,
        "--concurrency", str(level), "--input-len", str(args.input_len),
        "--max-tokens", str(args.max_tokens), "--requests-per-level", str(args.requests),
        "--warmup", str(args.warmup), "--seed", str(1000 * repeat + level), "--json", str(out),
    ]  # fmt: skip
    load = os.getloadavg()[0]
    with setup.log.open("ab") as log:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=log, stderr=log, cwd=ROOT, start_new_session=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )  # fmt: skip
        setup.procs.items.append(proc)
        try:
            async with asyncio.timeout(run_deadline(args)):
                code = await proc.wait()
        except TimeoutError:
            raise AgreementError(f"agent bench ran past {run_deadline(args):g} s") from None
    if code != 0:
        raise AgreementError(f"agent bench exited {code}; see {setup.log}")
    (point,) = json.loads(out.read_text())["points"]
    if point["total_output_tokens"] != point["completed"] * args.max_tokens:
        raise AgreementError(
            f"C={level}: the server counted {point['total_output_tokens']} output tokens for "
            f"{point['completed']} answers of {args.max_tokens}: not every answer was full length"
        )
    tok_s = point["completed"] * args.max_tokens / point["duration"]
    run = Run("ours", level, repeat, tok_s, point["output_throughput"], point["failed"], load)
    run.client_cpu_s = point.get("client_cpu_seconds") or 0.0  # the level's client process
    run.completed = point["completed"]
    return run


async def run_vllm(setup: Setup, level: int, repeat: int) -> Run:
    args = setup.args
    name = f"vllm-{level}-{repeat}.json"
    data = prompts_file(setup, f"vllm/{repeat}/{level}")
    argv = [
        "--backend", "openai", "--base-url", setup.url, "--endpoint", "/v1/completions",
        "--model", setup.model, "--tokenizer", str(setup.tokenizer),
        "--dataset-name", "custom", "--dataset-path", str(data), "--skip-chat-template",
        "--custom-output-len", str(args.max_tokens), "--ignore-eos", "--temperature", "0",
        "--max-concurrency", str(level), "--num-prompts", str(args.requests),
        "--num-warmups", str(args.warmup), "--disable-tqdm", "--save-result",
        "--result-dir", str(setup.work), "--result-filename", name,
    ]  # fmt: skip
    load = os.getloadavg()[0]
    assert setup.vllm.proc is not None
    cpu0 = cpu_seconds(setup.vllm.proc.pid)
    await setup.vllm.run(argv, run_deadline(args))
    result = json.loads((setup.work / name).read_text())
    tok_s = result["completed"] * args.max_tokens / result["duration"]
    run = Run("vllm", level, repeat, tok_s, result["output_throughput"], result["failed"], load)
    run.client_cpu_s = cpu_seconds(setup.vllm.proc.pid) - cpu0  # its setup included
    run.completed = result["completed"]
    return run


async def measure(setup: Setup) -> list[Run]:
    runs: list[Run] = []
    clients = (run_ours, run_vllm)
    step = 0
    for repeat in range(setup.args.repeats):
        for level in setup.args.levels:
            order = clients if step % 2 == 0 else clients[::-1]  # ABBA over the runs
            step += 1
            for client in order:
                at = setup.server_log.stat().st_size
                run = await client(setup, level, repeat)
                view = server_view(setup.server_log, at, run.completed)
                run.server_ms, run.stagger_ms, run.server_tok_s = view
                runs.append(run)
                print(
                    f"  r{repeat} C={level} {run.client:4s} {run.tok_s:7.1f} tok/s, the "
                    f"server's {run.server_tok_s:7.1f} (own {run.own_tok_s:7.1f}, "
                    f"failed {run.failed}, load {run.load:.1f}, "
                    f"server {run.server_ms:.1f} ms/token, stagger {run.stagger_ms:.0f} ms, "
                    f"client CPU {run.client_cpu_s:.2f} s)",
                    flush=True,
                )
        if repeat < setup.args.repeats - 1:  # what is measured so far, should the rest not be
            print(table(runs, setup.args.levels), flush=True)
    return runs


def table(runs: list[Run], levels: list[int]) -> str:
    head = (
        "C  ours tok/s  vllm tok/s  ours/vllm  paired ratios (min-max)  vllm own tok/s  "
        "failed ours/vllm  server ms/tok ours/vllm  stagger ms ours/vllm  "
        "client/server ours vllm  load"
    )
    lines = [head]
    for level in levels:
        ours = [r for r in runs if r.level == level and r.client == "ours"]
        theirs = [r for r in runs if r.level == level and r.client == "vllm"]
        if not ours or not theirs:
            continue
        pairs = [a.tok_s / b.tok_s for a, b in zip(ours, theirs, strict=False)]
        mo = statistics.median(r.tok_s for r in ours)
        mv = statistics.median(r.tok_s for r in theirs)
        own = statistics.median(r.own_tok_s for r in theirs)
        load = statistics.median(r.load for r in ours + theirs)
        failed = f"{sum(r.failed for r in ours)}/{sum(r.failed for r in theirs)}"
        both = (ours, theirs)
        srv = "/".join(f"{statistics.median(r.server_ms for r in rs):.1f}" for rs in both)
        lag = "/".join(f"{statistics.median(r.stagger_ms for r in rs):.0f}" for rs in both)
        per_run = [  # each run against the server's own figure for that run: no drift between
            statistics.median(r.tok_s / r.server_tok_s for r in rs if r.server_tok_s) for rs in both
        ]
        lines.append(
            f"{level:<2} {mo:10.1f}  {mv:10.1f}  {mo / mv:9.3f}  "
            f"{min(pairs):.3f}-{max(pairs):.3f} (median {statistics.median(pairs):.3f})  "
            f"{own:14.1f}  {failed:>16}  {srv:>23}  {lag:>20}  "
            f"{per_run[0]:10.3f} {per_run[1]:6.3f}  {load:4.1f}"
        )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace, procs: Procs) -> None:
    binary = find()
    if binary is None:
        raise AgreementError("no llama-server: run .ci/build-llama-server first")
    python = find_python()
    if python is None:
        raise AgreementError("no vLLM CPU venv: run .ci/build-vllm-cpu first")
    work = Path(tempfile.mkdtemp(prefix="client-agreement-"))
    log = work / "log.txt"
    print(f"work folder: {work} (logs: {log})", flush=True)
    target, _ = make_models(work / "models")
    tokenizer = make_model_with(python, work / "hf")  # vLLM's client needs an HF tokenizer
    port = free_port(18300)
    url = f"http://127.0.0.1:{port}"
    argv = server_argv(binary, target, port, args.slots, args.threads)
    print("server:", " ".join(argv), flush=True)
    server_log = work / "server.txt"
    with server_log.open("ab") as out:
        server = subprocess.Popen(argv, stdout=out, stderr=out, start_new_session=True)
    procs.items.append(server)
    await wait_ready(url, server, server_log)
    length = await calibrate(url, str(target), args.input_len, "/tokenize")
    print(f"prompts: {length.detail}", flush=True)
    vllm = VllmClient(python, args.pydeps, log, procs)
    await vllm.start(work)
    setup = Setup(
        url, str(target), args, work, length.words, vllm, tokenizer, procs, log, server_log
    )
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    try:
        runs = await measure(setup)
    finally:
        await vllm.stop()  # in the loop: its pipes are closed before the loop is
    print(f"\n{started}, {args.repeats} repeats, {args.requests} requests per level, "
          f"input {args.input_len} / output {args.max_tokens} tokens, warm-up {args.warmup}, "
          f"llama-server {' '.join(argv[argv.index('--threads'):])}")  # fmt: skip
    print(table(runs, args.levels))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,2,4,8")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--requests", type=int, default=32, help="per level and run")
    parser.add_argument("--input-len", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=2, help="warm-up requests, both clients")
    parser.add_argument("--slots", type=int, default=None, help="--parallel (default: lab's)")
    parser.add_argument(
        "--threads", type=int, default=None, help="--threads (default: lab's, every core)"
    )
    parser.add_argument("--pydeps", type=Path, default=None, help="pandas for vLLM's venv")
    args = parser.parse_args()
    try:
        args.levels = [int(c) for c in args.levels.split(",")]
    except ValueError:
        parser.error(f"--levels: comma-separated integers, got {args.levels!r}")
    procs = Procs()
    return procs.run(main_async(args, procs))


if __name__ == "__main__":
    raise SystemExit(main())
