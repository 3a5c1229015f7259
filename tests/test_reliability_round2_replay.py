"""Issue 16 item 7: a resumed Claude run and a supervised one (say, budget, stop) replay
identically under `agent replay --check`.

"Claude" is a script of Messages API responses served through the real SDK (as in
tests/sessions/make_sessions.py); the supervisor's messages are sent through the real inbox while
the run is live, and each session after the first is a resume as `agent resume` makes it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from agent.brains.anthropic import AnthropicBrain
from agent.recover import recover
from agent.session import Limits, make_agent, process_fields, start
from agent.session_replay import replay
from state.events import read_events
from state.inbox import send
from state.run import Run
from tests.sessions.make_sessions import MODEL, Script, answer, call, say, session_config, todo
from tools.base import ToolBox, ToolContext, ToolResult
from tools.registry import all_tools


def script() -> Script:
    s = Script("supervised")
    plan = [todo("a", "Measure the baseline", "pending"), todo("b", "Compare", "pending")]
    s.turn(say("Planning."), call("todowrite", todos=plan))
    for i in range(8):
        plan[i % 2]["status"] = ["pending", "in_progress"][i % 2]
        plan[0]["content"] = f"Measure the baseline, pass {i}"  # not a loop to be nudged out of
        s.turn(say(f"Step {i}."), call("todowrite", todos=plan), call("todoread"))
    s.turn(say("Done: the plan is complete."), stop="end_turn")
    return s


class Claude:
    """The scripted API; `at[n]` runs just before the n-th response is served (1-based)."""

    def __init__(self, at: dict[int, Callable[[], Any]]) -> None:
        self.responses = iter(script().responses)
        self.served, self.at = 0, at

    def brain(self) -> AnthropicBrain:
        def handler(request: httpx2.Request) -> httpx2.Response:
            self.served += 1
            if self.served in self.at:
                self.at[self.served]()
            return answer(json.loads(request.content), next(self.responses))

        client = anthropic.AsyncAnthropic(
            api_key="recording",
            base_url="http://recording.invalid",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
        )
        return AnthropicBrain(MODEL, client=client)


async def session(run: Run, claude: Claude) -> int:
    agent = make_agent(run, claude.brain(), session_config())
    return await agent.run_loop()


async def resumed(path: Path, claude: Claude) -> tuple[int, Run]:
    run = Run.open(path)  # what `agent resume` does before the loop
    run.append("run_resumed", repaired=None, **process_fields())
    return await session(run, claude), run


def supervised_start(runs: Path, run_id: str, max_steps: int) -> Run:
    config = session_config()
    return start("beat baseline", config, MODEL, runs, run_id, Limits(max_steps=max_steps))


async def test_a_resumed_supervised_claude_run_replays_identically(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    path = runs / "r"
    claude = Claude(
        {
            2: lambda: send(path, "say", text="mind the port"),
            7: lambda: send(path, "stop"),
        }
    )
    run = supervised_start(runs, "r", max_steps=4)
    assert await session(run, claude) == 3  # out of steps
    run.close()
    send(path, "budget", limits={"max_steps": 40})
    code, run = await resumed(path, claude)
    assert code == 130  # stopped by the supervisor
    run.close()
    code, run = await resumed(path, claude)
    assert code == 0
    run.close()
    events = read_events(path / "events.jsonl").events
    kinds = [e["type"] for e in events]
    assert kinds.count("run_resumed") == 2 and "supervisor_message" in kinds
    assert "limits_changed" in kinds and "stop_requested" in kinds

    code, replayed, drift = await replay(path, tmp_path / "replays")
    assert drift is None
    assert code == 0
    replayed_events = read_events(replayed.events_path).events
    ends = [e["status"] for e in replayed_events if e["type"] == "run_finished"]
    assert ends == ["budget_exhausted", "stopped", "finished"]


async def test_a_stopped_run_replays_its_stop(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    path = runs / "s"
    claude = Claude({3: lambda: send(path, "say", text="hurry"), 5: lambda: send(path, "stop")})
    run = supervised_start(runs, "s", max_steps=40)
    assert await session(run, claude) == 130
    run.close()
    code, _, drift = await replay(path, tmp_path / "replays")
    assert (code, drift) == (130, None)


class Crash(BaseException):
    """The agent process dies (kill -9) in the middle of a tool call: nothing more is written."""


class CrashingTools(ToolBox):
    def __init__(self, at: str) -> None:
        super().__init__(all_tools())
        self.at = at

    async def call(
        self, ctx: ToolContext, name: str, raw_input: Any, call_id: str = ""
    ) -> tuple[ToolResult, float]:
        if call_id == self.at:
            raise Crash
        return await super().call(ctx, name, raw_input, call_id)


async def test_a_run_resumed_after_a_crash_in_a_tool_call_replays(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    claude = Claude({})
    run = supervised_start(runs, "c", max_steps=40)
    agent = make_agent(run, claude.brain(), session_config())
    agent.tools = CrashingTools("toolu_supervised_04_2")  # the 4th turn's todoread
    with pytest.raises(Crash):
        await agent.run_loop()
    run.close()
    run = Run.open(runs / "c")
    run.append("run_resumed", repaired=None, **process_fields())
    agent = make_agent(run, claude.brain(), session_config())
    assert await recover(agent.ctx) == ["answered 1 interrupted tool call(s)"]
    assert await agent.run_loop() == 0
    run.close()

    code, _, drift = await replay(runs / "c", tmp_path / "replays")
    assert (code, drift) == (0, None)
