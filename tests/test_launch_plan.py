"""The purpose on the launch (issue 45): the autopilot records why it starts each server (a
`planned` event beside its message, by the start_server call's id: launch_plan.py), and
AskTell.resume reads the experiment in flight from it where it used to re-derive it; a log
without those events (recorded before them) still resumes, re-derived as before."""

from __future__ import annotations

from pathlib import Path

from agent.brains.autopilot import AutopilotBrain
from agent.brains.autopilot.ask_tell import AskTell
from agent.brains.autopilot.brain import Campaign
from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.history import History
from agent.brains.autopilot.launch_plan import plan_record, recorded_step
from agent.brains.autopilot.planner import Experiment, Planner, Settings
from agent.session import Limits, make_agent, start
from sim.space import DEFAULT_LEVELS, default_space
from state.events import read_events
from state.fold import fold
from tests.autopilot_world import lab, world
from tools.domain.space import Flags, SearchSpace

LEVELS = tuple(DEFAULT_LEVELS)
SPACE = SearchSpace.parse(default_space(), check=engine_check("sim"))
BASE = SPACE.baseline
FA3 = SPACE.complete({**BASE, "--attention-backend": "fa3"})


def up(config: Flags) -> AskTell:
    """A History whose last launch, `config`, is up and not measured yet."""
    h = History(SPACE)
    h.launched(config, serving=True)
    return AskTell(Planner(SPACE, Settings(levels=LEVELS)), h)


def test_resume_reads_the_recorded_experiment_not_the_planners_guess() -> None:
    recorded = Experiment(FA3, (1, 250), "screen", "recorded: fa3 screened", fresh=True)
    search = up(FA3)
    search.resume(plan_record(recorded, search.planner.settings))
    assert search.history.in_flight == [recorded]
    # the same log without the record (an older run): re-derived from the planner, which on an
    # empty History launches the baseline - not this server, so nothing is named in flight
    search = up(FA3)
    search.resume(None)
    assert search.history.in_flight == []


def test_a_record_planned_under_other_settings_is_not_read() -> None:
    """A wrap-up (or a directive) since the launch: the planner may not make it now, so the
    experiment is re-derived under the settings in force."""
    recorded = Experiment(BASE, LEVELS, "baseline", "recorded")
    search = up(BASE)
    wrapped = Settings(levels=LEVELS, wrap_up=True)
    plan = plan_record(recorded, wrapped)
    assert recorded_step(plan, wrapped) == recorded
    assert recorded_step(plan, search.planner.settings) is None
    search.resume(plan)
    [derived] = search.history.in_flight
    assert derived.why != "recorded" and derived.purpose == "baseline"
    assert recorded_step({"purpose": "nonsense"}, wrapped) is None
    assert recorded_step({**plan, "levels": None}, wrapped) is None


async def test_each_launch_records_its_purpose_and_resume_agrees_with_the_old_reading(
    tmp_path: Path,
) -> None:
    """A whole lab campaign: every start_server call of the run's server has its `planned`
    event; after each of them the experiment in flight read from the record is the one the
    planner re-derives from the same log without the records (the sessions recorded before
    them replay unchanged: tests/test_autopilot_replay.py)."""
    config = lab()
    run = start("beat baseline", config, "autopilot", tmp_path, None, Limits(max_steps=300))
    agent = make_agent(run, AutopilotBrain(config), config, tools=world(1))
    try:
        assert await agent.run_loop() == 0
    finally:
        if agent.ctx.hosts is not None:
            await agent.ctx.hosts.close()
    events = read_events(run.events_path).events
    starts = [
        e
        for e in events
        if e["type"] == "tool_call"
        and e["name"] == "start_server"
        and e["input"].get("name", "server") == "server"
    ]
    plans = {e["call"]: e for e in events if e["type"] == "planned"}
    assert starts and {s["id"] for s in starts} == set(plans)
    assert all(plans[s["id"]]["flags"] == s["input"]["flags"] for s in starts)
    assert {p["purpose"] for p in plans.values()} >= {"baseline", "screen"}
    read_from = 0
    for start_call in starts:
        done = next(
            i
            for i, e in enumerate(events)
            if e["type"] == "tool_result" and e["id"] == start_call["id"]
        )
        prefix = events[: done + 1]
        with_plans = Campaign(fold(prefix), config, run.path)
        without = Campaign(fold([e for e in prefix if e["type"] != "planned"]), config, run.path)
        found = with_plans.launch_plan()
        assert found is not None and found["purpose"] == plans[start_call["id"]]["purpose"]
        assert with_plans.h.in_flight == without.h.in_flight, start_call["id"]
        read_from += bool(with_plans.h.in_flight)
    assert read_from > len(starts) // 2  # most launches are told in flight from their record
