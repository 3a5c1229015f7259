"""Issue 47: a run file that is a symbolic link is never followed. `agent resume` of a run whose
events.jsonl points elsewhere truncated the target (the torn-tail repair wrote through the link);
now it refuses in one line, exit 2, and the target is left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli.main import main
from state.events import EventLog, read_events
from state.files import LinkedRunFile
from state.run import Run


def a_run_with_a_torn_tail(tmp_path: Path) -> tuple[Path, Path, bytes]:
    """A stopped run whose log is a link to a file outside (with a torn last line, as a crash
    leaves one: what resume cuts off)."""
    run = Run.create(tmp_path / "runs", "r")
    run.append("run_started", goal="g", brain="autopilot", model="autopilot", limits={})
    run.append("run_finished", status="stopped", exit_code=130, reason="stopped")
    run.close()
    target = tmp_path / "precious.txt"  # what the link points to: someone's file
    body = run.events_path.read_bytes() + b'{"seq": 3, "ts": "x", "typ'
    target.write_bytes(body)
    run.events_path.unlink()
    run.events_path.symlink_to(target)
    return run.path, target, body


def test_resume_refuses_a_symlinked_log_in_one_line_and_leaves_the_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, target, body = a_run_with_a_torn_tail(tmp_path)
    assert main(["resume", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "symbolic link" in err and "Traceback" not in err, err
    assert target.read_bytes() == body
    assert path.joinpath("events.jsonl").is_symlink()


def test_no_run_file_is_opened_through_a_link(tmp_path: Path) -> None:
    path, target, body = a_run_with_a_torn_tail(tmp_path)
    with pytest.raises(LinkedRunFile, match="symbolic link"):
        Run.open(path)  # what every command that writes a run opens
    with pytest.raises(LinkedRunFile):
        EventLog(path / "events.jsonl")
    with pytest.raises(LinkedRunFile):
        read_events(path / "events.jsonl")
    assert target.read_bytes() == body
    # the lock too: a link in its place is not truncated to hold the pid
    (path / "events.jsonl").unlink()
    (path / "events.jsonl").write_bytes(body[: body.rindex(b"\n") + 1])
    (path / "run.lock").unlink()
    (path / "run.lock").symlink_to(target)
    assert main(["resume", str(path)]) == 2
    with pytest.raises(LinkedRunFile):
        Run.open(path)
    assert target.read_bytes() == body


def test_todos_json_prints_the_file_never_a_links_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Run.create(tmp_path / "runs", "r")
    run.append("run_started", goal="g", brain="autopilot", model="autopilot", limits={})
    run.close()
    secret = tmp_path / "id_ed25519"
    secret.write_text("PRIVATE KEY")
    (run.path / "todos.json").symlink_to(secret)
    assert main(["todos", str(run.path), "--json"]) == 2
    captured = capsys.readouterr()
    assert "PRIVATE KEY" not in captured.out + captured.err
    (run.path / "todos.json").unlink()
    assert main(["todos", str(run.path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"todos": []}


def test_agent_runs_lists_a_run_whose_log_is_a_link_and_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, target, body = a_run_with_a_torn_tail(tmp_path)
    other = Run.create(tmp_path / "runs", "s")
    other.append("run_started", goal="the other", brain="autopilot", model="autopilot", limits={})
    other.close()
    assert main(["runs", "--runs-dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "symbolic link" in out and "the other" in out, out
    assert target.read_bytes() == body


def test_watch_refuses_a_symlinked_log_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, target, body = a_run_with_a_torn_tail(tmp_path)
    for argv in (["watch", str(path), "--once"], ["watch", str(path), "--json", "--once"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "symbolic link" in err, err
    assert target.read_bytes() == body
