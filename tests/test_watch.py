"""`agent watch`: following events.jsonl from another process, the rich view, --json streaming,
and `agent run`'s own view on a terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from agent.view.watch import Follower, Line, follow, watch_view
from state.events import EventLog, read_events
from tests.steer_driver import DEADLINE_S, ROOT, agent_cli, spawn, wait_for, waiting_at_gate


def line(seq: int, type_: str = "note", **data: object) -> bytes:
    return json.dumps({"seq": seq, "ts": "2026-01-01T00:00:00.000Z", "type": type_, **data})\
        .encode() + b"\n"  # fmt: skip


def test_follower_buffers_a_partial_line_until_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(line(1))
    f = Follower(path)
    assert [x.event["seq"] for x in f.poll()[1]] == [1]
    whole = line(2)
    with open(path, "ab") as out:
        out.write(whole[:10])
    assert f.poll() == (False, [])
    with open(path, "ab") as out:
        out.write(whole[10:] + line(3))
    reset, lines = f.poll()
    assert not reset and [x.event["seq"] for x in lines] == [2, 3]
    assert lines[0].raw + b"\n" == whole


def test_follower_starts_over_when_the_file_shrinks_or_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(line(1) + line(2) + line(3))
    f = Follower(path)
    f.poll()
    path.write_bytes(line(1, "other"))  # rewritten in place, shorter
    reset, lines = f.poll()
    assert reset and [x.event["type"] for x in lines] == ["other"]
    tmp = tmp_path / "new"
    tmp.write_bytes(line(1, "fresh") + line(2, "fresh"))
    os.replace(tmp, path)  # a new file under the same name
    reset, lines = f.poll()
    assert reset and [x.event["seq"] for x in lines] == [1, 2]


def test_follower_keeps_its_place_when_a_torn_tail_is_cut_off(tmp_path: Path) -> None:
    """The writer repairs a crash by truncating the torn last line, then appends again."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(line(1) + b'{"seq": 2, "ts": "x", "ty')
    f = Follower(path)
    assert [x.event["seq"] for x in f.poll()[1]] == [1]
    log = EventLog(path)  # what `agent resume` does: cut the torn line, go on
    log.append("run_resumed")
    log.close()
    reset, lines = f.poll()
    assert not reset and [(x.event["seq"], x.event["type"]) for x in lines] == [(2, "run_resumed")]


class Clock:
    """The follower's clock, moved by the test alone: the grace runs out when the test says so,
    however slowly the machine polls (a writer thread that slept 0.2 s of a 0.6 s grace raced
    the follower on a loaded machine)."""

    def __init__(self) -> None:
        self.now, self.calls = 0.0, 0

    def __call__(self) -> float:
        self.calls += 1
        return self.now


def until(batches: Iterator[tuple[bool, list[Line]]], kind: str) -> list[str]:
    """The event types the follower yields up to a batch that holds `kind` (a bounded wait)."""
    seen: list[str] = []
    for _ in range(2000):  # polls of 0.01 s, 20 s at the least: far past any delivery
        seen += [x.event["type"] for x in next(batches)[1]]
        if kind in seen:
            return seen
    raise AssertionError(f"the follower never yielded {kind}: {seen}")


