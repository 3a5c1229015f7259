"""Issue 23 item 7: `agent replay --check` on runs that did not simply finish, through the CLI.

A run that ended on an API error (401, a 400 that is not prompt-too-long) replays its end without
drift; a stopped run's replay that matches exits 0; `--max-steps N` compares only the replayed part
and exits 3; a replay is marked as one in its log, `agent runs` leaves it out unless asked
(`--all`, where it says `replay`), and `agent resume` refuses it.

"Claude" is tests/test_reliability_round2_replay.py's scripted API through the real SDK; here it
answers one call with an API error, as the real API would."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import anthropic
import httpx2
import pytest

from agent.brains.anthropic import AnthropicBrain
from agent.cli import main
from state.events import read_events
from state.inbox import send
from state.run import read_state
from tests.sessions.make_sessions import MODEL, answer
from tests.test_reliability_round2_replay import Claude, session, supervised_start

SESSIONS = sorted((Path(__file__).parent / "sessions").glob("*.jsonl"))
ERRORS = {
    401: ("authentication_error", "invalid x-api-key", "authentication failed"),
    400: ("invalid_request_error", "messages.3: unexpected tool_use_id", "bad request"),
}


class FailingClaude(Claude):
    """Answers the n-th call with an API error, as the Messages API sends one."""

    def __init__(self, status: int, at: int) -> None:
        super().__init__({})
        self.status, self.fail_at = status, at

    def brain(self) -> AnthropicBrain:
        def handler(request: httpx2.Request) -> httpx2.Response:
            self.served += 1
            if self.served == self.fail_at:
                kind, message, _ = ERRORS[self.status]
                body = {"type": "error", "error": {"type": kind, "message": message}}
                return httpx2.Response(self.status, json=body)
            return answer(json.loads(request.content), next(self.responses))

        client = anthropic.AsyncAnthropic(
            api_key="recording",
            base_url="http://recording.invalid",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
        )
        return AnthropicBrain(MODEL, client=client)


def without_failed_exchanges(path: Path) -> None:
    """The log as a brain that keeps no exchange for a failed call writes it (before refusals
    were recorded; a stream cut for good): the failed calls' exchanges out, seq renumbered."""
    kept = [e for e in read_events(path).events if not _failed_exchange(e)]
    for seq, event in enumerate(kept, 1):
        event["seq"] = seq
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in kept))


