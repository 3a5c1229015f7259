"""Issue 16 item 7: a resumed Claude run and a supervised one (say, budget, stop) replay
identically under `agent replay --check`.

"Claude" is a script of Messages API responses served through the real SDK (as in
tests/sessions/make_sessions.py); the supervisor's messages are sent through the real inbox while
the run is live, and each session after the first is a resume as `agent resume` makes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from agent import session_replay
from agent.brains.anthropic import AnthropicBrain
from agent.recover import recover
from agent.session import Limits, make_agent, process_fields, run_tools, start
from agent.session_replay import replay
from state.events import read_events
from state.inbox import send
from state.run import Run
from tests.sessions.make_sessions import MODEL, Script, answer, call, say, session_config, todo
from tools.base import ToolBox, ToolContext, ToolResult


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
        super().__init__(run_tools())  # the tools of a one-box run, plan among them
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


async def test_a_run_resumed_with_calls_not_yet_started_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kill cuts the turn's first call; its second never started (no tool_call event):
    `agent resume` answers both, and the replay answers the unstarted one the same way."""
    runs = tmp_path / "runs"
    claude = Claude({})
    run = supervised_start(runs, "u", max_steps=40)
    agent = make_agent(run, claude.brain(), session_config())
    agent.tools = CrashingTools("toolu_supervised_04_1")  # the 4th turn's todowrite

    def killed(*_: Any, **__: Any) -> None:  # a dead process writes nothing more
        raise Crash

    real_call = agent.tools.call

    async def kill(
        ctx: ToolContext, name: str, raw_input: Any, call_id: str = ""
    ) -> tuple[ToolResult, float]:
        if call_id == "toolu_supervised_04_1":
            monkeypatch.setattr(run, "append", killed)
        return await real_call(ctx, name, raw_input, call_id)

    monkeypatch.setattr(agent.tools, "call", kill)
    with pytest.raises(Crash):
        await agent.run_loop()
    monkeypatch.undo()
    run.close()
    events = read_events(runs / "u" / "events.jsonl").events
    assert "toolu_supervised_04_2" not in {e.get("id") for e in events}  # not started
    run = Run.open(runs / "u")
    run.append("run_resumed", repaired=None, **process_fields())
    agent = make_agent(run, claude.brain(), session_config())
    assert await recover(agent.ctx) == ["answered 2 interrupted tool call(s)"]
    assert await agent.run_loop() == 0
    run.close()

    code, _, drift = await replay(runs / "u", tmp_path / "replays")
    assert (code, drift) == (0, None)


@pytest.mark.slow  # three agent processes on the lab, ~15 s
def test_an_autopilot_run_ended_and_resumed_replays(tmp_path: Path) -> None:
    """The run's first session ends with the baseline server up, so the clean-up kills it
    (server_killed outside any tool call); the resumed autopilot starts it again. The replay
    must feed that kill, or its autopilot believes the server is still up and benchmarks it."""
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["AGENT_RUNS_DIR"] = str(tmp_path / "runs")

    def agent(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agent.cli", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=tmp_path,
        )

    assert (
        agent("run", "--goal", "beat baseline", "--run-id", "ap", "--max-steps", "2").returncode
        == 3
    )
    assert agent("budget", "ap", "--steps", "3").returncode == 0
    assert agent("resume", "ap").returncode == 3
    events = read_events(tmp_path / "runs" / "ap" / "events.jsonl").events
    starts = [e for e in events if e["type"] == "tool_call" and e["name"] == "start_server"]
    assert len(starts) == 2  # the resumed autopilot started the killed server again
    check = agent("replay", "ap", "--check")
    # --check exits 0 on a match whatever the run's own end (docs/cli.md), and names that end
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    assert "no drift" in check.stdout and "exit 3" in check.stdout


# a monotonic clock's reading at which 4 and 5 minutes worked back from it come out a rounding
# under (((s + 240) - s) / 60 < 4): the replay missed the warning when its session began there
ROUNDS_BELOW = 261984.03134488701


@pytest.mark.parametrize("replay_start", [None, ROUNDS_BELOW])
async def test_a_run_ended_by_its_minutes_budget_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replay_start: float | None
) -> None:
    """A replay takes seconds: the minutes budget must warn and end it where it did in the run
    (the warning is a message to the model, and the autopilot wraps up on it), whatever the
    clock reads when the replay begins."""
    runs = tmp_path / "runs"
    config = session_config()
    run = start("beat baseline", config, MODEL, runs, "m", Limits(max_steps=40, max_minutes=5))
    agent = make_agent(run, Claude({}).brain(), config)
    # a minute a turn, once its results are in: the budget ends the run before a model call,
    # not in the middle of a turn's tools (where the stop watcher's poll raced the tools on a
    # loaded machine: it failed there once)
    waiting = [0]  # the latest turn's tool calls without their result yet

    def count(e: dict[str, Any]) -> None:
        if e["type"] == "message" and e["role"] == "assistant":
            waiting[0] = sum(b["type"] == "tool_use" for b in e["content"])
        elif e["type"] == "tool_result":
            waiting[0] -= 1

    run.listeners.append(count)
    answered = lambda: run.state.steps - (waiting[0] > 0)  # noqa: E731
    # from 0: a whole number of minutes, exactly (start + 240 s - start can be 239.99... s)
    agent.session_start = 0.0
    agent.clock = lambda: 60.0 * answered()
    assert await agent.run_loop() == 3
    run.close()
    events = read_events(runs / "m" / "events.jsonl").events
    assert [e["limit"] for e in events if e["type"] == "budget_warning"] == ["max_minutes"]

    if replay_start is not None:

        def starting_there(*args: Any, **kwargs: Any) -> Any:
            replaying = make_agent(*args, **kwargs)
            replaying.session_start = replay_start
            return replaying

        monkeypatch.setattr(session_replay, "make_agent", starting_there)
    code, replayed, drift = await replay(runs / "m", tmp_path / "replays")
    assert (code, drift) == (3, None)
    ends = [e for e in read_events(replayed.events_path).events if e["type"] == "run_finished"]
    assert "minutes" in ends[-1]["reason"]
