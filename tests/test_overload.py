"""An overloaded API pauses the run instead of ending it: the SDK's patient retries first, then
the loop's pauses, for up to [model] overload_wait_minutes. Time is simulated: a scripted
Anthropic-compatible server answers 529 until the simulated clock passes the outage, and every
wait (the SDK's retry sleeps, the loop's pauses) moves that clock instead of sleeping."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2

from agent.brains.anthropic import AnthropicBrain
from agent.brains.client import PatientAnthropic, backoff_s
from agent.brains.sse import render_sse
from agent.session import Limits, make_agent, start
from state.events import read_events
from tests.conftest import plain_config
from tools.domain.config import ModelConfig

MODEL = "claude-sonnet-4-6"


class SimulatedTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def message(n: int, stop: str, *content: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": list(content),
        "stop_reason": stop,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }


class OverloadedServer:
    """529 overloaded_error until `until_s` of simulated time, then a two-turn conversation."""

    def __init__(self, time: SimulatedTime, until_s: float) -> None:
        self.time, self.until_s = time, until_s
        self.overloaded = self.served = 0
        self.turns = [
            message(
                1, "tool_use", {"type": "tool_use", "id": "t1", "name": "todoread", "input": {}}
            ),
            message(2, "end_turn", {"type": "text", "text": "done after the outage"}),
        ]

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        assert json.loads(request.content)["stream"] is True
        if self.time.now < self.until_s:
            self.overloaded += 1
            body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            return httpx2.Response(529, json=body)
        self.served += 1
        sse = render_sse(self.turns.pop(0))
        return httpx2.Response(200, content=sse, headers={"content-type": "text/event-stream"})


def campaign(tmp_path: Path, until_s: float, wait_minutes: float) -> tuple[Any, Any, Any]:
    time = SimulatedTime()
    server = OverloadedServer(time, until_s)
    client = PatientAnthropic(
        api_key="test",
        base_url="http://overloaded.invalid",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(server.handle)),
        sleep=time.sleep,
        seed=7,
    )
    config = plain_config(model=ModelConfig(overload_wait_minutes=wait_minutes))
    run = start("beat baseline", config, MODEL, tmp_path, None, Limits(max_usd=100))
    agent = make_agent(run, AnthropicBrain(MODEL, client=client), config)
    agent.sleep, agent.clock = time.sleep, time.clock
    return agent, server, time


async def test_a_90_s_overload_pauses_the_run_and_it_goes_on(tmp_path: Path) -> None:
    agent, server, time = campaign(tmp_path, until_s=90, wait_minutes=30)
    agent.brain.client.max_retries = 3  # fewer SDK retries than the outage: the loop must pause
    assert await agent.run_loop() == 0
    events = read_events(agent.run.events_path).events
    waits = [e for e in events if e["type"] == "model_wait" and e["stage"] == "pause"]
    assert waits, "the loop never paused"
    assert all("529 overloaded" in e["reason"] for e in waits)
    assert time.now >= 90 and server.overloaded >= 4 and server.served == 2
    end = events[-1]
    assert end["type"] == "run_finished" and end["status"] == "finished"
    assert end["reason"] == "done after the outage"
    assert [e["name"] for e in events if e["type"] == "tool_result"] == ["todoread"]


async def test_the_sdk_alone_rides_out_a_short_overload_with_jittered_backoff(
    tmp_path: Path,
) -> None:
    agent, server, time = campaign(tmp_path, until_s=20, wait_minutes=30)
    assert await agent.run_loop() == 0
    events = read_events(agent.run.events_path).events
    waits = [e for e in events if e["type"] == "model_wait"]
    assert waits and all(e["stage"] == "retry" for e in waits)  # announced; no pause of the run
    assert all(e["retry_at"] > e["ts"] and "529 overloaded" in e["reason"] for e in waits)
    assert server.overloaded >= 2 and time.now >= 20
    steps = time.sleeps[: server.overloaded]
    assert all(s > 0.5 for s in steps)  # longer than the SDK's own 0.5 s first step
    assert len(set(steps)) == len(steps)  # jittered


async def test_an_outage_past_the_limit_ends_resumable_with_the_cause(tmp_path: Path) -> None:
    agent, _server, time = campaign(tmp_path, until_s=10_000, wait_minutes=5)
    assert await agent.run_loop() == 1
    end = read_events(agent.run.events_path).events[-1]
    assert end["status"] == "model_unavailable"
    assert "529 overloaded" in end["reason"] and "agent resume" in end["reason"]
    assert 5 * 60 <= time.now < 10_000


def test_backoff_doubles_to_a_cap_with_jitter() -> None:
    import random

    rng = random.Random(1)
    waits = [backoff_s(n, rng) for n in range(8)]
    assert 1.0 <= waits[0] <= 2.0 and 16.0 <= waits[4] <= 32.0
    assert all(30.0 <= w <= 60.0 for w in waits[5:])
