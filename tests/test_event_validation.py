"""Every event is validated when folded (issue 49, item 12): a hand-edited log whose event of a
known type carries a field the fold acts on in a form no writer writes is refused in one line
naming the seq and the field; an event of a type no writer writes is skipped, said in one line by
`agent todos`, `agent report` and `agent resume`. Every type a writer writes is known."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from state.event_types import KNOWN
from state.events import MAX_EVENT_BYTES, read_events
from state.fold import fold
from state.run import Run

ROOT = Path(__file__).resolve().parent.parent
LIMITS = {"max_steps": 300, "max_usd": 25.0, "max_minutes": 1440.0}


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(args)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, capsys.readouterr().err


def one_line(err: str) -> bool:
    return len(err.strip().splitlines()) == 1 and "Traceback" not in err


def a_run(tmp_path: Path, *edited: dict[str, Any], finished: bool = False) -> Run:
    """A run's log with the `edited` events written by hand after its start (seq 2, 3, ...)."""
    run = Run.create(tmp_path / "runs", "r")
    run.append("run_started", goal="beat baseline", brain="autopilot", limits=LIMITS)
    todo = {"id": "t1", "content": "measure it", "status": "in_progress", "priority": "high"}
    run.append("todo", todos=[todo], changes={})
    run.close()
    lines = [{"seq": 3 + i, "ts": "2026-01-01T00:00:00.000Z", **e} for i, e in enumerate(edited)]
    if finished:
        done = {"type": "run_finished", "status": "finished", "exit_code": 0, "reason": "done"}
        lines.append({"seq": 3 + len(edited), "ts": "2026-01-01T00:00:01.000Z", **done})
    with run.events_path.open("a") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    return run


# --- an unknown type: skipped, said in one line ---------------------------------------------------
UNKNOWN = {"type": "limits_raised", "limits": {"max_minutes": "inf"}}


def test_todos_skips_an_unknown_type_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = a_run(tmp_path, UNKNOWN)
    code = main(["todos", str(run.path)])
    out, err = capsys.readouterr()
    assert code == 0 and "measure it" in out
    assert one_line(err) and "skipped 1 event of a type this agent does not know" in err, err
    assert "(limits_raised; seq 3)" in err, err


def test_report_skips_an_unknown_type_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = a_run(tmp_path, UNKNOWN, finished=True)
    code, err = cli(["report", str(run.path)], capsys)
    assert code == 0 and (run.path / "report.md").is_file()
    assert one_line(err) and "(limits_raised; seq 3)" in err, err


def test_resume_says_what_it_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = a_run(tmp_path, UNKNOWN, {"type": 7}, finished=True)
    code, err = cli(["resume", str(run.path)], capsys)
    assert code == 0 and "already finished" in err, err  # it read the whole log and went on
    assert "skipped 2 events of a type this agent does not know (7, limits_raised; seq 3, 4)" in err
    assert "Traceback" not in err


def test_an_unknown_type_changes_nothing_of_the_run(tmp_path: Path) -> None:
    run = a_run(tmp_path, UNKNOWN)
    state = fold(read_events(run.events_path).events)
    assert state.limits == LIMITS and state.skipped == [(3, "limits_raised")]


# --- a known type with a malformed field: refused, never folded ----------------------------------
MALFORMED = [
    ({"type": "limits_changed", "limits": {"max_minutes": "inf", "max_steps": -3}}, "limits."),
    ({"type": "todo", "todos": ["do it"]}, "todos: [0] must be an item with id"),
    ({"type": "server_started", "name": "x", "pgid": -1}, "pgid: must be a whole number"),
    ({"type": "server_started", "name": ["x"]}, "name: must be a string"),
    ({"type": "message", "role": "system", "content": []}, "role: must be user or assistant"),
    ({"type": "message", "role": "user", "content": "hi"}, "content: must be a list"),
    ({"type": "tool_result", "id": "t", "text": None}, "text: must be a string"),
    ({"type": "supervisor_message"}, "text: missing"),
    ({"type": "run_finished", "session_minutes": -5}, "session_minutes: must be a finite"),
    ({"type": "trial_ended", "trial": "t1", "seconds": 1e300}, "seconds: must be a finite"),
    ({"type": "benchmark", "points": {"many": {}}}, "points: ['many'] must be a level"),
]


