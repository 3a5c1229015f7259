"""The loop against a scripted brain and the real tools: order, errors, budgets, stuck, inbox."""

from __future__ import annotations

from typing import Any

from agent.brains.base import Turn
from agent.session import Limits
from state.events import read_events
from state.inbox import send
from tests.conftest import ScriptedBrain, agent_for, tool_turn

TODO = {"id": "a", "content": "measure the baseline", "status": "pending", "priority": "high"}


def events_of(run: Any, type_: str) -> list[dict[str, Any]]:
    return [e for e in read_events(run.events_path).events if e["type"] == type_]


async def test_runs_every_tool_use_in_order_and_finishes(make_run: Any) -> None:
    run, config = make_run()
    brain = ScriptedBrain(
        [
            tool_turn(("todowrite", {"todos": [TODO]}), ("todoread", {}), text="plan first"),
            Turn(content=[{"type": "text", "text": "all done"}], stop_reason="end_turn"),
        ]
    )
    code = await agent_for(run, config, brain).run_loop()
    assert code == 0
    calls = [e["name"] for e in events_of(run, "tool_result")]
    assert calls == ["todowrite", "todoread"]
    # the second request carries both results, in order, in one user message
    last = brain.requests[1].messages[-1]
    assert [b["tool_use_id"] for b in last["content"]] == [
        "toolu_0_0_todowrite",
        "toolu_0_1_todoread",
    ]
    assert "measure the baseline" in last["content"][1]["content"]
    finished = events_of(run, "run_finished")[-1]
    assert finished["status"] == "finished" and finished["reason"] == "all done"
    seqs = [e["seq"] for e in read_events(run.events_path).events]
    assert seqs == list(range(1, len(seqs) + 1))


async def test_bad_calls_become_errors_and_the_loop_goes_on(make_run: Any) -> None:
    run, config = make_run()
    two_active = [dict(TODO, status="in_progress"), dict(TODO, id="b", status="in_progress")]
    brain = ScriptedBrain(
        [
            tool_turn(
                ("nope", {}),
                ("todowrite", {"todos": "x", "extra": 1}),
                ("todowrite", {"todos": two_active}),
            ),
            Turn(content=[{"type": "text", "text": "ok"}], stop_reason="end_turn"),
        ]
    )
    assert await agent_for(run, config, brain).run_loop() == 0
    results = events_of(run, "tool_result")
    assert all(r["is_error"] for r in results)
    assert "unknown tool 'nope'; known tools: bash, compare," in results[0]["text"]
    assert 'todos: Input should be a valid list (got "x")' in results[1]["text"]
    assert "extra: Extra inputs are not permitted (got 1)" in results[1]["text"]
    assert "at most one item may be in_progress" in results[2]["text"]
    assert not (run.path / "todos.json").read_text().count("in_progress")


async def test_max_steps_ends_with_exit_3_after_a_warning(make_run: Any) -> None:
    run, config = make_run(limits=Limits(max_steps=5))
    brain = ScriptedBrain([tool_turn(("todoread", {}), step=i) for i in range(10)])
    assert await agent_for(run, config, brain).run_loop() == 3
    assert len(events_of(run, "budget_warning")) == 1
    assert "Wrap up now" in str(brain.requests[4].messages[-1])
    end = events_of(run, "run_finished")[-1]
    assert end["status"] == "budget_exhausted" and "5 of 5 steps" in end["reason"]


async def test_repeating_call_gets_one_nudge_then_exit_4(make_run: Any) -> None:
    run, config = make_run()
    brain = ScriptedBrain([tool_turn(("todoread", {}), step=i) for i in range(10)])
    assert await agent_for(run, config, brain).run_loop() == 4
    assert len(events_of(run, "stuck_nudge")) == 1
    assert len(events_of(run, "tool_result")) == 6  # 3 to notice, a nudge, 3 more to give up


async def test_the_nudge_follows_every_tool_result_of_its_turn(make_run: Any) -> None:
    run, config = make_run()
    same = ("todoread", {})
    brain = ScriptedBrain([tool_turn(same, same, same, same, step=0), tool_turn(same, step=1)])
    assert await agent_for(run, config, brain).run_loop() == 0
    blocks = brain.requests[1].messages[-1]["content"]
    kinds = [b["type"] for b in blocks]
    assert kinds == ["tool_result"] * 4 + ["text"] and "not progress" in blocks[-1]["text"]


async def test_cycle_between_two_calls_is_stuck(make_run: Any) -> None:
    run, config = make_run()
    write = ("todowrite", {"todos": [TODO]})
    brain = ScriptedBrain(
        [tool_turn(write if i % 2 else ("todoread", {}), step=i) for i in range(12)]
    )
    assert await agent_for(run, config, brain).run_loop() == 4


async def test_progressing_poll_is_not_stuck(make_run: Any) -> None:
    run, config = make_run()
    turns = [
        tool_turn(("todowrite", {"todos": [dict(TODO, content=f"poll {i}")]}), step=i)
        for i in range(8)
    ]
    brain = ScriptedBrain(turns)
    assert await agent_for(run, config, brain).run_loop() == 0


async def test_supervisor_inbox_say_budget_stop(make_run: Any) -> None:
    run, config = make_run(limits=Limits(max_steps=3))
    send(run.path, "say", text="focus on C=1")
    send(run.path, "budget", limits={"max_steps": 50})
    brain = ScriptedBrain([tool_turn(("todoread", {}), step=i) for i in range(2)])

    class StopAfterTwo(ScriptedBrain):
        async def next_turn(self, request: Any) -> Turn:
            if len(self.requests) == 1:
                send(run.path, "stop")
            return await super().next_turn(request)

    brain = StopAfterTwo(brain.turns)
    assert await agent_for(run, config, brain).run_loop() == 130
    assert "[supervisor] focus on C=1" in str(brain.requests[0].messages)
    assert run.state.limits["max_steps"] == 50
    assert [e["type"] for e in events_of(run, "stop_requested")] == ["stop_requested"]
    assert not list((run.path / "inbox").glob("*.json"))


async def test_pause_turn_resends_and_refusal_fails(make_run: Any) -> None:
    run, config = make_run()
    brain = ScriptedBrain(
        [
            Turn(content=[{"type": "text", "text": "thinking"}], stop_reason="pause_turn"),
            Turn(content=[], stop_reason="refusal"),
        ]
    )
    assert await agent_for(run, config, brain).run_loop() == 1
    assert brain.requests[1].messages[-1]["role"] == "assistant"
    assert "refused" in events_of(run, "run_finished")[-1]["reason"]


async def test_a_crashing_tool_is_an_error_result(make_run: Any) -> None:
    run, config = make_run()
    brain = ScriptedBrain([tool_turn(("todoread", {}))])
    agent = agent_for(run, config, brain)

    async def boom(ctx: Any, inp: Any) -> Any:
        raise RuntimeError("disk on fire")

    agent.tools.tools["todoread"].run = boom  # type: ignore[method-assign]
    assert await agent.run_loop() == 0
    text = events_of(run, "tool_result")[0]["text"]
    assert "RuntimeError: disk on fire" in text