def test_follow_waits_out_the_grace_for_a_resume_after_run_finished(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(line(1, "run_started"))
    clock = Clock()
    batches = follow(path, interval=0.01, grace=0.5, clock=clock)
    seen = until(batches, "run_started")
    with open(path, "ab") as out:
        out.write(line(2, "run_finished"))
    seen += until(batches, "run_finished")
    clock.now = 0.25  # within the grace: `agent resume` goes on
    with open(path, "ab") as out:
        out.write(line(3, "run_resumed") + line(4, "run_finished"))
    seen += until(batches, "run_resumed")
    assert seen == ["run_started", "run_finished", "run_resumed", "run_finished"]
    clock.now = 0.25 + 0.5  # the grace after the last run_finished is over: the follow ends
    assert next(batches, None) is None
    # started after the run ended: the final state at once, no waiting (the clock never read)
    clock = Clock()
    assert len(list(follow(path, interval=0.02, grace=30, clock=clock))) == 1
    assert clock.calls == 0


def test_watch_renders_a_live_run_and_follows_it_to_the_end(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = spawn(runs, "live", "--turns", "6", "--gate-at", "3", "--pace", "0.05")
    run = runs / "live"
    try:
        wait_for(run, lambda ev: waiting_at_gate(ev, 3))
        snap = Console(record=True, width=120)
        watch_view(run / "events.jsonl", snap, once=True)  # a glance while it runs
        text = snap.export_text()
        assert "beat baseline (scripted)" in text
        assert "todos 1/4 done" in text
        assert "✓ high   start the baseline server" in text
        assert "▶ high   sweep the baseline" in text
        assert "○ medium keep an eye on the todo list" in text
        assert "step 3 · thinking" in text
        assert "servers up" in text and "local:30000" in text and "ready" in text
        assert "latest benchmark: baseline sweep (1 so far)" in text
        assert "92.6" in text and "770.0" in text and "TTFT p50" in text
        assert "steps 3 of 100 (97 left)" in text and "$0.03 of $25.00" in text
        assert "Sweeping the baseline." in text

        assert agent_cli("say", str(run), "skip speculation").returncode == 0
        (run / "gate").touch()
        console = Console(record=True, width=120)
        board = watch_view(run / "events.jsonl", console, interval=0.05, grace=0.3)
        assert proc.wait(timeout=DEADLINE_S) == 0
    finally:
        proc.kill()
    text = console.export_text()
    assert board.state.finished and board.state.finished["status"] == "finished"
    assert "supervisor: skip speculation" in text  # the event line
    assert "╭─ supervisor" in text and "] skip speculation" in text  # the panel
    assert "Acknowledged supervisor: 'skip speculation'." in text
    assert "finished (exit 0): Wrapping up." in text


def test_watch_json_streams_every_event_as_ndjson(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = spawn(runs, "json", "--turns", "6", "--pace", "0.1")
    run = runs / "json"
    try:
        wait_for(run, lambda ev: len(ev) >= 1)
        argv = [sys.executable, "-m", "agent.cli", "watch", str(run), "--json", "--grace", "0.5"]
        watcher = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=DEADLINE_S)
        assert proc.wait(timeout=DEADLINE_S) == 0
    finally:
        proc.kill()
    assert watcher.returncode == 0, watcher.stderr
    assert watcher.stdout == (run / "events.jsonl").read_bytes()
    events = [json.loads(x) for x in watcher.stdout.splitlines()]
    assert events[-1]["type"] == "run_finished"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def test_watch_usage_errors_are_one_line(tmp_path: Path) -> None:
    missing = agent_cli("watch", "nope", "--runs-dir", str(tmp_path))
    assert missing.returncode == 2
    assert missing.stderr.strip().count("\n") == 0 and "no run 'nope'" in missing.stderr


def test_agent_run_draws_the_live_view_on_a_terminal_and_lines_elsewhere(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "110", "LINES": "60", "TERM": "xterm"}
    proc = spawn(runs, "tty", "--turns", "5", "--pace", "0.3", stdout=slave, env=env)
    os.close(slave)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], DEADLINE_S)
            if not ready:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        assert proc.wait(timeout=DEADLINE_S) == 0
    finally:
        proc.kill()
        os.close(master)
    text = out.decode("utf-8", "replace")
    assert "\x1b[" in text  # drawn with cursor control: a live view, not lines
    assert "todos" in text and "╭" in text and "load baseline" in text
    assert "server baseline starting on local:30000" in text  # lines scroll above the view
    assert "finished (exit 0)" in text
    plain = (runs / "tty.out").read_text() if (runs / "tty.out").exists() else ""
    assert "\x1b[" not in plain
    lines = read_events(runs / "tty" / "events.jsonl").events
    assert lines[-1]["type"] == "run_finished"


def test_todos_prints_the_list_and_json_prints_exactly_todos_json(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = spawn(runs, "todos", "--turns", "4", "--pace", "0", "--no-server")
    assert proc.wait(timeout=DEADLINE_S) == 0
    as_json = agent_cli("todos", "todos", "--json", "--runs-dir", str(runs))
    assert as_json.returncode == 0
    assert as_json.stdout == (runs / "todos" / "todos.json").read_text()
    assert json.loads(as_json.stdout)["todos"][2]["status"] == "in_progress"
    plain = agent_cli("todos", str(runs / "todos"))
    assert "[x] srv: start the baseline server (high)" in plain.stdout
    assert "[>] wait: keep an eye on the todo list (turn 3) (medium)" in plain.stdout


def test_watch_says_so_when_the_run_process_dies_without_finishing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent.view.watch

    monkeypatch.setattr(agent.view.watch, "WRITER_CHECK_S", 0.1)
    dead = subprocess.Popen(["true"])
    dead.wait()
    path = tmp_path / "run" / "events.jsonl"
    path.parent.mkdir()
    host = socket.gethostname()
    path.write_bytes(line(1, "run_started", goal="g", pid=dead.pid, hostname=host))
    console = Console(record=True, width=200)
    board = watch_view(path, console, interval=0.02, grace=0.1)
    assert board.gone == dead.pid
    text = console.export_text()
    assert f"(pid {dead.pid}) ended without finishing the run" in text
    assert f"agent resume {path.parent}" in text
    # a live writer (this process) keeps watch following; another host's pid is not checked
    path.write_bytes(line(1, "run_started", goal="g", pid=os.getpid(), hostname=host))
    batches = agent.view.watch.follow(path, interval=0.02)
    for _ in range(20):
        next(batches)
    path.write_bytes(line(1, "run_started", goal="g", pid=dead.pid, hostname=host + "-other"))
    batches = agent.view.watch.follow(path, interval=0.02)
    for _ in range(20):
        next(batches)
