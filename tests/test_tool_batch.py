"""Tool calls of one turn: independent ones overlap, same-server ones stay serial, results and the
event log stay in call order, and a replay writes the same log."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent.session_replay import Recording, ReplayTools, compare
from agent.tool_batch import footprint
from state.events import read_events
from tests.conftest import ScriptedBrain, agent_for, plain_config, tool_turn
from tools.base import Tool, ToolBox, ToolContext, ToolInput, ToolResult


class ServerInput(ToolInput):
    name: str
    port: int | None = None


class FakeStart(Tool):
    """start_server's name and footprint; 'slow' waits until 'fast' has run (a deadlock if the
    two ran one after another), and every call logs an event of its own while it runs."""

    name = "start_server"
    Input = ServerInput

    def __init__(self) -> None:
        self.fast_done = asyncio.Event()
        self.active: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.order: list[str] = []

    async def run(self, ctx: ToolContext, inp: ServerInput) -> ToolResult:
        name = inp.name
        self.active[name] = self.active.get(name, 0) + 1
        self.most[name] = max(self.most.get(name, 0), self.active[name])
        self.order.append(f"start {name}")
        if name == "slow":
            await self.fast_done.wait()
        for _ in range(3):  # give any other call of the turn its chance to run meanwhile
            await asyncio.sleep(0)
        ctx.run.append("fake_step", name=name)
        if name == "fast":
            self.fast_done.set()
        self.active[name] -= 1
        self.order.append(f"end {name}")
        return ToolResult(text=f"started {name}")


def turns() -> list[Any]:
    return [
        tool_turn(
            ("start_server", {"name": "slow", "port": 1}),
            ("start_server", {"name": "fast", "port": 2}),
            step=0,
        ),
        tool_turn(("start_server", {"name": "x"}), ("start_server", {"name": "x"}), step=1),
    ]


def in_turn(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    keep = ("tool_call", "fake_step", "tool_result")
    return [(e["type"], e.get("name", "")) for e in events if e["type"] in keep]


async def test_independent_calls_overlap_and_the_log_keeps_call_order(make_run: Any) -> None:
    run, config = make_run()
    tool = FakeStart()
    brain = ScriptedBrain(turns())
    agent = agent_for(run, config, brain)
    agent.tools = ToolBox([tool])
    assert await asyncio.wait_for(agent.run_loop(), 30) == 0  # serial calls would never end
    assert tool.order[:4] == ["start slow", "start fast", "end fast", "end slow"]
    assert tool.most["x"] == 1  # the same server: one call at a time
    assert tool.order[4:] == ["start x", "end x", "start x", "end x"]
    events = read_events(run.events_path).events
    assert in_turn(events)[:6] == [
        ("tool_call", "start_server"),
        ("fake_step", "slow"),
        ("tool_result", "start_server"),
        ("tool_call", "start_server"),
        ("fake_step", "fast"),
        ("tool_result", "start_server"),
    ]
    results = brain.requests[1].messages[-1]["content"]
    assert [b["content"] for b in results] == ["started slow", "started fast"]
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1))


async def test_a_replay_of_a_concurrent_turn_writes_the_same_log(
    make_run: Any, tmp_path: Path
) -> None:
    run, config = make_run()
    agent = agent_for(run, config, ScriptedBrain(turns()))
    agent.tools = ToolBox([FakeStart()])
    assert await asyncio.wait_for(agent.run_loop(), 30) == 0
    recording = Recording.load(run.events_path)

    again, _ = make_run()
    replayed = agent_for(again, config, ScriptedBrain(turns()))
    replayed.tools = ReplayTools(ToolBox([FakeStart()]), recording)
    assert await asyncio.wait_for(replayed.run_loop(), 30) == 0
    assert compare(recording.events, again, truncated=False) is None


def test_footprints_decide_what_may_overlap() -> None:
    config = plain_config()

    def fp(tool: str, **inp: Any) -> Any:
        return footprint(tool, inp, config)

    assert not fp("todoread").conflicts(fp("read_log", server="a"))
    assert not fp("read_log", server="a").conflicts(fp("get_file", remote_path="x"))
    assert fp("todowrite").conflicts(fp("todoread"))
    assert not fp("start_server", name="a").conflicts(fp("start_server", name="b", port=2))
    assert fp("start_server", name="a").conflicts(fp("start_server", name="b"))  # one port
    assert fp("start_server", name="a").conflicts(fp("run_benchmark", server="a"))
    assert not fp("run_benchmark", server="a").conflicts(fp("run_benchmark", server="b"))
    assert fp("run_benchmark", server="a").conflicts(fp("compare", results=["x"]))
    assert not fp("bash", host="h1", command="x").conflicts(fp("bash", host="h2", command="y"))
    assert fp("bash", command="x").conflicts(fp("put_file", local_path="a", remote_path="b"))
    assert fp("kill_server").conflicts(fp("todoread"))  # every server: alone
    assert fp("no_such_tool").conflicts(fp("todoread"))
