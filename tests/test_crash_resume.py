"""Crash safety, end to end: `agent run` of a lab campaign (simulator, autopilot) is SIGKILLed at
chosen points - mid-benchmark, mid-start, right after a benchmark was reported, at a moment, with
torn log lines - and `agent resume`d until it finishes. The harness is benchmarks/kill_resume.py
(its random 20-kill version prints the figures of docs/reliability.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.kill_resume import KillPoint, Trial
from state.events import read_events

PLAN: list[KillPoint] = [
    ("run_benchmark", 0.3, False),  # in the middle of a benchmark
    ("server_started", 0.2, True),  # while a server loads; the log torn as by a kill mid-write
    ("benchmark", 0.0, True),  # just after a result was reported: it must survive
    ("time", 1.0, False),  # somewhere in the resumed session
]


@pytest.mark.timeout(300)
def test_killed_four_times_the_campaign_completes_and_keeps_its_results(tmp_path: Path) -> None:
    trial = Trial(tmp_path, seed=7, kills=len(PLAN), space="small", plan=PLAN)
    try:
        r = trial.run(timeout=240)
    finally:
        trial.cleanup()  # only matters when something failed: nothing of ours outlives the test
    assert r.kills == len(PLAN) and r.torn == 2, r.triggers
    assert r.exit_code == 0, (tmp_path / f"session-{r.sessions}.log").read_text()[-2000:]
    assert r.lost == [] and len(r.reported) >= 3  # every reported result: event + valid file
    assert r.todos_bad == [] and r.todos_reads > 100  # todos.json parsed at every read
    assert r.unreadable_log == []  # the log read after every kill; seq without gaps
    assert r.servers_at_kills >= 2 and r.unrecovered == []
    assert r.adopted + r.killed_on_resume >= 2
    assert r.leftovers == []  # no simulator process of the campaign left

    events = read_events(trial.path / "events.jsonl")
    assert not events.torn and events.events[-1]["type"] == "run_finished"
    # a resume killed while it starts up writes nothing; the others say they resumed, and what
    # torn line they dropped (the log is cut clean on open, whether or not the report follows)
    resumed = [e for e in events.events if e["type"] == "run_resumed"]
    assert 1 <= len(resumed) <= len(PLAN)
    assert 1 <= sum(1 for e in resumed if e.get("repaired")) <= 2
    interrupted = [e for e in events.events if (e.get("data") or {}).get("interrupted")]
    assert interrupted, "a kill mid-call leaves a call that resume answers as interrupted"
    # every tool call has exactly one result: the conversation is whole again
    calls = [e["id"] for e in events.events if e["type"] == "tool_call"]
    results = [e["id"] for e in events.events if e["type"] == "tool_result"]
    assert set(calls) <= set(results) and len(results) == len(set(results))

    # the crashes cost no decision: both configurations were measured, the faster one won
    measured = {
        e["flags"].get("--attention-backend") for e in events.events if e["type"] == "benchmark"
    }
    assert measured == {"flashinfer", "triton"}
    recommendation = json.loads((trial.path / "recommendation.json").read_text())
    assert recommendation["config"] == {"--attention-backend": "flashinfer"}
    todos = json.loads((trial.path / "todos.json").read_text())["todos"]
    assert todos and all(t["status"] in ("completed", "cancelled") for t in todos)
