"""The issue's acceptance run, end to end with real processes: `agent lab setup eagle3-pipeline
--defect`, `agent run --model autopilot`, SIGKILL of the agent while the training job runs, `agent
resume`. The data check catches the defect, the fixed script is copied and the stage rerun, the
training job is found again (not started twice), and the campaign ends with the trained drafter's
acceptance length in recommendation.json and report.md."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tools.servers.pipeline_lab import setup

GOAL = "train an EAGLE-3 drafter and beat the baseline"
STAGES = ("datagen", "check", "extract", "vocab", "train", "convert")


def events(run: Path) -> list[dict[str, Any]]:
    path = run / "events.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def agent(*args: str) -> list[str]:
    return [sys.executable, "-m", "agent.cli", *args]


@pytest.mark.slow  # the pipeline (~15 s), then a three-configuration campaign
def test_pipeline_defect_fix_kill_during_training_and_resume(tmp_path: Path) -> None:
    lab = setup(tmp_path / "lab", defect=True, scale=4000)
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    runs = tmp_path / "runs"
    run = runs / "r1"
    # a smaller workload than the lab's, for time: the pipeline and the handover are the point
    text = lab.config.read_text().replace("[1, 2, 5, 10, 30, 70]", "[1, 4, 16]")
    lab.config.write_text(text.replace("max_tokens = 128", "max_tokens = 64"))
    argv = ["--config", str(lab.config), "--goal", GOAL, "--model", "autopilot"]
    first = subprocess.Popen(
        agent("run", *argv, "--runs-dir", str(runs), "--run-id", "r1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while not any(e["type"] == "job_started" and e["name"] == "train" for e in events(run)):
            assert first.poll() is None, "the agent ended before training started"
            assert time.monotonic() < deadline, "training never started"
            time.sleep(0.1)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    train = next(e for e in events(run) if e["type"] == "job_started" and e["name"] == "train")
    resumed = subprocess.run(
        agent("resume", "r1", "--runs-dir", str(runs)),
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
    )
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    evs = events(run)
    started = [e["name"] for e in evs if e["type"] == "job_started"]
    ended = {e["name"]: e.get("exit_code") for e in evs if e["type"] == "job_ended"}
    # the defect: caught by the check, fixed script copied, data made again, checked again
    assert started[:3] == ["datagen", "check", "datagen-2"] and ended["check"] == 1
    puts = [e for e in evs if e["type"] == "tool_call" and e["name"] == "put_file"]
    assert [p["input"]["remote_path"] for p in puts] == ["scripts/datagen.sh"]
    assert "--defect" not in (lab.work / "scripts" / "datagen.sh").read_text()
    # every stage a job that started and ended well; training started once, by the first agent
    assert started.count("train") == 1 and train["pid"] == next(
        e["pid"] for e in evs if e["type"] == "job_started" and e["name"] == "train"
    )
    for name in ("datagen-2", "check-2", *STAGES[2:]):
        assert ended.get(name) == 0, (name, ended)
    assert any(e["type"] == "run_resumed" for e in evs)
    # then the serving campaign with the trained drafter, and its acceptance length stated
    spec = [
        e["input"]["flags"] for e in evs if e["type"] == "tool_call" and e["name"] == "start_server"
    ]
    assert any(f.get("--speculative-draft-model-path") == "drafter" for f in spec)
    assert any(f.get("--speculative-algorithm") == "NGRAM" for f in spec)
    rec = json.loads((run / "recommendation.json").read_text())
    assert "Trained drafter: acceptance length 2." in rec["reason"]
    assert "measured by its server" in rec["reason"]  # from the EAGLE-3 launch's own log
    assert "beats the baseline" in rec["reason"]
    report = (run / "report.md").read_text()
    assert "## Long jobs" in report and "acceptance length 2." in report


@pytest.mark.slow  # ~10 s: the recorded Claude session goes through the real SDK again
def test_the_recorded_claude_pipeline_session_replays(tmp_path: Path) -> None:
    session = Path(__file__).parent / "sessions" / "pipeline.jsonl"
    proc = subprocess.run(
        agent("replay", str(session), "--check", "--runs-dir", str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recorded = [json.loads(line) for line in session.read_text().splitlines()]
    ended = {e["name"]: e["exit_code"] for e in recorded if e["type"] == "job_ended"}
    assert ended["check"] == 1 and ended["check-2"] == 0 and ended["convert"] == 0
