"""What the sandbox costs a bash call: the median wall time of one call through the real bash tool,
allowed outright vs run in bubblewrap (issue 25).

    .venv/bin/python -m benchmarks.sandbox_cost --calls 200

The same program, `cat /dev/null` (a few ms of its own), is run three ways on the local host:
with an assignment before it (`X=1 cat /dev/null`) the line is not certain, so it runs in the
sandbox (since issue 47's last rounds: with its own network namespace, a pids cgroup or
RLIMIT_NPROC, RLIMIT_FSIZE, capped /tmp and /dev/shm, as nobody in a user namespace where the
user is root, and the watch on what the call writes); with `[guard] allow = ["cat:*"]` a
supervisor's rule runs that line in the mask (a program the rules do not count as acting on
processes only: the machine as the user has it, the inbox keys and the run's control files kept
from it); plain `cat /dev/null` is allowed outright. (Until issue 47's third round the command
was `awk 'BEGIN { }'`, outright through a rule with `[guard] sandbox = false`: that host now
refuses a rule for code.) Calls alternate, so that load on the machine hits the ways alike.
Printed: median and p90 per way, and the difference of the medians (the sandbox's cost). The
decision itself (tools.guard.decide) is timed apart, per call, on the ordinary corpus.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from state.run import Run
from tools.base import ToolBox, ToolContext
from tools.bash import Bash
from tools.domain.config import Config, GuardConfig, HostConfig, ServerConfig
from tools.guard import Context, decide
from tools.hosts import HostPool

# the line each way runs: not certain (an assignment) - sandboxed, or masked under a rule - and
# the same program allowed outright
COMMANDS = {"sandbox": "X=1 cat /dev/null", "mask": "X=1 cat /dev/null", "outside": "cat /dev/null"}


def context(root: Path, allow: list[str], sandbox: bool = True) -> ToolContext:
    config = Config(
        hosts=[HostConfig(name="local", workdir=str(root / "work"))],
        server=ServerConfig(command="true"),
        guard=GuardConfig(allow=allow, sandbox=sandbox),
    )
    return ToolContext(run=Run.create(root / "runs"), config=config, hosts=HostPool(config))


async def measure(calls: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        ways = {
            "sandbox": context(Path(tmp) / "a", []),
            "mask": context(Path(tmp) / "c", ["cat:*"]),
            "outside": context(Path(tmp) / "b", []),
        }
        box = ToolBox([Bash()])
        times: dict[str, list[float]] = {k: [] for k in ways}
        for i in range(calls + 2):
            for way, ctx in ways.items():
                start = time.perf_counter()
                result, _ = await box.call(ctx, "bash", {"command": COMMANDS[way]})
                took = time.perf_counter() - start
                action = result.data.get("guard", {}).get("action", "allow")
                expected = "sandbox" if way == "sandbox" else "allow"
                assert not result.is_error and action == expected, result.text
                if i >= 2:  # the first calls probe the host and warm the caches
                    times[way].append(took)
        for ctx in ways.values():
            ctx.run.close()
            assert ctx.hosts is not None
            await ctx.hosts.close()
    return times


def decide_cost() -> float:
    corpus = json.loads(
        (Path(__file__).parent.parent / "tests/data/ordinary_corpus.json").read_text()
    )["commands"]
    ctx = Context(workdir="/root/campaign", run_dir="/root/runs/x", home="/root")
    start = time.perf_counter()
    for command in corpus:
        decide(command, context=ctx)
    return (time.perf_counter() - start) / len(corpus)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=200, help="calls per way")
    args = p.parse_args()
    times = asyncio.run(measure(args.calls))
    rows = {}
    for way, ts in times.items():
        ts = sorted(ts)
        rows[way] = (statistics.median(ts), ts[int(0.9 * (len(ts) - 1))])
        print(f"{way:8s} median {rows[way][0] * 1000:7.1f} ms   p90 {rows[way][1] * 1000:7.1f} ms")
    cost = rows["sandbox"][0] - rows["outside"][0]
    print(f"sandbox cost per call (difference of the medians): {cost * 1000:.1f} ms")
    cost = rows["mask"][0] - rows["outside"][0]
    print(f"mask cost per call (a supervisor's rule for code): {cost * 1000:.1f} ms")
    print(f"decide() per command (mean over the ordinary corpus): {decide_cost() * 1000:.2f} ms")


if __name__ == "__main__":
    main()
