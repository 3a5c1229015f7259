"""The model path and bad input, round four (issue 49): a tool call cut off at max_tokens never
runs, input that is JSON but not an object is the model's mistake and crashes no view, the todo
list is bounded, and a run of failing calls whatever their input is nudged, then stuck. Through
the real anthropic SDK against the scripted Messages API on loopback (tests/fake_messages_api.py)
where the model speaks; the real loop, tools and views everywhere."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agent.brains.anthropic import AnthropicBrain
from agent.brains.client import PatientAnthropic
from agent.loop import Agent
from agent.report import gather, render_files
from agent.session import Limits, make_agent, start
from agent.session_replay import replay
from agent.view.console import PlainPrinter, describe
from agent.view.eta import measured_times
from agent.view.live import event_line
from agent.view.panels import Board, render
from state.events import read_events
from tests.conftest import ScriptedBrain, agent_for, plain_config, tool_turn
from tests.fake_messages_api import (
    FakeMessagesAPI,
    cut_inside_input,
    message,
    text,
    tool_use,
)
from tools.domain.config import HostConfig

MODEL = "claude-sonnet-4-6"
DEADLINE_S = 90
FINAL = message(99, "end_turn", text("Done: nothing beat the baseline."))


async def no_wait(seconds: float) -> None:
    await asyncio.sleep(0)


def campaign(tmp_path: Path, api: FakeMessagesAPI) -> tuple[Agent, io.StringIO]:
    """A Claude run against the fake API, with the plain printer and the live view's pieces
    listening, as `agent run` attaches them."""
    config = plain_config(hosts=[HostConfig(name="local", workdir=str(tmp_path))])
    client = PatientAnthropic(
        api_key="test", base_url=api.url, max_retries=2, sleep=no_wait, seed=3
    )
    run = start("beat baseline", config, MODEL, tmp_path / "runs", None, Limits())
    agent = make_agent(run, AnthropicBrain(MODEL, client=client), config)
    agent.sleep = no_wait
    out = io.StringIO()
    board = Board(run_path=run.path)
    console = Console(file=io.StringIO(), width=120)

    def live(event: dict[str, Any]) -> None:  # what LiveView does with each event
        board.apply(event)
        event_line(event)
        console.print(render(board))

    run.listeners += [PlainPrinter(out, run.path), live]
    return agent, out


async def drive(agent: Agent, api: FakeMessagesAPI) -> int:
    try:
        return await asyncio.wait_for(agent.run_loop(), DEADLINE_S)
    finally:
        api.close()


def events_of(agent: Agent) -> list[dict[str, Any]]:
    return read_events(agent.run.events_path).events


def of_type(agent: Agent, kind: str) -> list[dict[str, Any]]:
    return [e for e in events_of(agent) if e["type"] == kind]


# --- 1. a tool call cut off at max_tokens never runs ---------------------------------------------
async def test_a_kill_server_cut_at_max_tokens_is_answered_not_run(tmp_path: Path) -> None:
    # the SDK's partial parser drops the unfinished string: the call would read kill_server {}
    cut = message(1, "max_tokens", text("Killing the draft."), tool_use(1, "kill_server"))
    api = FakeMessagesAPI([cut_inside_input(cut, '{"name": "cand-eag'), FINAL])
    agent, out = campaign(tmp_path, api)
    assert await drive(agent, api) == 0
    assert not of_type(agent, "tool_call") and not of_type(agent, "server_killed")
    (event,) = of_type(agent, "tool_call_cut")
    assert (event["id"], event["name"], event["stop_reason"]) == (
        "toolu_1",
        "kill_server",
        "max_tokens",
    )
    (result,) = of_type(agent, "tool_result")
    assert result["is_error"] and result["data"] == {"cut": "max_tokens"}
    assert "cut off at max_tokens" in result["text"] and "shorter" in result["text"]
    # the conversation stays valid: the next request answers the call first
    answer = api.bodies[1]["messages"][-1]["content"][0]
    assert (answer["type"], answer["tool_use_id"], answer["is_error"]) == (
        "tool_result",
        "toolu_1",
        True,
    )
    assert "kill_server not run: the reply was cut off at max_tokens" in out.getvalue()
    assert "every server of this run" not in out.getvalue()
    agent.run.close()
    check = [sys.executable, "-m", "agent.cli", "replay", str(agent.run.path), "--check"]
    proc = subprocess.run(
        [*check, "--runs-dir", str(tmp_path / "replays")],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


async def test_every_call_of_a_cut_reply_is_answered_none_runs(tmp_path: Path) -> None:
    todos = [{"id": "a", "content": "sweep", "status": "pending", "priority": "high"}]
    cut = message(
        1,
        "max_tokens",
        tool_use(1, "todowrite", todos=todos),
        {"type": "tool_use", "id": "toolu_2", "name": "start_server", "input": {"name": "cand"}},
    )
    # the partial parse of the second looks whole: {"name": "cand"} - it is still cut
    api = FakeMessagesAPI([cut_inside_input(cut, '{"name": "cand", "flags": {"spec'), FINAL])
    agent, _ = campaign(tmp_path, api)
    assert await drive(agent, api) == 0
    assert [e["id"] for e in of_type(agent, "tool_call_cut")] == ["toolu_1", "toolu_2"]
    assert not of_type(agent, "tool_call") and not of_type(agent, "todo")
    results = of_type(agent, "tool_result")
    assert [r["id"] for r in results] == ["toolu_1", "toolu_2"]
    assert all(r["is_error"] for r in results)
    code, _run, drift = await replay(agent.run.path, tmp_path / "replays")
    assert (code, drift) == (0, None)


async def test_a_call_in_a_refused_reply_is_answered_and_the_run_ends(tmp_path: Path) -> None:
    cut = message(1, "refusal", tool_use(1, "kill_server"))
    api = FakeMessagesAPI([cut_inside_input(cut, '{"na')])
    agent, _ = campaign(tmp_path, api)
    assert await drive(agent, api) == 1
    assert not of_type(agent, "tool_call")
    (result,) = of_type(agent, "tool_result")
    assert result["is_error"] and "stop_reason refusal" in result["text"]
    assert events_of(agent)[-1]["status"] == "error"


# --- 3. input that is JSON but not an object ------------------------------------------------------
MALFORMED: list[tuple[str, Any]] = [
    ("kill_server", ["cand-eagle3"]),
    ("kill_server", "cand-eagle3"),
    ("kill_server", 7),
    ("kill_server", None),
    ("run_benchmark", ["server", [1, 2]]),
    ("start_server", "--speculative-config eagle3"),
    ("todowrite", [{"id": "a"}]),
    ("todowrite", {"todos": 3}),
    ("run_benchmark", {"server": ["x"], "concurrency": 5, "label": {"a": 1}}),
    ("start_server", {"name": 5, "flags": ["--x"]}),
    ("recommend", {"config": "fast"}),
    ("compare", {"results": 7}),
]


@pytest.mark.parametrize(("name", "inp"), MALFORMED)
async def test_input_that_is_not_an_object_is_a_tool_error_and_no_view_crashes(
    tmp_path: Path, name: str, inp: Any
) -> None:
    first = message(
        1, "tool_use", {"type": "tool_use", "id": "toolu_1", "name": name, "input": inp}
    )
    api = FakeMessagesAPI([first, FINAL])
    agent, out = campaign(tmp_path, api)
    assert await drive(agent, api) == 0
    (call,) = of_type(agent, "tool_call")
    assert call["input"] == inp  # what the model sent, as it sent it
    (result,) = of_type(agent, "tool_result")
    assert result["is_error"] and "invalid input" in result["text"]
    assert f"-> {name}" in out.getvalue()
    events = events_of(agent)
    for event in events:  # every line of the views
        describe(event)
        event_line(event)
    measured_times(events)  # the time left reads the calls too
    (tmp_path / "report").mkdir()
    render_files(gather(agent.run.path, events), tmp_path / "report")  # the report
    code, _run, drift = await replay(agent.run.path, tmp_path / "replays")
    assert (code, drift) == (0, None)


# --- 4. the todo list is bounded ------------------------------------------------------------------
def todos(n: int, content: str = "x" * 400) -> list[dict[str, Any]]:
    return [
        {"id": f"t{i}", "content": content, "status": "pending", "priority": "low"}
        for i in range(n)
    ]


async def test_a_todo_list_past_the_bound_is_refused_in_one_line(make_run: Any) -> None:
    run, config = make_run()
    brain = ScriptedBrain(
        [
            tool_turn(("todowrite", {"todos": todos(300)}), step=1),
            tool_turn(("todowrite", {"todos": todos(3, "y" * 2000)}), step=2),
        ]
    )
    assert await agent_for(run, config, brain).run_loop() == 0
    results = [e for e in read_events(run.events_path).events if e["type"] == "tool_result"]
    assert [r["is_error"] for r in results] == [True, True]
    many, long = results[0]["text"], results[1]["text"]
    assert "at most 50 items, got 300" in many and len(many.splitlines()) == 1
    assert (
        "todos.0.content has 2000 characters, at most 500 allowed (3 fields" in long
        and len(long.splitlines()) == 1
    )
    assert len(many) < 400 and len(long) < 400
    assert run.state.todos == []


async def test_a_large_todo_list_is_echoed_as_a_summary(make_run: Any) -> None:
    run, config = make_run()
    big = todos(50)
    big[3]["status"] = "in_progress"
    brain = ScriptedBrain(
        [
            tool_turn(("todowrite", {"todos": big}), step=1),
            tool_turn(("todoread", {}), step=2),
        ]
    )
    assert await agent_for(run, config, brain).run_loop() == 0
    results = [e for e in read_events(run.events_path).events if e["type"] == "tool_result"]
    assert not any(r["is_error"] for r in results)
    wrote, read = results[0]["text"], results[1]["text"]
    assert len(wrote) < 1_000, len(wrote)  # 50 items of 400 characters: 21 KB whole
    assert "50 items" in wrote and "t3" in wrote  # what is in progress
    assert len(read) < 8_000, len(read)
    assert "t3" in read and "49 pending" in read
    assert len(run.state.todos) == 50  # the list itself is whole


async def test_a_small_todo_list_is_echoed_whole(make_run: Any) -> None:
    run, config = make_run()
    brain = ScriptedBrain([tool_turn(("todowrite", {"todos": todos(3, "sweep")}), step=1)])
    assert await agent_for(run, config, brain).run_loop() == 0
    (result,) = [e for e in read_events(run.events_path).events if e["type"] == "tool_result"]
    assert result["text"].splitlines()[:3] == [f"[ ] t{i}: sweep (low)" for i in range(3)]


# --- 5. a run of failing calls, whatever their input ---------------------------------------------
def failing_turns(n: int, start: int = 0) -> list[Any]:
    # each input differs: the identical-call guard never fires
    return [
        tool_turn(("read_log", {"server": f"nope-{i}"}), step=i) for i in range(start, start + n)
    ]


async def test_failing_calls_with_changing_input_get_a_nudge_then_end_stuck(make_run: Any) -> None:
    run, config = make_run()
    brain = ScriptedBrain(failing_turns(40))
    code = await agent_for(run, config, brain).run_loop()
    events = read_events(run.events_path).events
    results = [e for e in events if e["type"] == "tool_result"]
    assert all(r["is_error"] for r in results)
    (nudge,) = [e for e in events if e["type"] == "stuck_nudge"]
    assert nudge["pattern"] == "failing"
    assert (code, events[-1]["status"]) == (4, "stuck")
    assert len(results) == 20  # the end: 20 failing calls in a row
    before = [e for e in events if e["type"] in ("stuck_nudge", "tool_result")]
    assert before.index(nudge) == 10  # the nudge: after 10


async def test_a_success_resets_the_failing_run(make_run: Any) -> None:
    run, config = make_run()
    turns = []
    for i in range(3):
        turns += failing_turns(9, start=10 * i)
        turns.append(tool_turn(("todoread", {}), step=100 + i))
    brain = ScriptedBrain(turns)
    assert await agent_for(run, config, brain).run_loop() == 0
    events = read_events(run.events_path).events
    assert not [e for e in events if e["type"] == "stuck_nudge"]


@pytest.mark.parametrize("inp", [["--x"], "fast", None, {"flags": ["--x"]}])
async def test_a_malformed_call_leaves_the_planner_and_its_report_section_whole(
    tmp_path: Path, inp: Any
) -> None:
    bad = {"type": "tool_use", "id": "toolu_1", "name": "start_server", "input": inp}
    api = FakeMessagesAPI(
        [
            message(1, "tool_use", bad),
            message(2, "tool_use", tool_use(2, "plan")),
            message(3, "tool_use", {**bad, "id": "toolu_3", "name": "run_benchmark"}),
            FINAL,
        ]
    )
    agent, _ = campaign(tmp_path, api)
    assert await drive(agent, api) == 0
    plan = next(e for e in of_type(agent, "tool_result") if e["name"] == "plan")
    assert not plan["is_error"], plan["text"]
    (tmp_path / "report").mkdir()
    render_files(gather(agent.run.path, events_of(agent)), tmp_path / "report")


async def test_many_invalid_items_are_ten_lines_and_a_count(make_run: Any) -> None:
    run, config = make_run()
    items = [{"id": f"t{i}", "content": "sweep"} for i in range(30)]  # no status: 30 errors
    brain = ScriptedBrain([tool_turn(("todowrite", {"todos": items}), step=1)])
    assert await agent_for(run, config, brain).run_loop() == 0
    (result,) = [e for e in read_events(run.events_path).events if e["type"] == "tool_result"]
    lines = result["text"].splitlines()
    assert lines[0] == "invalid input:" and lines[1].startswith("todos.0.status: Field required")
    assert len(lines) == 12 and lines[-1] == "... and 20 more errors"


# --- item 2: a stream that stalls is noticed at its deadline, not after the SDK's 600 s ----------


async def test_a_stalled_stream_is_noticed_at_its_deadline_and_retried(tmp_path: Path) -> None:
    """The API sends three events and then nothing, the connection open, for ten minutes: the
    read deadline ([model] stall_timeout_s, here 0.5 s) ends the stream as broken, the retry is
    announced (model_wait: "the stream stalled"), and the next try's reply finishes the run -
    the test's own deadline (90 s) is far inside the stall."""
    from agent.brains.client import stall_timeout
    from tests.fake_messages_api import Stall

    api = FakeMessagesAPI([FINAL], faults=[Stall(events=3, seconds=600)])
    config = plain_config(hosts=[HostConfig(name="local", workdir=str(tmp_path))])
    client = PatientAnthropic(
        api_key="test",
        base_url=api.url,
        max_retries=2,
        sleep=no_wait,
        seed=3,
        timeout=stall_timeout(0.5),
    )
    run = start("beat baseline", config, MODEL, tmp_path / "runs", None, Limits())
    agent = make_agent(run, AnthropicBrain(MODEL, client=client), config)
    agent.sleep = no_wait
    assert await drive(agent, api) == 0
    assert api.served == ["stall", "reply"]
    waits = [e for e in of_type(agent, "model_wait") if e.get("stage") == "retry"]
    assert waits and "the stream stalled after" in waits[0]["reason"]


