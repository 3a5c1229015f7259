"""One non-UTF-8 byte must not kill a run or any resume (issue 16, item 3).

A byte such as 0xff in an argument or an environment variable reaches Python as a lone surrogate
(`\\udcff`); encoding it to UTF-8 raised UnicodeEncodeError in the event log, the run files and
the final scrub of the run folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli.main import main
from agent.session import Limits, start
from state.events import EventLog, read_events
from state.inbox import drain, send
from state.run import Run
from state.secrets import MASK, Scrubber, secret_values
from tests.conftest import plain_config

BAD = "bad \udcff byte"  # what `agent say RUN $'bad \xff byte'` hands Python


def test_the_event_log_stores_a_lone_surrogate_as_a_replacement_character(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    log.append("note", text=BAD)
    log.close()
    [event] = read_events(tmp_path / "events.jsonl").events
    assert event["text"] == "bad \ufffd byte"


def test_say_with_a_bad_byte_is_delivered_once_and_the_inbox_empties(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "r")
    run.append("run_started", goal="g", brain="autopilot", model="autopilot")
    assert main(["say", str(run.path), BAD]) == 0
    assert drain(run) == 1
    assert list((run.path / "inbox").iterdir()) == []
    assert run.state.last_seq == 2
    run.close()
    events = read_events(run.path / "events.jsonl").events
    assert events[-1]["type"] == "supervisor_message" and events[-1]["text"] == "bad \ufffd byte"
    send(run.path, "say", text="\ud800 a surrogate from JSON")  # no byte stood for this one
    again = Run.open(run.path)
    assert drain(again) == 1
    again.close()


def test_a_goal_with_a_bad_byte_starts_a_run_that_resumes(tmp_path: Path) -> None:
    config = plain_config()
    run = start("beat \udcff", config, "autopilot", tmp_path / "runs", "r", Limits())
    run.write_text("notes.md", "x \udcff y")
    run.close()
    resumed = Run.open(run.path)
    assert resumed.state.goal == "beat \ufffd"
    assert (run.path / "notes.md").read_text() == "x \ufffd y"
    resumed.close()


def test_a_secret_with_a_bad_byte_is_scrubbed_from_files_and_text(tmp_path: Path) -> None:
    scrub = Scrubber(secret_values({"HF_TOKEN": "hf_abc\udcffdefgh"}))
    log = tmp_path / "server.log"
    log.write_bytes(b"token hf_abc\xffdefgh loaded\n")  # as the server wrote it
    assert scrub.folder(tmp_path) == 1
    assert log.read_bytes() == f"token {MASK} loaded\n".encode()
    # tool output is decoded with errors="replace": the secret shows up with U+FFFD
    assert scrub("echo hf_abc\ufffddefgh") == f"echo {MASK}"
    assert scrub(json.dumps({"t": "hf_abc\udcffdefgh"}, ensure_ascii=False)) == f'{{"t": "{MASK}"}}'


@pytest.mark.parametrize("argv", [["todos", "r\udcff"], ["stop", "\udcff"]])
def test_a_bad_byte_in_a_run_name_is_one_line(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\ufffd" in err