@pytest.mark.parametrize(("event", "says"), MALFORMED)
@pytest.mark.parametrize("command", ["todos", "report", "resume", "watch"])
def test_a_malformed_known_event_is_refused_in_one_line(
    event: dict[str, Any],
    says: str,
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = a_run(tmp_path, event)
    before = run.events_path.read_bytes()
    once = ["--once"] if command == "watch" else []
    code, err = cli([command, str(run.path), *once], capsys)
    assert code == 2 and one_line(err), err
    assert f"events.jsonl: event seq 3 ({event['type']}): {says}" in err, err
    assert "damaged" not in err, err  # an edited event, not a damaged line
    assert run.events_path.read_bytes() == before  # nothing appended: the run did not go on


def test_a_huge_field_is_shown_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = a_run(tmp_path, {"type": "planned", "call": ["x" * 100_000]})
    code, err = cli(["todos", str(run.path)], capsys)
    assert code == 2 and one_line(err) and len(err) < 300, err


# --- every type a writer writes is known, and the recordings fold with nothing refused ---------
def written_types() -> dict[str, str]:
    """Each event type the code appends (`X.append("TYPE", field=...)`), and where."""
    found: dict[str, str] = {}
    for layer in ("agent", "state", "tools"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                first = getattr(node.args[0], "value", None) if node.args else None
                if node.func.attr == "append" and isinstance(first, str) and node.keywords:
                    found.setdefault(first, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_written_type_is_known_and_documented() -> None:
    written = written_types()
    assert len(written) > 25  # the scan finds the writers (a broken scan finds nothing)
    unknown = {t: where for t, where in written.items() if t not in KNOWN}
    assert not unknown, f"written but unknown to the fold (state/event_types.py): {unknown}"
    # the fleet's clean-up picks its type at run time (agent/fleet/controller.py)
    assert {"trial_cleaned", "trial_left"} <= KNOWN.keys()
    docs = (ROOT / "docs" / "events.md").read_text()
    assert not [t for t in KNOWN if f"`{t}`" not in docs]


@pytest.mark.parametrize(
    "session", sorted((ROOT / "tests" / "sessions").rglob("*.jsonl")), ids=lambda p: p.name
)
def test_the_recorded_sessions_fold_with_nothing_skipped(session: Path) -> None:
    events = [json.loads(line) for line in session.read_text().splitlines() if line.strip()]
    assert fold(events).skipped == []


# --- a line no writer writes: refused before it is parsed ----------------------------------------
@pytest.mark.parametrize("command", ["todos", "report", "resume"])
def test_a_huge_line_is_refused_unparsed(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "x" * (MAX_EVENT_BYTES + 1)  # a hand-edited tool result of 16 MiB and a byte
    run = a_run(tmp_path, {"type": "tool_result", "id": "t", "text": text}, finished=True)
    at = run.events_path.read_bytes().index(b'{"seq": 3')
    code, err = cli([command, str(run.path)], capsys)
    assert code == 2 and one_line(err), err[:300]
    assert f"the event at byte {at} is a line of 16,777,3" in err
    assert "past the 16 MiB an event may be" in err, err


def test_the_writer_never_writes_a_line_the_readers_refuse(tmp_path: Path) -> None:
    run = a_run(tmp_path)
    run = Run.open(run.path)
    with pytest.raises(
        ValueError, match=r"a tool_result event of 16,777,2\d\d bytes, past the 16 MiB"
    ):
        run.append("tool_result", id="t", text="x" * MAX_EVENT_BYTES)
    run.append("run_finished", status="finished", exit_code=0, reason="done")  # it goes on
    run.close()
    events = read_events(run.events_path).events  # readable, nothing torn, no seq skipped
    assert [e["seq"] for e in events] == [1, 2, 3] and events[-1]["type"] == "run_finished"