def _failed_exchange(event: dict[str, object]) -> bool:
    status = event.get("status")
    return event["type"] == "api_exchange" and isinstance(status, int) and status >= 400


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("kept", [True, False], ids=["as-recorded", "no-exchange"])
@pytest.mark.parametrize("status", [401, 400])
@pytest.mark.parametrize("at", [1, 4])
def test_a_run_that_ended_on_an_api_error_replays_without_drift(
    kept: bool, status: int, at: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    run = supervised_start(runs, "r", max_steps=40)
    assert asyncio.run(session(run, FailingClaude(status, at))) == 1
    run.close()
    if not kept:
        without_failed_exchanges(run.events_path)
    recorded = read_events(run.events_path).events
    assert recorded[-1]["status"] == "error" and ERRORS[status][2] in recorded[-1]["reason"]
    succeeded = [e for e in recorded if e["type"] == "api_exchange" and not _failed_exchange(e)]
    assert len(succeeded) == at - 1

    code, out, err = cli(["replay", str(run.path), "--check", "--runs-dir", str(runs)], capsys)
    assert code == 0 and "check: no drift" in out and "DRIFT" not in err, (code, out, err)
    replayed = read_events(next(p for p in runs.iterdir() if p.name != "r") / "events.jsonl")
    end, recorded_end = replayed.events[-1], recorded[-1]
    assert (end["status"], end["exit_code"], end["reason"]) == (
        recorded_end["status"],
        recorded_end["exit_code"],
        recorded_end["reason"],
    )


def test_an_api_error_where_the_recording_went_on_is_drift(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recorded end is played back only where the recording ended: one model call past a
    recording that finished is still drift."""
    runs = tmp_path / "runs"
    run = supervised_start(runs, "r", max_steps=40)
    assert asyncio.run(session(run, FailingClaude(401, 4))) == 1
    run.close()
    without_failed_exchanges(run.events_path)
    lines = run.events_path.read_bytes().splitlines(keepends=True)
    lines[-1] = lines[-1].replace(b'"status":"error"', b'"status":"finished"')
    lines[-1] = lines[-1].replace(b'"exit_code":1', b'"exit_code":0')
    run.events_path.write_bytes(b"".join(lines))
    code, _, err = cli(["replay", str(run.path), "--check", "--runs-dir", str(runs)], capsys)
    assert code == 1 and "DRIFT" in err and "the recording has only 3" in err, err


def test_a_stopped_run_that_replays_exactly_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    path = runs / "s"
    claude = Claude({3: lambda: send(path, "say", text="hurry"), 5: lambda: send(path, "stop")})
    run = supervised_start(runs, "s", max_steps=40)
    assert asyncio.run(session(run, claude)) == 130
    run.close()
    code, out, err = cli(["replay", str(path), "--check", "--runs-dir", str(runs)], capsys)
    assert code == 0 and "check: no drift" in out and "exit 130" in out, (code, out, err)


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.stem)
@pytest.mark.parametrize("steps", [1, 3, 6, 7])  # every session has 8 turns or more
def test_max_steps_compares_the_replayed_part_and_exits_3(
    path: Path, steps: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["replay", str(path), "--check", "--max-steps", str(steps)]
    code, out, err = cli([*args, "--runs-dir", str(tmp_path)], capsys)
    assert code == 3 and "DRIFT" not in err, (code, out, err)
    assert f"the first {steps} model turns match" in out, out
    (replayed,) = tmp_path.iterdir()
    events = read_events(replayed / "events.jsonl").events
    turns = [e for e in events if e["type"] == "message" and e["role"] == "assistant"]
    assert len(turns) == steps and events[-1]["status"] == "cut"
    # the loop decided as it did when recorded: the recorded limits, not the cut, are its budget
    assert events[0]["limits"] == read_events(path).events[0]["limits"]


def test_max_steps_past_the_recording_is_a_whole_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["replay", str(SESSIONS[0]), "--check", "--max-steps", "1000"]
    code, out, err = cli([*args, "--runs-dir", str(tmp_path)], capsys)
    assert code == 0 and "check: no drift" in out, (code, out, err)


def test_max_steps_still_finds_drift_in_the_replayed_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = SESSIONS[-1].read_text().splitlines(keepends=True)
    i = [n for n, line in enumerate(lines) if '"type":"tool_result"' in line][1]
    assert "Kill leftover" in lines[i]
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join([*lines[:i], lines[i].replace("Kill leftover", "Kill stray")]))
    edited.write_text(edited.read_text() + "".join(lines[i + 1 :]))
    args = ["replay", str(edited), "--check", "--max-steps", "9", "--runs-dir", str(tmp_path)]
    code, _, err = cli(args, capsys)
    assert code == 1 and "DRIFT" in err and "Kill stray" in err


def test_a_replay_is_marked_and_listed_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    code, _, _ = cli(["replay", str(SESSIONS[0]), "--runs-dir", str(runs)], capsys)
    assert code == 0
    (replay,) = runs.iterdir()
    started = read_events(replay / "events.jsonl").events[0]
    assert started["replay_of"] == str(SESSIONS[0])
    assert read_state(replay).replay_of == str(SESSIONS[0])
    code, out, _ = cli(
        [
            "run",
            "--goal",
            "beat baseline",
            "--model",
            "autopilot",
            "--runs-dir",
            str(runs),
            "--run-id",
            "real",
            "--max-steps",
            "2",
        ],
        capsys,
    )
    code, out, _ = cli(["runs", "--runs-dir", str(runs)], capsys)
    assert code == 0 and replay.name not in out and "real" in out, out
    assert "1 replay not listed (agent runs --all)" in out, out
    code, out, _ = cli(["runs", "--all", "--runs-dir", str(runs)], capsys)
    row = next(line for line in out.splitlines() if line.startswith(replay.name))
    assert code == 0 and "replay:" in row and "real" in out, out
    code, _, err = cli(["resume", str(replay)], capsys)
    assert code == 2 and "is a replay of" in err and len(err.strip().splitlines()) == 1, err


def test_replaying_a_fleet_run_is_one_line_saying_it_is_not_supported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a recorded session with a fleet on it (issue 49, item 6): before, `--check` replayed it
    # and said DRIFT; a fleet's trials ran at once on a cluster, nothing a replay can repeat
    events = read_events(SESSIONS[0]).events
    fleet = {"type": "fleet_started", "ts": events[0]["ts"], "engine": "ray",
             "nodes": {"n1": "box1", "n2": "box2"}, "slots": 2}  # fmt: skip
    kept = [events[0], fleet, *events[1:]]
    for seq, event in enumerate(kept, 1):
        event["seq"] = seq
    recording = tmp_path / "fleet.jsonl"
    recording.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in kept))
    runs = tmp_path / "runs"
    code, out, err = cli(["replay", str(recording), "--check", "--runs-dir", str(runs)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "is a fleet run: replaying a fleet run is not supported" in err, err
    assert "DRIFT" not in err + out and not (runs.exists() and any(runs.iterdir()))
