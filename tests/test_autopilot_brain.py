"""The autopilot brain through the real loop, against a fast stand-in of the lab: every call is
valid for the real tools, the todo list tells where it stands, and a run is a pure function of its
events (deterministic, resumable, steerable by the supervisor)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.brains.autopilot import AutopilotBrain
from agent.brains.autopilot.run_planner import launches_that_fit
from agent.brains.base import TurnRequest
from agent.session import Limits, make_agent, start
from sim.space import default_space
from state.fold import RunState, fold
from state.run import Run
from tests.autopilot_world import lab, world
from tools.compare import Compare
from tools.domain import lab_truth
from tools.domain.config import Config
from tools.kill_server import KillServer
from tools.recommend import Recommend
from tools.run_benchmark import RunBenchmark
from tools.start_server import StartServer
from tools.todo import TodoRead, TodoWrite

REAL = {
    t.name: t.Input
    for t in (TodoWrite, TodoRead, StartServer, KillServer, RunBenchmark, Compare, Recommend)
}
MAX_TOKENS = 128


async def drive(run: Run, config: Config, seed: int = 0, busy: tuple[int, ...] = ()) -> int:
    agent = make_agent(run, AutopilotBrain(config), config, tools=world(seed, busy=busy))
    try:
        return await agent.run_loop()
    finally:
        await agent.ctx.hosts.close()


def new_run(runs: Path, config: Config, max_steps: int = 300) -> Run:
    return start("beat baseline", config, "autopilot", runs, None, Limits(max_steps=max_steps))


def calls(run: Run) -> list[dict[str, Any]]:
    return [
        b
        for m in run.state.messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "tool_use"
    ]


async def test_a_whole_campaign_through_the_loop(tmp_path: Path) -> None:
    config = lab()
    run = new_run(tmp_path, config)
    assert await drive(run, config) == 0
    assert run.state.finished and run.state.finished["status"] == "finished"
    assert {t["status"] for t in run.state.todos} <= {"completed", "cancelled"}
    assert json.loads((run.path / "todos.json").read_text())["todos"] == run.state.todos
    rec = json.loads((run.path / "recommendation.json").read_text())
    _, best = lab_truth.optimum(default_space(), max_tokens=MAX_TOKENS)
    assert lab_truth.config_value(rec["config"], max_tokens=MAX_TOKENS) >= 0.98 * best
    assert rec["gain"] > 0 and rec["crossover"] and len(rec["policy"]) >= 2
    assert rec["policy"][0]["config"]["--speculative-algorithm"] == "EAGLE3"
    assert run.state.servers == {}, "the autopilot kills what it started"
    names = [c["name"] for c in calls(run)]
    assert names[:2] == ["todowrite", "kill_server"] and "compare" in names
    assert names.count("recommend") == 1
    final = run.state.messages[-1]["content"]
    assert final[0]["text"].startswith("Done. deploy")


async def test_every_call_is_valid_for_the_real_tools(tmp_path: Path) -> None:
    config = lab()
    run = new_run(tmp_path, config)
    await drive(run, config, seed=1)
    ids = [c["id"] for c in calls(run)]
    assert len(set(ids)) == len(ids) and all(i.startswith("toolu_ap_") for i in ids)
    for call in calls(run):
        REAL[call["name"]].model_validate(call["input"])  # raises on any mismatch
    in_progress = [
        sum(t["status"] == "in_progress" for t in c["input"]["todos"])
        for c in calls(run)
        if c["name"] == "todowrite"
    ]
    assert max(in_progress) == 1 and in_progress[-1] == 0
    errors = [e for e in run.log.path.read_text().splitlines() if '"is_error":true' in e]
    assert all("failed to start" in e for e in errors), "only crashes the lab really has"


async def test_the_same_events_give_the_same_campaign(tmp_path: Path) -> None:
    config = lab()
    first, second = new_run(tmp_path / "a", config), new_run(tmp_path / "b", config)
    await drive(first, config, seed=2)
    await drive(second, config, seed=2)
    assert [m for m in first.state.messages if m["role"] == "assistant"] == [
        m for m in second.state.messages if m["role"] == "assistant"
    ]


async def test_resume_after_a_crash_continues_the_same_campaign(tmp_path: Path) -> None:
    config = lab()
    whole = new_run(tmp_path / "whole", config)
    await drive(whole, config, seed=3)
    cut = new_run(tmp_path / "cut", config)
    agent = make_agent(cut, AutopilotBrain(config), config, tools=world(3))
    for _ in range(11):  # then the process dies: nothing but the event log survives
        await agent.step()
    await agent.ctx.hosts.close()
    path = cut.path
    cut.close()
    resumed = Run.open(path)
    resumed.append("run_resumed", repaired=None)
    assert await drive(resumed, config, seed=3) == 0
    assert [(c["name"], c["input"]) for c in calls(resumed)] == [
        (c["name"], c["input"]) for c in calls(whole)
    ]


async def test_the_budget_warning_wraps_up(tmp_path: Path) -> None:
    config = lab()
    run = new_run(tmp_path, config, max_steps=14)
    assert await drive(run, config, seed=3) in (0, 3)
    labels = [c["input"].get("label", "") for c in calls(run) if c["name"] == "run_benchmark"]
    assert labels[-1].startswith("validate"), "after the warning: re-validate, then conclude"


# 27 of 30 minutes after 3 launches: none fits; 3: many do; 20: exactly one (20 / 3 a launch)
@pytest.mark.parametrize("used, launches_after", [(27.0, 0), (3.0, 1), (20.0, 1)])
async def test_a_wrap_up_on_minutes_starts_no_launch_it_cannot_end(
    tmp_path: Path, used: float, launches_after: int
) -> None:
    """The minutes budget's warning with 3 of 30 minutes left after a few launches (minutes per
    launch far above 3): no launch, the conclusion at once, exit 0; with 27 left the winner is
    re-validated on a fresh launch as before - and with room for exactly one, that launch is
    measured too (each turn's planner, which re-derives what the server up was launched for,
    must not count that launch against itself and conclude instead)."""
    config = lab()
    run = new_run(tmp_path, config)
    agent = make_agent(run, AutopilotBrain(config), config, tools=world(3))
    try:
        while run.state.launches_started < 3:
            await agent.step()
        before = len(calls(run))
        run.append("budget_warning", limit="max_minutes", used=used, of=30.0)
        assert await agent.run_loop() == 0
    finally:
        await agent.ctx.hosts.close()
    later = [c["name"] for c in calls(run)[before:]]
    assert later.count("start_server") == launches_after, later
    if launches_after:  # the fresh launch measured: a benchmark after it, before the conclusion
        after_launch = later[later.index("start_server") :]
        assert "run_benchmark" in after_launch[: after_launch.index("recommend")], later
    assert "recommend" in later and run.state.finished is not None
    assert run.state.finished["status"] == "finished"


def exploring_then_warned(durations: bool) -> RunState:
    """Four launches, each a 20 s start and three sweeps of C=1,2 at 10 s a level (80 s measured
    a launch), then the minutes budget's warning at 320 s (5.33 of 10 minutes)."""
    events: list[dict[str, Any]] = []
    for launch in range(4):
        events.append({"type": "server_started", "name": "server"})
        events.append({"type": "server_ready", "name": "server", "seconds": 20.0})
        for sweep in range(3):
            points = {c: {"output_throughput": 100.0} for c in ("1", "2")}
            if durations:
                points = {c: {**p, "duration": 10.0} for c, p in points.items()}
            summary = {c: 100.0 for c in points}
            events.append(
                {
                    "type": "benchmark",
                    "id": f"b{launch}{sweep}",
                    "summary": summary,
                    "points": points,
                }
            )
    events.append({"type": "budget_warning", "limit": "max_minutes", "used": 320 / 60, "of": 10.0})
    return fold([{"seq": i, "ts": "2026-12-06T21:00:00Z", **e} for i, e in enumerate(events)])


