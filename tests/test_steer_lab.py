"""Steering the real thing: `agent run` on the built-in lab (the simulator, the real tools, the
autopilot brain) in its own process, watched and steered from others, as a supervisor would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from state.events import read_events
from tests.steer_driver import ROOT, agent_cli, free_port, wait_for
from tests.test_steer import alive

SPECULATIVE = "--speculative-algorithm"


def test_say_steers_the_autopilot_on_the_lab_to_a_clean_end(tmp_path: Path) -> None:
    config = tmp_path / "lab.toml"  # the lab on a port of its own, with a cheap workload
    config.write_text(
        f'[server]\nengine = "sim"\nport = {free_port()}\n'
        "[bench]\nconcurrency = [1, 4, 16]\nmax_tokens = 32\n"
    )
    runs = tmp_path / "runs"
    argv = [sys.executable, "-m", "agent.cli", "run", "--goal", "beat baseline"]
    argv += ["--config", str(config), "--runs-dir", str(runs), "--run-id", "lab"]
    out = open(tmp_path / "run.out", "wb")  # noqa: SIM115
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    run = runs / "lab"
    try:
        wait_for(run, lambda ev: any(e["type"] == "benchmark" for e in ev), timeout=120)
        watch = [sys.executable, "-m", "agent.cli", "watch", str(run), "--json", "--grace", "1"]
        watcher = subprocess.Popen(watch, cwd=ROOT, stdout=subprocess.PIPE)
        said = agent_cli("say", str(run), "skip speculation, and wrap up")
        assert said.returncode == 0, said.stderr
        assert proc.wait(timeout=240) == 0, (tmp_path / "run.out").read_text()[-2000:]
        streamed, _ = watcher.communicate(timeout=30)
    finally:
        proc.kill()
        out.close()
    events = read_events(run / "events.jsonl").events
    assert streamed == (run / "events.jsonl").read_bytes()  # watch --json saw every event
    assert watcher.returncode == 0

    message = next(e for e in events if e["type"] == "supervisor_message")
    assert message["text"] == "skip speculation, and wrap up"
    replies = [e for e in events if e["type"] == "message" and e["seq"] > message["seq"]]
    first = " ".join(b.get("text", "") for b in replies[0]["content"] if b["type"] == "text")
    assert f"Supervisor #{message['seq']}" in first  # acknowledged in the very next turn
    later = [e for e in events if e["type"] == "server_started" and e["seq"] > message["seq"]]
    assert not [e for e in later if e["flags"].get(SPECULATIVE)], "speculation after 'skip'"

    # a clean end: every server killed and gone, the todo list closed, the report written
    started = [e for e in events if e["type"] == "server_started"]
    killed = [e for e in events if e["type"] == "server_killed"]
    assert len(killed) == len(started)
    pids = [e["pid"] for e in started] + [
        w["pid"] for e in events if e["type"] == "server_ready" for w in e.get("workers", [])
    ]
    assert not [p for p in pids if alive(p)]
    todos: list[dict[str, Any]] = json.loads((run / "todos.json").read_text())["todos"]
    assert todos and all(t["status"] in ("completed", "cancelled") for t in todos)
    report = (run / "report.md").read_text()
    assert report.index("## Conclusion") < report.index("## Throughput by concurrency")
    assert "status **finished**" in report
    said_line = f'The supervisor said (event {message["seq"]}): "skip speculation, and wrap up"'
    assert said_line in report
    assert "data:image/png;base64," in (run / "report.html").read_text()
