"""Steering a live run from another process: `agent say`, `agent stop`, `agent budget`.

Each test drives a real `agent run` (tests/steer_driver.py: the CLI, loop, runner, inbox and
report, with a slow scripted brain) in its own process and steers it with the `agent` CLI in
other processes, as a supervisor in another terminal would.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

from tests.steer_driver import agent_cli, spawn, wait_for, waiting_at_gate

Events = list[dict[str, Any]]


def of_type(events: Events, kind: str) -> Events:
    return [e for e in events if e["type"] == kind]


def assistant_texts_after(events: Events, seq: int) -> list[str]:
    return [
        " ".join(b.get("text", "") for b in e["content"] if b.get("type") == "text")
        for e in events
        if e["type"] == "message" and e["role"] == "assistant" and e["seq"] > seq
    ]


def test_say_reaches_the_loop_before_the_next_model_call(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = spawn(runs, "say", "--turns", "6", "--gate-at", "3", "--pace", "0.05")
    run = runs / "say"
    try:
        wait_for(run, lambda ev: waiting_at_gate(ev, 3))
        sent = agent_cli("say", "say", "focus on C=10", "--runs-dir", str(runs))
        assert sent.returncode == 0, sent.stderr
        assert '"queued": "say"' in sent.stdout
        (run / "gate").touch()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    from state.events import read_events

    events = read_events(run / "events.jsonl").events
    said = of_type(events, "supervisor_message")
    assert [m["text"] for m in said] == ["focus on C=10"]
    # delivered before the next model call, which acknowledges it
    after = assistant_texts_after(events, said[0]["seq"])
    assert "Acknowledged supervisor: 'focus on C=10'." in after[0]
    assert not list((run / "inbox").glob("*.json")), "a delivered message stays in the inbox"


def test_many_messages_at_once_each_arrive_exactly_once(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = spawn(runs, "many", "--turns", "6", "--gate-at", "3", "--no-server")
    run = runs / "many"
    texts = [f"note {i}" for i in range(5)]
    try:
        wait_for(run, lambda ev: waiting_at_gate(ev, 3))
        results: list[int] = []

        def send(text: str) -> None:
            results.append(agent_cli("say", str(run), text).returncode)

        threads = [threading.Thread(target=send, args=(t,)) for t in texts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [0] * len(texts)
        (run / "gate").touch()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    from state.events import read_events

    events = read_events(run / "events.jsonl").events
    assert sorted(m["text"] for m in of_type(events, "supervisor_message")) == texts
    acked = " ".join(assistant_texts_after(events, 0))
    assert all(acked.count(f"'{t}'") == 1 for t in texts)


def test_wrap_up_directive_ends_the_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = spawn(runs, "wrap", "--turns", "50", "--gate-at", "3", "--no-server")
    run = runs / "wrap"
    try:
        wait_for(run, lambda ev: waiting_at_gate(ev, 3))
        assert agent_cli("say", str(run), "wrap up now please").returncode == 0
        (run / "gate").touch()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    events = wait_for(run, lambda ev: bool(of_type(ev, "run_finished")))
    assert of_type(events, "run_finished")[-1]["reason"].endswith("Wrapping up.")
    assert len(of_type(events, "message")) < 10


def alive(pid: int) -> bool:
    """Running, that is: a zombie waiting for a parent (or init) to reap it has ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_stop_ends_with_130_kills_the_servers_and_writes_the_report(tmp_path: Path) -> None:
    """The real thing: the simulator (with its worker processes) and the real server tools."""
    runs = tmp_path / "runs"
    proc = spawn(runs, "stop", "--turns", "200", "--pace", "0.1", "--real")
    run = runs / "stop"
    try:
        events = wait_for(run, lambda ev: bool(of_type(ev, "benchmark")), timeout=60)
        started = of_type(events, "server_started")[0]
        workers = [w["pid"] for w in of_type(events, "server_ready")[0].get("workers", [])]
        pids = [started["pid"], *workers]
        assert all(alive(p) for p in pids) and len(pids) >= 2
        assert agent_cli("stop", "stop", "--runs-dir", str(runs)).returncode == 0
        assert proc.wait(timeout=30) == 130
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
        code = proc.wait(timeout=30)
    finally:
        proc.kill()
    from state.events import read_events

    events = read_events(run / "events.jsonl").events
    changed = of_type(events, "limits_changed")
    assert [c["limits"] for c in changed] == [{"max_steps": 20}]
    end = of_type(events, "run_finished")[-1]
    assert code == 0, end  # without the raise the run ends at step 5 with exit 3
    assert len([e for e in events if e["type"] == "message" and e["role"] == "assistant"]) == 10
