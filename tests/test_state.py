"""The event log, the run folder and the todo store: durable, gapless, crash-tolerant."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from state.events import EventLog, read_events
from state.fold import fold
from state.run import Run, RunError, resolve_run
from state.todos import Todo, TodoRuleError, check_rules, diff


def test_events_are_gapless_and_one_per_line(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    for i in range(5):
        log.append("note", i=i)
    log.close()
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["seq"] for e in events] == [1, 2, 3, 4, 5]
    assert all(e["ts"].endswith("Z") and e["type"] == "note" for e in events)


def test_a_torn_last_line_is_dropped_reported_and_cut(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(path)
    log.append("note", i=1)
    log.append("note", i=2)
    log.close()
    with path.open("ab") as f:
        f.write(b'{"seq":3,"ts":"x","type":"no')  # a write cut short by SIGKILL
    contents = read_events(path)
    assert [e["seq"] for e in contents.events] == [1, 2]
    assert contents.torn_report and "torn last line of 28 bytes" in contents.torn_report
    log = EventLog(path)
    assert log.repaired
    log.append("note", i=3)
    log.close()
    assert [e["seq"] for e in read_events(path).events] == [1, 2, 3]
    assert read_events(path).torn == b""


def test_corruption_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"seq":1,"ts":"t","type":"a"}\nnot json\n{"seq":3,"ts":"t","type":"a"}\n')
    with pytest.raises(ValueError, match="corrupt event"):
        read_events(path)


def test_run_folder_layout_and_permissions(tmp_path: Path) -> None:
    run = Run.create(tmp_path / "runs", "r1")
    mode = stat.S_IMODE(os.stat(run.path).st_mode)
    assert mode == 0o700
    assert {p.name for p in run.path.iterdir()} >= {"events.jsonl", "results", "outputs", "logs"}
    assert stat.S_IMODE(os.stat(run.events_path).st_mode) == 0o600
    with pytest.raises(RunError, match="already exists"):
        Run.create(tmp_path / "runs", "r1")
    with pytest.raises(RunError, match="bad run id"):
        Run.create(tmp_path / "runs", "../escape")
    run.close()


def test_resolve_run_by_id_or_path(tmp_path: Path) -> None:
    run = Run.create(tmp_path / "runs", "r1")
    run.append("run_started", goal="g")
    assert resolve_run("r1", tmp_path / "runs") == run.path
    assert resolve_run(str(run.path), tmp_path / "elsewhere") == run.path
    with pytest.raises(RunError, match="no run 'nope'"):
        resolve_run("nope", tmp_path / "runs")
    with pytest.raises(RunError, match="not a run folder"):
        resolve_run(str(tmp_path), tmp_path / "runs")
    run.close()


def todo(i: str, status: str = "pending", content: str = "do it") -> Todo:
    return Todo(id=i, content=content, status=status)  # type: ignore[arg-type]


def test_todo_rules() -> None:
    check_rules([todo("a", "in_progress"), todo("b")])
    with pytest.raises(TodoRuleError, match="at most one item may be in_progress"):
        check_rules([todo("a", "in_progress"), todo("b", "in_progress")])
    with pytest.raises(TodoRuleError, match="repeated: a"):
        check_rules([todo("a"), todo("a")])
    with pytest.raises(ValueError, match="blank"):
        todo("a", content="   ")


def test_todo_writes_are_atomic_and_logged_with_changes(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "r")
    run.append("run_started", goal="g")
    run.write_todos([todo("a"), todo("b")])
    changes = run.write_todos([todo("a", "in_progress"), todo("c")])
    assert changes == {
        "added": ["c"],
        "removed": ["b"],
        "status": {"a": ["pending", "in_progress"]},
        "edited": [],
    }
    on_disk = json.loads((run.path / "todos.json").read_text())
    assert [t["id"] for t in on_disk["todos"]] == ["a", "c"]
    assert not list(run.path.glob(".todos.json.*"))  # no temp file left behind
    events = read_events(run.events_path).events
    assert fold(events).todos == on_disk["todos"]
    run.close()


def test_diff_reports_edits() -> None:
    old = [todo("a").model_dump()]
    new = [todo("a", content="other").model_dump()]
    assert diff(old, new)["edited"] == ["a"]


def test_fold_spend_and_servers() -> None:
    events = [
        {"seq": 1, "ts": "t", "type": "run_started", "goal": "g"},
        {
            "seq": 2,
            "ts": "t",
            "type": "message",
            "role": "assistant",
            "content": [],
            "usage": {"input_tokens": 10, "output_tokens": 5},
            "cost_usd": 0.5,
        },
        {"seq": 3, "ts": "t", "type": "server_started", "name": "s", "pid": 1, "port": 2},
        {"seq": 4, "ts": "t", "type": "server_ready", "name": "s"},
        {
            "seq": 5,
            "ts": "t",
            "type": "message",
            "role": "assistant",
            "content": [],
            "usage": {"input_tokens": 1, "output_tokens": 1},
            "cost_usd": 0.25,
        },
    ]
    state = fold(events)
    assert (state.spend.input_tokens, state.spend.output_tokens, state.spend.usd) == (11, 6, 0.75)
    assert state.servers["s"]["ready"] is True and state.steps == 2
    state.apply({"seq": 6, "ts": "t", "type": "server_killed", "name": "s"})
    assert state.servers == {}


def test_fold_remembers_ended_servers_failures_and_jobs() -> None:
    def ev(seq: int, type_: str, **data: object) -> dict[str, object]:
        return {"seq": seq, "ts": "t", "type": type_, **data}

    state = fold(
        [
            ev(1, "server_started", name="s", pid=1, log="/l1"),
            ev(2, "server_failed", name="s", diagnosis="CUDA out of memory"),
            ev(3, "server_started", name="s", pid=2, log="/l2"),
            ev(4, "server_killed", name="s"),
            ev(5, "job_started", name="gen", pid=3),
            ev(6, "job_ended", name="gen", exit_code=0),
        ]
    )
    assert state.servers == {} and state.launched["s"]["log"] == "/l2"
    assert [f.diagnosis for f in state.launches.record().failed] == ["CUDA out of memory"]
    assert state.jobs == {} and state.job_runs["gen"]["ended"]["exit_code"] == 0
