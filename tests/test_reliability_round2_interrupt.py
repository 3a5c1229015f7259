"""Issue 16 item 5: `agent stop` and an exhausted minutes budget interrupt a running benchmark
(they used to wait for the tool call to end), keep its completed levels, and end the run as
documented: exit 130 (stopped) or 3 (budget exhausted), no server left."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from agent.loop import Agent
from agent.session import Limits, make_agent, start, wrap_up
from benchmarks.kill_resume_lab import free_port
from state.events import read_events
from state.inbox import send
from tests.conftest import ScriptedBrain, tool_turn
from tools.base import INTERRUPTED_PREFIX
from tools.domain.config import Config, HostConfig, lab_config

LEVELS = [1, 2, 4, 8, 16, 32, 64]  # ~30 s of benchmark: far longer than a stop takes

pytestmark = pytest.mark.slow  # a real server and benchmark: ~10 s each


def lab(tmp_path: Path) -> Config:
    base = lab_config(time_scale=20, port=free_port())
    command = base.server.command.replace("--load-seconds 1.5", "--load-seconds 0.2")
    return Config(
        hosts=[HostConfig(name="local", workdir=str(tmp_path / "work"))],
        server=base.server.model_copy(update={"command": command}),
        search=base.search,
    )


def campaign(tmp_path: Path, limits: Limits) -> tuple[Agent, list[float]]:
    config = lab(tmp_path)
    run = start("beat baseline", config, "autopilot", tmp_path / "runs", "r", limits)
    brain = ScriptedBrain(
        [
            tool_turn(("start_server", {}), step=1),
            tool_turn(
                (
                    "run_benchmark",
                    {"concurrency": LEVELS, "requests_per_level": 16, "max_tokens": 64},
                ),
                step=2,
            ),
        ]
    )
    first_level: list[float] = []  # when the first level was done

    def progress(kind: str, /, **info: Any) -> None:
        if kind == "benchmark" and info.get("levels_done", 0) >= 1 and not first_level:
            first_level.append(time.monotonic())

    agent = make_agent(run, brain, config, progress=progress)
    agent.on_end = lambda status: wrap_up(agent, status)
    return agent, first_level


def check_interrupted(agent: Agent) -> dict[str, Any]:
    events = read_events(agent.run.events_path).events
    (bench,) = [e for e in events if e["type"] == "benchmark"]
    assert bench["interrupted"] is True
    assert 1 <= len(bench["summary"]) < len(LEVELS)  # the completed levels, kept
    result = [e for e in events if e["type"] == "tool_result" and e["name"] == "run_benchmark"]
    assert result and result[0]["is_error"] and result[0]["text"].startswith(INTERRUPTED_PREFIX)
    assert agent.run.state.servers == {}  # the run's end killed its server
    return events[-1]


async def test_stop_interrupts_a_running_benchmark(tmp_path: Path) -> None:
    agent, _ = campaign(tmp_path, Limits())
    sent: list[str] = []

    def stop_after_a_level(kind: str, /, **info: Any) -> None:
        if kind == "benchmark" and info.get("levels_done", 0) >= 1 and not sent:
            sent.append(send(agent.run.path, "stop"))  # `agent stop RUN`

    agent.ctx.progress = stop_after_a_level
    code = await agent.run_loop()
    assert code == 130
    end = check_interrupted(agent)
    assert end["status"] == "stopped" and end["reason"] == "stopped by the supervisor"
    await agent.ctx.hosts.close() if agent.ctx.hosts else None
    agent.run.close()


async def test_an_exhausted_minutes_budget_interrupts_a_running_benchmark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, first_level = campaign(tmp_path, Limits(max_minutes=10))
    real = agent.clock
    # once a level is measured, ten minutes have passed (the injectable clock of the loop)
    agent.clock = lambda: real() + (600 if first_level else 0)
    code = await agent.run_loop()
    assert code == 3
    end = check_interrupted(agent)
    assert end["status"] == "budget_exhausted" and "minutes" in end["reason"]
    await agent.ctx.hosts.close() if agent.ctx.hosts else None
    agent.run.close()