def test_the_wrap_up_sizes_its_launches_by_a_start_and_one_sweep() -> None:
    """280 s left: at the run's pace (80 s a launch, exploring's repeated sweeps included) 3
    launches fit, while a wrap-up launch (a start and one sweep: 40 s measured) fits 7 times -
    the real-vLLM campaign that concluded on one launch pair with five minutes unused. Events
    recorded before they carried the durations keep the pace."""
    levels = (1, 2)
    assert launches_that_fit(exploring_then_warned(durations=True), levels) == 7
    assert launches_that_fit(exploring_then_warned(durations=False), levels) == 3
    started = exploring_then_warned(durations=True)
    started.apply({"seq": 99, "ts": "2026-12-06T21:06:00Z", "type": "server_started", "name": "s"})
    assert launches_that_fit(started, levels) == 6, "a launch since the warning is counted"
    # a duet since the warning: 3 rounds of a block per level on each side (10 s a block, 120 s
    # in all) leave 160 s, 4 wrap-up launches; the launch started since is counted too
    for k in range(6):
        points = {c: {"output_throughput": 100.0, "duration": 10.0} for c in ("1", "2")}
        duet = {"id": "d01", "round": k // 2 + 1, "side": "ab"[k % 2]}
        event = {"type": "benchmark", "id": f"d{k}", "summary": {}, "points": points, "duet": duet}
        started.apply({"seq": 100 + k, "ts": "2026-12-06T21:07:00Z", **event})
    assert launches_that_fit(started, levels) == 3


async def test_supervisor_directives_are_acknowledged_and_honoured(tmp_path: Path) -> None:
    config = lab()
    run = new_run(tmp_path, config)
    agent = make_agent(run, AutopilotBrain(config), config, tools=world(4))
    for _ in range(6):
        await agent.step()
    run.append("supervisor_message", text="Please skip speculation, it is not deployable here")
    seq = run.state.supervisor[-1]["seq"]
    before = len(calls(run))
    await agent.step()
    reply = run.state.messages[-2]["content"][0]["text"]  # the assistant turn after the message
    assert reply.startswith(f"Supervisor #{seq}: speculation is dropped")
    run.append("supervisor_message", text="what is the weather like?")
    await agent.step()
    assert "noted; the autopilot acts on" in run.state.messages[-2]["content"][0]["text"]
    run.append("supervisor_message", text="wrap up now")
    assert await agent.run_loop() == 0
    await agent.ctx.hosts.close()
    later = calls(run)[before:]
    starts = [c["input"]["flags"] for c in later if c["name"] == "start_server"]
    assert starts and all(not f["--speculative-algorithm"] for f in starts)
    assert [c["input"]["label"].split("-")[0] for c in later if c["name"] == "run_benchmark"][
        -1
    ] == "validate"
    texts = [
        b["text"]
        for m in run.state.messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "text"
    ]
    assert sum(t.startswith("Supervisor #") for t in texts) == 3, "each acknowledged once"


async def test_compaction_summary_is_built_from_the_state(tmp_path: Path) -> None:
    config = lab()
    run = new_run(tmp_path, config)
    agent = make_agent(run, AutopilotBrain(config), config, tools=world(5))
    for _ in range(5):
        await agent.step()
    await agent.ctx.hosts.close()
    request = TurnRequest(
        system="",
        tools=[],
        messages=run.state.messages,
        max_tokens=100,
        state=run.state,
        config=config,
        purpose="summary",
    )
    turn = await AutopilotBrain(config).next_turn(request)
    assert turn.stop_reason == "end_turn" and not turn.tool_uses
    assert "Best so far" in turn.text and "[x] baseline" in turn.text


async def test_a_broken_search_space_ends_with_one_clear_line(tmp_path: Path) -> None:
    config = lab().model_copy(update={"search": {"--x": []}})
    run = new_run(tmp_path, config)
    assert await drive(run, config) == 0
    assert "search space is not usable: search.--x: expected a non-empty list" in (
        run.state.finished or {}
    ).get("reason", "")


async def test_a_port_taken_by_a_stranger_moves_the_server_not_the_verdict(tmp_path: Path) -> None:
    config = lab()
    run = new_run(tmp_path, config)
    assert await drive(run, config, seed=6, busy=(30999, 31000)) == 0
    starts = [c["input"] for c in calls(run) if c["name"] == "start_server"]
    assert "port" not in starts[0] and starts[1]["port"] == 31000
    assert all(s["port"] == 31001 for s in starts[2:])
    assert starts[2]["flags"] == starts[0]["flags"], "the baseline was not marked as crashed"
    assert json.loads((run.path / "recommendation.json").read_text())["gain"] > 0


async def test_what_the_autopilot_learned_does_not_depend_on_the_text_the_model_reads(
    tmp_path: Path,
) -> None:
    """Issue 45: launches, crashes, a port taken by a stranger and which benchmark each call made
    are read from the tool_result events' typed `data`, never from their text: with every
    result's text pruned (as compaction does) the History is the same."""
    from agent.brains.autopilot.engine_limits import space_of
    from agent.brains.autopilot.observe import observe, run_config, slo_of
    from state.fold import STUB

    config = lab()
    run = new_run(tmp_path, config)
    assert await drive(run, config, seed=6, busy=(30999, 31000)) == 0
    state = run.state
    cfg = run_config(state)

    def learned(s: RunState) -> tuple[Any, ...]:
        h = observe(s, space_of(cfg), cfg.server.name, run.path, slo_of(cfg))
        launches = [(dict(x.config), x.ok, x.reason) for x in h.launches]
        return launches, [(m.launch, m.label, m.per_level, m.ids) for m in h.measurements]

    whole = learned(state)
    for message in state.messages:
        for block in message["content"]:
            if block.get("type") == "tool_result":
                block["content"] = STUB.format(path="x")
    assert learned(state) == whole
    assert all(ok for _, ok, _ in whole[0])  # the two busy ports were no failed launches


async def test_a_failing_benchmark_is_retried_then_the_server_relaunched(tmp_path: Path) -> None:
    config = lab()
    run = new_run(tmp_path, config)
    agent = make_agent(run, AutopilotBrain(config), config, tools=world(7, fail_first=2))
    assert await agent.run_loop() == 0
    await agent.ctx.hosts.close()
    texts = [
        b["text"]
        for m in run.state.messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "text"
    ]
    assert any(t.startswith("The benchmark failed: every request") for t in texts)
    starts = [c["input"]["flags"] for c in calls(run) if c["name"] == "start_server"]
    assert starts[0] == starts[1], "the baseline's server was relaunched, not given up"
    assert (run.path / "recommendation.json").is_file()


async def cut_before(run: Run, config: Config, seed: int, tool: str, nth: int = 1) -> None:
    """Play the campaign until the nth turn that calls `tool` is decided; the agent dies before
    running it, and resume's recovery answers its calls as interrupted."""
    from agent.recover import close_dangling_calls

    agent = make_agent(run, AutopilotBrain(config), config, tools=world(seed))
    seen = 0
    while True:
        turn = await agent.query()
        if any(b["name"] == tool for b in turn.tool_uses):
            seen += 1
            if seen == nth:
                run.append(
                    "message",
                    role="assistant",
                    content=turn.content,
                    stop_reason=turn.stop_reason,
                    usage={},
                    cost_usd=0.0,
                    model="x",
                )
                break
        await agent.execute(turn)
    await agent.ctx.hosts.close()
    assert close_dangling_calls(run)


async def test_calls_a_crash_cut_short_are_made_again(tmp_path: Path) -> None:
    config = lab()
    whole = new_run(tmp_path / "whole", config)
    await drive(whole, config, seed=8)
    expected = json.loads((whole.path / "recommendation.json").read_text())["config"]
    for tool, nth in (("start_server", 3), ("run_benchmark", 2), ("recommend", 1)):
        run = new_run(tmp_path / tool, config)
        await cut_before(run, config, 8, tool, nth)
        run.append("run_resumed", repaired=None)
        assert await drive(run, config, seed=8) == 0, tool
        rec = json.loads((run.path / "recommendation.json").read_text())
        assert rec["config"] == expected, tool
        assert {t["status"] for t in run.state.todos} <= {"completed", "cancelled"}
