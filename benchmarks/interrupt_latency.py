"""How long `agent stop` takes to cut a running benchmark short (issue 16 item 5).

    .venv/bin/python -m benchmarks.interrupt_latency --trials 5

Each trial: a lab server (the simulator), a 7-level sweep that would take ~30 s, `agent stop` sent
through the inbox as soon as the first level is measured. Printed per trial: seconds from the stop
to the benchmark's result (the interrupted tool_result event) and to the end of the run (servers
killed, report written), and the levels kept.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from agent.cli.runner import wrap_up
from agent.session import Limits, make_agent, start
from benchmarks.kill_resume_lab import free_port
from state.events import read_events
from state.inbox import send
from tests.conftest import ScriptedBrain, tool_turn
from tools.domain.config import Config, HostConfig, lab_config

LEVELS = [1, 2, 4, 8, 16, 32, 64]


async def trial(root: Path) -> tuple[float, float, int]:
    base = lab_config(time_scale=20, port=free_port())
    command = base.server.command.replace("--load-seconds 1.5", "--load-seconds 0.2")
    config = Config(
        hosts=[HostConfig(name="local", workdir=str(root / "work"))],
        server=base.server.model_copy(update={"command": command}),
        search=base.search,
    )
    run = start("beat baseline", config, "autopilot", root / "runs", "r", Limits())
    bench = {"concurrency": LEVELS, "requests_per_level": 16, "max_tokens": 64}
    brain = ScriptedBrain(
        [tool_turn(("start_server", {}), step=1), tool_turn(("run_benchmark", bench), step=2)]
    )
    agent = make_agent(run, brain, config)
    agent.on_end = lambda status: wrap_up(agent, status)
    sent: list[float] = []

    def progress(kind: str, /, **info: Any) -> None:
        if kind == "benchmark" and info.get("levels_done", 0) >= 1 and not sent:
            send(run.path, "stop")
            sent.append(time.time())

    agent.ctx.progress = progress
    await agent.run_loop()
    ended = time.time()
    events = read_events(run.events_path).events
    result = next(e for e in events if e["type"] == "tool_result" and e["name"] == "run_benchmark")
    at = datetime.fromisoformat(result["ts"].replace("Z", "+00:00")).timestamp()
    kept = len(next(e for e in events if e["type"] == "benchmark")["summary"])
    if agent.ctx.hosts is not None:
        await agent.ctx.hosts.close()
    run.close()
    return at - sent[0], ended - sent[0], kept


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for i in range(args.trials):
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(asyncio.run(trial(Path(tmp))))
        cut, end, kept = rows[-1]
        print(f"trial {i + 1}: result after {cut:.2f} s, run ended after {end:.2f} s, {kept} kept")
    for what, values in (
        ("interrupted result", [r[0] for r in rows]),
        ("run ended", [r[1] for r in rows]),
    ):
        print(f"stop -> {what}: median {statistics.median(values):.2f} s, max {max(values):.2f} s")


if __name__ == "__main__":
    main()
