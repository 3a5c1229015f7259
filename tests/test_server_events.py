"""The server events the report and the views read most (state/server_events.py): parsed once into
typed records, from the recorded sessions' events as from an older run's, unknown keys kept."""

from __future__ import annotations

import json
from pathlib import Path

from agent.report.measured import failures
from agent.view.console import server_words
from state.launches import launches
from state.server_events import ServerFailed, ServerStarted, server_event

SESSIONS = Path(__file__).parent / "sessions"


def recorded() -> list[dict[str, object]]:
    return [
        json.loads(line)
        for path in sorted(SESSIONS.glob("*/*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def test_every_recorded_server_event_parses_as_written() -> None:
    events = recorded()
    started = [e for e in events if e["type"] == "server_started"]
    failed = [e for e in events if e["type"] == "server_failed"]
    assert started and failed
    for e in started:
        s = server_event(e)
        assert isinstance(s, ServerStarted)
        assert (s.name, s.command, s.flags) == (e["name"], e["command"], e["flags"])
        assert s.port == e["port"] and s.host == e["host"]
    for e in failed:
        f = server_event(e)
        assert isinstance(f, ServerFailed)
        assert (f.name, f.diagnosis, f.log_excerpt) == (e["name"], e["diagnosis"], e["log_excerpt"])
    assert all(server_event(e) is None for e in events if not str(e["type"]).startswith("server_"))


def test_an_older_event_parses_and_a_hand_edited_one_is_skipped() -> None:
    old = {"seq": 3, "type": "server_started", "name": "base", "port": 30000, "cwd": "/x"}
    s = server_event(old)
    assert isinstance(s, ServerStarted) and s.flags is None and (s.model_extra or {})["cwd"] == "/x"
    assert server_event({**old, "port": "not a port"}) is None
    events = [
        {**old, "flags": {"--tp": 2}},
        {"seq": 4, "type": "server_failed", "name": "base"},  # no diagnosis: an older writer
        {"seq": 5, "type": "server_failed", "name": "r", "diagnosis": "refused", "flags": {}},
        # refused before launch: its own flags, not those of the name's earlier launch
        {**old, "seq": 6, "name": "c", "flags": {"--tp": 4}},
        {"seq": 7, "type": "server_failed", "name": "c", "flags": {"--tp": 8}, "diagnosis": "no"},
        {"seq": 8, "type": "server_failed", "name": "base", "diagnosis": "again"},
    ]
    said = [(f.name, f.flags, f.diagnosis, f.excerpt) for f in failures(launches(events))]
    assert said == [
        ("base", {"--tp": 2}, "failed", ""),
        ("r", {}, "refused", ""),
        ("c", {"--tp": 8}, "no", ""),
        ("base", None, "again", ""),  # its launch's failure was already told
    ]
    assert server_words(events[0]) == "server base starting on None:30000 (pid None)"
    assert server_words(events[2]) == "server r failed: refused"
