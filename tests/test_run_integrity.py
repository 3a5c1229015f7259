"""The run folder is never corrupted: one writer per run, and a full disk never leaves half a write.

Issue 16, items 2 and 4: a second `agent resume` on a live run wrote events.jsonl beside it
(seq 89 and 90 twice, mangled lines); os.write's short writes on a full disk were taken as
whole ones, and a truncated temp file was renamed over a valid todos.json.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli.main import main
from state import atomic
from state.events import EventLog, read_events
from state.ledger import Ledger
from state.run import Run, RunError

HOLD = """
import sys, time
from pathlib import Path
from state.run import Run
run = Run.open(Path(sys.argv[1]))
run.append("note", text="the live writer")
print("ready", flush=True)
sys.stdin.readline()  # hold the run until the test lets go
run.append("note", text="still the only writer")
run.close()
"""


@pytest.fixture
def live_run(tmp_path: Path):  # type: ignore[no-untyped-def]
    run = Run.create(tmp_path / "runs", "live")
    run.append("run_started", goal="g", brain="autopilot", model="autopilot")
    run.close()
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent.parent,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield run.path, proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_a_second_writer_on_a_live_run_is_refused_naming_the_pid(live_run) -> None:  # type: ignore[no-untyped-def]
    path, proc = live_run
    size = (path / "events.jsonl").stat().st_size
    with pytest.raises(RunError, match=f"live process \\(pid {proc.pid}\\)"):
        Run.open(path)
    assert (path / "events.jsonl").stat().st_size == size  # nothing written, nothing cut
    proc.communicate("go\n", timeout=30)
    events = read_events(path / "events.jsonl").events
    assert [e["seq"] for e in events] == [1, 2, 3]
    # the lock dies with its process: the run opens again
    Run.open(path).close()


def test_agent_resume_on_a_live_run_is_one_line_and_exit_2(
    live_run,  # type: ignore[no-untyped-def]
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, proc = live_run
    code = main(["resume", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and f"pid {proc.pid}" in err and "agent stop" in err


def test_one_process_cannot_open_a_run_twice(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "r")
    with pytest.raises(RunError, match=f"pid {os.getpid()}"):
        Run.open(run.path)
    run.close()
    Run.open(run.path).close()


def test_the_event_log_is_opened_for_append(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    import fcntl

    assert fcntl.fcntl(log._fd, fcntl.F_GETFL) & os.O_APPEND
    log.close()


def short_writes(monkeypatch: pytest.MonkeyPatch, allowed: int) -> None:
    """os.write as on a disk that takes `allowed` more bytes: short, then ENOSPC."""
    real = os.write
    left = [allowed]

    def write(fd: int, data: bytes | memoryview) -> int:
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = real(fd, bytes(data)[: left[0]])
        left[0] -= n
        return n

    monkeypatch.setattr(os, "write", write)


def test_a_short_write_never_replaces_a_valid_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "todos.json"
    atomic.write_json_atomic(path, {"todos": [{"id": "1"}]})
    before = path.read_bytes()
    short_writes(monkeypatch, 10)
    with pytest.raises(OSError) as err:
        atomic.write_json_atomic(path, {"todos": [{"id": str(i)} for i in range(100)]})
    assert err.value.errno == errno.ENOSPC
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["todos.json"]  # no temp file left


def test_a_short_write_to_the_event_log_leaves_no_half_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    log.append("note", i=1)
    short_writes(monkeypatch, 12)
    with pytest.raises(OSError):
        log.append("note", text="x" * 500)
    monkeypatch.undo()
    log.append("note", i=3)  # space freed: the log goes on, gapless
    log.close()
    contents = read_events(tmp_path / "events.jsonl")
    assert contents.torn == b"" and [e["seq"] for e in contents.events] == [1, 2]


def test_a_short_write_to_the_ledger_leaves_no_half_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append({"config_hash": "a"})
    short_writes(monkeypatch, 7)
    with pytest.raises(OSError):
        ledger.append({"config_hash": "b", "pad": "x" * 300})
    monkeypatch.undo()
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    assert [json.loads(x)["config_hash"] for x in lines] == ["a"]
