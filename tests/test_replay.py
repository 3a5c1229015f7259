"""Recorded sessions replay through the real SDK; any drift is caught with a readable diff."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.brains.replay import Faults
from agent.session_replay import replay
from state.events import read_events

SESSIONS = sorted((Path(__file__).parent / "sessions").glob("*.jsonl"))


def test_sessions_cover_what_the_contract_asks() -> None:
    assert len(SESSIONS) >= 2
    for path in SESSIONS:
        events = read_events(path).events
        turns = [e for e in events if e["type"] == "message" and e["role"] == "assistant"]
        assert len(turns) >= 8, path
        assert any(sum(b["type"] == "tool_use" for b in t["content"]) > 1 for t in turns), path
        assert any(e["type"] == "tool_result" and e["is_error"] for e in events), path
        if path.name != "pipeline.jsonl":  # the long-job session is short: it never compacts
            assert any(e["type"] == "compaction" and e["stage"] == "summary" for e in events), path
        exchanges = [e for e in events if e["type"] == "api_exchange"]
        assert exchanges and all(e.get("stream") or "endpoint" in e for e in exchanges), path
        assert any(e.get("thinking") for e in turns), path
        assert any(b["type"] == "thinking" and b["signature"] for t in turns for b in t["content"])
        sent_back = [m for e in exchanges for m in e.get("request", {}).get("messages", [])]
        assert any(b["type"] == "thinking" for m in sent_back for b in m["content"]), path
    counted = [e for p in SESSIONS for e in read_events(p).events if e.get("endpoint")]
    assert counted and all(e["endpoint"] == "count_tokens" for e in counted)
    walked = {
        (old, new)
        for e in read_events(SESSIONS[-1]).events
        if e["type"] == "todo"
        for old, new in e["changes"]["status"].values()
    }
    assert {("pending", "in_progress"), ("in_progress", "completed")} <= walked


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.stem)
async def test_replay_check_passes(path: Path, tmp_path: Path) -> None:
    code, run, drift = await replay(path, tmp_path)
    assert (code, drift) == (0, None)
    assert json.loads((run.path / "todos.json").read_text())["todos"] == run.state.todos


def edit(path: Path, tmp_path: Path, type_: str, nth: int, change: str, to: str) -> Path:
    lines = path.read_text().splitlines()
    hits = [i for i, line in enumerate(lines) if json.loads(line)["type"] == type_]
    i = hits[nth]
    assert change in lines[i]
    lines[i] = lines[i].replace(change, to, 1)
    out = tmp_path / f"edited-{path.name}"
    out.write_text("\n".join(lines) + "\n")
    return out


async def test_changed_tool_result_is_drift_with_a_diff(tmp_path: Path) -> None:
    source = edit(SESSIONS[-1], tmp_path, "tool_result", 1, "Kill leftover", "Kill stray")
    code, _, drift = await replay(source, tmp_path / "runs")
    assert code == 1 and drift is not None
    assert "differs from the recording" in drift
    assert "-" in drift and "Kill stray" in drift


async def test_changed_model_response_is_drift(tmp_path: Path) -> None:
    source = edit(SESSIONS[-1], tmp_path, "api_exchange", 2, "Marking it done.", "Marking.")
    code, _, drift = await replay(source, tmp_path / "runs")
    assert code == 1 and drift is not None and "Marking." in drift


async def test_max_steps_below_the_length_ends_with_exit_3(tmp_path: Path) -> None:
    code, run, drift = await replay(SESSIONS[0], tmp_path, max_steps=4)
    assert code == 3 and drift is None
    end = read_events(run.events_path).events[-1]
    assert end["type"] == "run_finished" and "4 of 4 steps" in end["reason"]


async def test_api_faults_are_retried_and_the_result_is_the_same(tmp_path: Path) -> None:
    faults = Faults(rate=0.2, seed=3)
    code, _run, drift = await replay(SESSIONS[0], tmp_path, faults=faults)
    assert (code, drift) == (0, None)
    assert sum(faults.injected.values()) >= 1


@pytest.mark.parametrize(
    ("status", "words"), [("401", "authentication failed"), ("400", "bad request")]
)
async def test_fatal_api_errors_end_with_exit_1_naming_the_cause(
    tmp_path: Path, status: str, words: str
) -> None:
    code, run, _ = await replay(SESSIONS[0], tmp_path, faults=Faults(fatal=status))
    assert code == 1
    end = read_events(run.events_path).events[-1]
    assert end["type"] == "run_finished" and words in end["reason"]
    assert (run.path / "todos.json").exists()
