"""Steering a live run from another process: `agent say`, `agent stop`, `agent budget`.

Each test drives a real `agent run` (tests/steer_driver.py: the CLI, loop, runner, inbox and
report, with a slow scripted brain) in its own process and steers it with the `agent` CLI in
other processes, as a supervisor in another terminal would.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

from tests.conftest import alive
from tests.steer_driver import DEADLINE_S, agent_cli, spawn, wait_for, waiting_at_gate

Events = list[dict[str, Any]]


def of_type(events: Events, kind: str) -> Events:
    return [e for e in events if e["type"] == kind]


def assistant_texts_after(events: Events, seq: int) -> list[str]:
    return [
        " ".join(b.get("text", "") for b in e["content"] if b.get("type") == "text")
        for e in events
        if e["type"] == "message" and e["role"] == "assistant" and e["seq"] > seq
    ]


def test_say_many_at_once_each_reaches_the_loop_exactly_once_before_the_next_call(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    proc = spawn(runs, "say", "--turns", "6", "--gate-at", "3", "--pace", "0.05")
    run = runs / "say"
    texts = [f"focus on C={c}" for c in (1, 10, 30, 100, 250)]
    try:
        wait_for(run, lambda ev: waiting_at_gate(ev, 3))
        replies: list[subprocess.CompletedProcess[str]] = []

        def send(i: int, text: str) -> None:  # by run id and by path, both as users write them
            ref = ("say", "--runs-dir", str(runs)) if i % 2 else (str(run),)
            replies.append(agent_cli("say", ref[0], text, *ref[1:]))

        threads = [threading.Thread(target=send, args=(i, t)) for i, t in enumerate(texts)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [r.returncode for r in replies] == [0] * len(texts), [r.stderr for r in replies]
        assert all(r.stdout.startswith("message queued for run") for r in replies)
        (run / "gate").touch()
        assert proc.wait(timeout=DEADLINE_S) == 0
    finally:
        proc.kill()
    from state.events import read_events

    events = read_events(run / "events.jsonl").events
    said = of_type(events, "supervisor_message")
    assert sorted(m["text"] for m in said) == sorted(texts)  # each exactly once
    # all delivered before the next model call, which acknowledges each of them once
    first_reply = assistant_texts_after(events, max(m["seq"] for m in said))[0]
    assert all(first_reply.count(f"Acknowledged supervisor: '{t}'.") == 1 for t in texts)
    assert " ".join(assistant_texts_after(events, 0)).count("Acknowledged") == len(texts)
    assert not list((run / "inbox").glob("*.json")), "a delivered message stays in the inbox"


def test_stop_ends_with_130_kills_the_servers_and_writes_the_report(tmp_path: Path) -> None:
    """The real thing: the simulator (with its worker processes) and the real server tools."""
    runs = tmp_path / "runs"
    proc = spawn(runs, "stop", "--turns", "200", "--pace", "0.1", "--real")
    run = runs / "stop"
    try:
        events = wait_for(run, lambda ev: bool(of_type(ev, "benchmark")))
        started = of_type(events, "server_started")[0]
        workers = [w["pid"] for w in of_type(events, "server_ready")[0].get("workers", [])]
        pids = [started["pid"], *workers]
        assert all(alive(p) for p in pids) and len(pids) >= 2
        assert agent_cli("stop", "stop", "--runs-dir", str(runs)).returncode == 0
        assert proc.wait(timeout=DEADLINE_S) == 130
    finally:
        proc.kill()
    from state.events import read_events

    events = read_events(run / "events.jsonl").events
    end = of_type(events, "run_finished")[-1]
    assert (end["status"], end["exit_code"]) == ("stopped", 130)
    assert of_type(events, "stop_requested")
    killed = of_type(events, "server_killed")
    assert [k["name"] for k in killed] == ["baseline"]
    assert not [p for p in pids if alive(p)], "a server process outlived the stop"
    with socket.socket() as s:  # the port is free again
        s.bind(("127.0.0.1", started["port"]))
    # the current tool finished: every call has its result
    assert len(of_type(events, "tool_call")) == len(of_type(events, "tool_result"))
    report = (run / "report.md").read_text()
    assert "status **stopped**" in report


def test_budget_raises_the_step_limit_of_a_live_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    args = ("--turns", "9", "--gate-at", "3", "--max-steps", "5", "--no-server", "--pace", "0")
    proc = spawn(runs, "budget", *args)
    run = runs / "budget"
    try:
        wait_for(run, lambda ev: waiting_at_gate(ev, 3))
        bad = agent_cli("budget", str(run))
        assert bad.returncode == 2 and "--steps, --usd or --minutes" in bad.stderr
        assert agent_cli("budget", str(run), "--steps", "20").returncode == 0
        (run / "gate").touch()
        code = proc.wait(timeout=DEADLINE_S)
    finally:
        proc.kill()
    from state.events import read_events

    events = read_events(run / "events.jsonl").events
    changed = of_type(events, "limits_changed")
    assert [c["limits"] for c in changed] == [{"max_steps": 20}]
    end = of_type(events, "run_finished")[-1]
    assert code == 0, end  # without the raise the run ends at step 5 with exit 3
    assert len([e for e in events if e["type"] == "message" and e["role"] == "assistant"]) == 10
