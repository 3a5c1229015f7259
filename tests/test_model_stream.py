"""The model's stream and the waits on it (issue 23 items 3-6), through the real anthropic SDK
against a faulty Messages API on loopback (tests/fake_messages_api.py): a real HTTP server that
cuts its SSE stream at several points, drops the connection, sends junk, refuses a prompt as too
long, answers 529 for minutes. Outcomes are asserted (exit code, status, events, what the server
was asked), never durations."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import agent.loop
from agent.brains.anthropic import AnthropicBrain
from agent.brains.client import PatientAnthropic
from agent.brains.sse import render_sse
from agent.loop import Agent
from agent.session import Limits, make_agent, start
from agent.session_replay import replay
from agent.view.live import event_line
from agent.view.panels import Board, render
from state.events import read_events
from state.inbox import send
from state.run import Run
from tests.conftest import plain_config
from tests.fake_messages_api import (
    Cut,
    Drop,
    FakeMessagesAPI,
    Fault,
    Malformed,
    Reset,
    Status,
    message,
    sse_events,
    text,
    tool_use,
)
from tools.domain.config import CompactionConfig, Config, HostConfig, ModelConfig

MODEL = "claude-sonnet-4-6"
DEADLINE_S = 90  # generous: a loaded machine passes; without the fix these runs wait minutes
CONCLUSION = "Measured the baseline twice; nothing beat it. " * 3


async def no_wait(seconds: float) -> None:
    await asyncio.sleep(0)


def config_for(tmp_path: Path, **overrides: Any) -> Config:
    hosts = [HostConfig(name="local", workdir=str(tmp_path))]
    return plain_config(hosts=hosts, **overrides)


def campaign(
    tmp_path: Path,
    api: FakeMessagesAPI,
    config: Config | None = None,
    retries: int = 3,
    limits: Limits | None = None,
    waits: bool = False,  # real waits (the stop and budget tests), else none at all
) -> Agent:
    config = config or config_for(tmp_path)
    client = PatientAnthropic(
        api_key="test",
        base_url=api.url,
        max_retries=retries,
        sleep=asyncio.sleep if waits else no_wait,
        seed=3,
    )
    run = start("beat baseline", config, MODEL, tmp_path / "runs", None, limits or Limits())
    agent = make_agent(run, AnthropicBrain(MODEL, client=client), config)
    if not waits:
        agent.sleep = no_wait
    return agent


def events_of(agent: Agent) -> list[dict[str, Any]]:
    return read_events(agent.run.events_path).events


def waits_of(agent: Agent, stage: str) -> list[dict[str, Any]]:
    return [e for e in events_of(agent) if e["type"] == "model_wait" and e["stage"] == stage]


FINAL = message(2, "end_turn", text(CONCLUSION))
ALL_BUT_STOP = len(sse_events(render_sse(FINAL))) - 1  # everything but message_stop


# --- 3. a stream that ends before message_stop ---------------------------------------------------
@pytest.mark.parametrize("events", [0, 1, 4, ALL_BUT_STOP])
async def test_a_stream_cut_before_message_stop_is_retried_not_taken_as_the_answer(
    tmp_path: Path, events: int
) -> None:
    api = FakeMessagesAPI([FINAL], [Cut(events=events, times=2)])
    agent = campaign(tmp_path, api)
    try:
        code = await asyncio.wait_for(agent.run_loop(), DEADLINE_S)
    finally:
        api.close()
    end = events_of(agent)[-1]
    assert (code, end["status"]) == (0, "finished")
    assert end["reason"] == CONCLUSION.strip()  # the whole answer, not the cut one
    assert api.served == ["cut", "cut", "reply"]
    retries = waits_of(agent, "retry")
    assert len(retries) == 2 and all("before message_stop" in e["reason"] for e in retries)
    answers = [e for e in events_of(agent) if e["type"] == "message" and e["role"] == "assistant"]
    assert len(answers) == 1  # a cut stream is not a turn


async def test_a_tool_call_cut_mid_input_is_not_run(tmp_path: Path) -> None:
    todos = [{"id": "a", "content": "x" * 300, "status": "pending", "priority": "high"}]
    first = message(1, "tool_use", tool_use(1, "todowrite", todos=todos))
    api = FakeMessagesAPI([first, FINAL], [Cut(events=4)])  # inside the input's JSON
    agent = campaign(tmp_path, api)
    try:
        assert await asyncio.wait_for(agent.run_loop(), DEADLINE_S) == 0
    finally:
        api.close()
    calls = [e["input"] for e in events_of(agent) if e["type"] == "tool_call"]
    assert calls == [{"todos": todos}]
    assert agent.run.state.todos == todos


# --- 4. a connection dropped mid-stream, junk in the stream -------------------------------------
BAD_INDEX = (  # a delta for a block that never started
    'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 7, '
    '"delta": {"type": "text_delta", "text": "x"}}\n\n'
)


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        (Drop(events=4, times=2), "dropped mid-stream"),
        (Reset(events=6, times=2), "dropped mid-stream"),
        (Malformed(events=3, times=2), "malformed stream"),
        (Malformed(events=1, times=2, junk=BAD_INDEX), "IndexError"),
    ],
)
async def test_a_dropped_or_malformed_stream_is_retried_like_an_overload(
    tmp_path: Path, fault: Fault, words: str
) -> None:
    api = FakeMessagesAPI([FINAL], [fault])
    agent = campaign(tmp_path, api)
    try:
        code = await asyncio.wait_for(agent.run_loop(), DEADLINE_S)
    finally:
        api.close()
    end = events_of(agent)[-1]
    assert (code, end["status"], end["reason"]) == (0, "finished", CONCLUSION.strip())
    assert api.served == [fault.kind(), fault.kind(), "reply"]
    retries = waits_of(agent, "retry")
    assert len(retries) == 2 and all(words in e["reason"] for e in retries)
    assert not waits_of(agent, "pause")


async def test_drops_past_the_retries_pause_the_run_then_it_goes_on(tmp_path: Path) -> None:
    api = FakeMessagesAPI([FINAL], [Drop(events=2, times=5)])
    agent = campaign(tmp_path, api, retries=1)  # two tries per call: the loop must pause
    try:
        code = await asyncio.wait_for(agent.run_loop(), DEADLINE_S)
    finally:
        api.close()
    assert (code, events_of(agent)[-1]["status"]) == (0, "finished")
    pauses = waits_of(agent, "pause")
    assert len(pauses) == 2 and all("dropped mid-stream" in e["reason"] for e in pauses)
    assert api.served == ["drop"] * 5 + ["reply"]


async def test_drops_past_the_overload_wait_end_the_run_resumable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = FakeMessagesAPI([FINAL], [Drop(events=2, times=100)])
    config = config_for(tmp_path, model=ModelConfig(overload_wait_minutes=0))
    agent = campaign(tmp_path, api, config, retries=1)
    try:
        code = await asyncio.wait_for(agent.run_loop(), DEADLINE_S)
    finally:
        api.close()
    end = events_of(agent)[-1]
    assert (code, end["status"]) == (1, "model_unavailable")
    assert "dropped mid-stream" in end["reason"] and "agent resume" in end["reason"]
    assert "Traceback" not in capsys.readouterr().err


# --- 5. a prompt past the model's context ------------------------------------------------------
def briefing_chars(tmp_path: Path, config: Config) -> int:
    run = start("beat baseline", config, MODEL, tmp_path / "probe", None, Limits())
    return len(json.dumps(run.state.messages))


async def test_a_prompt_too_long_is_pruned_and_sent_again(tmp_path: Path) -> None:
    config = config_for(tmp_path, compaction=CompactionConfig(keep_tool_tokens=100))
    first = message(1, "tool_use", tool_use(1, "bash", command="seq 1 4000"))
    api = FakeMessagesAPI([first, FINAL], context_chars=briefing_chars(tmp_path, config) + 3000)
    agent = campaign(tmp_path, api, config)
    try:
        code = await asyncio.wait_for(agent.run_loop(), DEADLINE_S)
    finally:
        api.close()
    events = events_of(agent)
    assert (code, events[-1]["status"], events[-1]["reason"]) == (0, "finished", CONCLUSION.strip())
    assert api.served == ["reply", "status", "reply"]
    refused = [e for e in events if e["type"] == "api_exchange" and e["status"] == 400]
    assert len(refused) == 1 and "prompt is too long" in json.dumps(refused[0]["response"])
    prunes = [e for e in events if e["type"] == "compaction"]
    assert [(e["stage"], e.get("cause")) for e in prunes] == [("prune", "prompt_too_long")]
    assert "\\n3999\\n" not in json.dumps(api.bodies[-1]["messages"])  # the output left
    await replays_without_drift(agent, tmp_path)


async def test_a_prompt_too_long_with_nothing_to_prune_is_summarised(tmp_path: Path) -> None:
    config = config_for(tmp_path, compaction=CompactionConfig(keep_tool_tokens=100, keep_turns=1))
    words = "I read the list again and think about the next measurement. " * 25  # ~1500 chars
    todo = {"content": "measure", "status": "pending", "priority": "high"}
    turns = [
        message(
            n, "tool_use", text(words), tool_use(n, "todowrite", todos=[{"id": f"t{n}", **todo}])
        )
        for n in (1, 2, 3)
    ]
    api = FakeMessagesAPI([*turns, FINAL], context_chars=briefing_chars(tmp_path, config) + 3500)
    agent = campaign(tmp_path, api, config)
    try:
        code = await asyncio.wait_for(agent.run_loop(), DEADLINE_S)
    finally:
        api.close()
    events = events_of(agent)
    assert (code, events[-1]["status"], events[-1]["reason"]) == (0, "finished", CONCLUSION.strip())
    summaries = [e for e in events if e["type"] == "compaction" and e["stage"] == "summary"]
    assert summaries and all(e["cause"] == "prompt_too_long" for e in summaries)
    assert "status" in api.served and api.served[-1] == "reply"
    assert any(e["type"] == "api_exchange" and e["status"] == 400 for e in events)
    await replays_without_drift(agent, tmp_path)


async def test_a_run_that_ended_on_a_prompt_too_long_resumes_compacts_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_for(tmp_path, compaction=CompactionConfig(keep_tool_tokens=100))
    first = message(1, "tool_use", tool_use(1, "bash", command="seq 1 4000"))
    api = FakeMessagesAPI([first, FINAL], context_chars=briefing_chars(tmp_path, config) + 3000)
    with monkeypatch.context() as patch:  # the run ends on its first 400, as it did before
        patch.setattr(agent.loop, "COMPACT_TRIES", 0)
        ended = campaign(tmp_path, api, config)
        assert await asyncio.wait_for(ended.run_loop(), DEADLINE_S) == 1
    ended.run.close()
    run = Run.open(ended.run.path)  # what `agent resume` does, with the brain it makes
    run.append("run_resumed", repaired=None)
    client = PatientAnthropic(api_key="test", base_url=api.url, max_retries=3, sleep=no_wait)
    resumed = make_agent(run, AnthropicBrain(MODEL, client=client), config)
    try:
        code = await asyncio.wait_for(resumed.run_loop(), DEADLINE_S)
    finally:
        api.close()
        run.close()
    end = events_of(resumed)[-1]
    assert (code, end["status"], end["reason"]) == (0, "finished", CONCLUSION.strip())
    assert api.served == ["reply", "status", "status", "reply"]  # the same 400, then compacted


async def replays_without_drift(agent: Agent, tmp_path: Path) -> None:
    code, _run, drift = await replay(agent.run.path, tmp_path / "replays")
    assert (code, drift) == (0, None)


# --- 6. a stop and the budgets during the waits ---------------------------------------------------
async def started_waiting(agent: Agent) -> asyncio.Task[int]:
    """The run, once it announced a wait on the API."""
    task = asyncio.create_task(agent.run_loop())
    for _ in range(int(DEADLINE_S / 0.05)):
        if task.done() or any(e["type"] == "model_wait" for e in events_of(agent)):
            break
        await asyncio.sleep(0.05)
    assert not task.done(), events_of(agent)[-1]
    return task


LONG_RETRY_AFTER = Status(code=529, retry_after=300, times=1000)  # the SDK would wait 300 s


async def test_a_stop_during_the_sdk_retry_wait_ends_the_run_before_the_next_try(
    tmp_path: Path,
) -> None:
    api = FakeMessagesAPI([FINAL], outage=(LONG_RETRY_AFTER, 3600))
    agent = campaign(tmp_path, api, waits=True)
    try:
        task = await started_waiting(agent)
        send(agent.run.path, "stop")
        code = await asyncio.wait_for(task, DEADLINE_S)
    finally:
        api.close()
    events = events_of(agent)
    assert (code, events[-1]["status"]) == (130, "stopped")
    assert len(api.bodies) == 1  # acted on before the next attempt
    assert [e["type"] for e in events[-3:]] == ["model_wait", "stop_requested", "run_finished"]


async def test_the_minutes_budget_ends_a_retry_wait(tmp_path: Path) -> None:
    api = FakeMessagesAPI([FINAL], outage=(LONG_RETRY_AFTER, 3600))
    agent = campaign(tmp_path, api, waits=True, limits=Limits(max_minutes=0.02))
    try:
        code = await asyncio.wait_for(agent.run_loop(), DEADLINE_S)
    finally:
        api.close()
    end = events_of(agent)[-1]
    assert (code, end["status"]) == (3, "budget_exhausted")
    assert "minutes" in end["reason"] and len(api.bodies) == 1


async def test_a_lowered_budget_ends_the_loops_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent.loop, "PAUSE_FIRST_S", 300.0)  # the loop's own first pause
    api = FakeMessagesAPI([FINAL], outage=(Status(code=529, times=1000), 3600))
    agent_ = campaign(tmp_path, api, retries=0, waits=True)
    try:
        task = await started_waiting(agent_)  # in the loop's pause: the SDK does not retry
        send(agent_.run.path, "budget", limits={"max_minutes": 0.001})
        code = await asyncio.wait_for(task, DEADLINE_S)
    finally:
        api.close()
    events = events_of(agent_)
    assert (code, events[-1]["status"]) == (3, "budget_exhausted")
    assert any(e["type"] == "limits_changed" for e in events) and len(api.bodies) == 1


def test_the_view_says_the_api_is_unavailable_and_when_the_next_try_is() -> None:
    board = Board()
    for seq, event in enumerate(
        [
            {"type": "run_started", "run_id": "r", "goal": "beat baseline", "brain": "anthropic"},
            {"type": "message", "role": "user", "content": [text("brief")]},
            {
                "type": "model_wait",
                "stage": "retry",
                "reason": "the Anthropic API: HTTP 529 overloaded",
                "pause_s": 34.0,
                "retry_at": "2026-12-03T10:00:34.000Z",
            },
        ],
        start=1,
    ):
        board.apply({"seq": seq, "ts": "2026-12-03T10:00:00.000Z", **event})
    console = Console(record=True, width=160)
    from datetime import UTC, datetime

    console.print(render(board, now=datetime(2026, 12, 3, 10, 0, 10, tzinfo=UTC)))
    shown = console.export_text()
    assert "API unavailable" in shown and "HTTP 529 overloaded" in shown
    assert "next try 10:00:34 (in 0:24)" in shown and "thinking" not in shown
    line = event_line(board.log[-1])
    assert line is not None and "next try 10:00:34" in line.plain