def test_the_stall_deadline_is_a_bounded_setting() -> None:
    """[model] stall_timeout_s defaults to 90 s (the SDK's read timeout is 600 s) and takes the
    bounds of every duration: inf, 0 and a string are refused naming the key."""
    from pydantic import ValidationError

    from tools.domain.config import ModelConfig

    assert ModelConfig().stall_timeout_s == 90
    for bad in (float("inf"), 0, "90", True):
        with pytest.raises(ValidationError, match="stall_timeout_s"):
            ModelConfig(stall_timeout_s=bad)


# --- item 6: the report, watch, the fleet's summary and replay say what happened ----------------


async def test_the_report_says_how_long_the_run_waited_out_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three 529s (two SDK retries, then the loop's pause) and the reply: the report's Cost table
    and its caveats say the run waited the API out, for how long and over how many retries - the
    events stamped by a clock that moves 30 s an event, so the outage is 90 s by its events."""
    from datetime import UTC, datetime

    import state.events
    from tests.fake_messages_api import Status

    ticks = iter(range(10_000))

    def stamp() -> str:
        at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC).timestamp() + 30 * next(ticks)
        return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"

    monkeypatch.setattr(state.events, "utc_now", stamp)
    api = FakeMessagesAPI([FINAL], faults=[Status(code=529, times=3)])
    agent, _ = campaign(tmp_path, api)
    assert await drive(agent, api) == 0
    waits = of_type(agent, "model_wait")
    assert [e["stage"] for e in waits] == ["retry", "retry", "pause"]
    render_files(gather(agent.run.path, events_of(agent)), agent.run.path)
    report = (agent.run.path / "report.md").read_text()
    said = "1.5 minutes over 3 retries (HTTP 529 overloaded)"
    assert f"| waiting on the model API | {said}, within the wall-clock |" in report, report
    assert f"The model API was unavailable: the run waited out {said}." in report


def test_the_api_wait_fits_an_80_column_watch_essentials_first() -> None:
    """A 429 paused on, with the API's own long words: on an 80-column terminal the status line
    says when the next try is and why (status first), wrapped, not cut; the plain line too."""
    from datetime import UTC, datetime

    reason = (
        "the Anthropic API is unavailable: HTTP 429 rate limited: This request would exceed the "
        "rate limit for your organization of 40,000 input tokens per minute"
    )
    board = Board()
    events: list[dict[str, Any]] = [
        {"type": "run_started", "run_id": "r", "goal": "beat baseline", "brain": "anthropic"},
        {"type": "message", "role": "user", "content": [text("brief")]},
        {"type": "model_wait", "stage": "pause", "reason": reason, "pause_s": 60.0,
         "retry_at": "2026-12-03T10:01:00.000Z", "waited_s": 95.0},
    ]  # fmt: skip
    for seq, event in enumerate(events, 1):
        board.apply({"seq": seq, "ts": "2026-12-03T10:00:00.000Z", **event})
    console = Console(record=True, width=80, file=io.StringIO())
    console.print(render(board, now=datetime(2026, 12, 3, 10, 0, 20, tzinfo=UTC)))
    shown = console.export_text()
    assert all(len(line) <= 80 for line in shown.splitlines())
    flat = " ".join(line.strip(" │") for line in shown.splitlines())
    assert "API unavailable · next try 10:01:00 (in 0:40) · HTTP 429 rate limited" in flat, shown
    assert "input tokens per" in flat and "…" not in flat, shown  # wrapped, not cut
    line = event_line(board.log[-1])
    assert line is not None
    assert line.plain.startswith("[10:00:00] model API unavailable · next try 10:01:00 · HTTP 429")
