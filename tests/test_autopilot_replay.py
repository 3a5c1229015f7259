"""The recorded autopilot session (a real lab campaign, tests/sessions/autopilot/lab.jsonl) replays
identically - and only because the autopilot decides from the recorded numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent.session_replay import replay
from sim.space import default_space
from tools.domain import lab_truth

SESSION = Path(__file__).parent / "sessions" / "autopilot" / "lab.jsonl"


def test_agent_replay_check_passes(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent.cli",
            "replay",
            str(SESSION),
            "--check",
            "--runs-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_the_recorded_campaign_reached_the_optimum() -> None:
    events = [json.loads(line) for line in SESSION.read_text().splitlines()]
    assert events[0]["brain"] == "autopilot"
    done = [e for e in events if e["type"] == "tool_result" and e["name"] == "recommend"]
    rec = done[-1]["data"]["recommendation"]
    _, best = lab_truth.optimum(default_space(), max_tokens=128)
    assert lab_truth.config_value(rec["config"], max_tokens=128) >= 0.98 * best
    assert events[-1]["type"] == "run_finished" and events[-1]["exit_code"] == 0
    todos = [e for e in events if e["type"] == "todo"][-1]["todos"]
    assert {t["status"] for t in todos} <= {"completed", "cancelled"}


async def test_other_numbers_make_another_campaign(tmp_path: Path) -> None:
    lines = SESSION.read_text().splitlines()
    tampered = []
    for line in lines:  # fa3's first screen measured 40 % slower: the autopilot must notice
        e = json.loads(line)
        if e["type"] == "benchmark" and e["flags"].get("--attention-backend") == "fa3":
            e["summary"] = {k: v * 0.6 for k, v in e["summary"].items()}
            line = json.dumps(e)
        tampered.append(line)
    source = tmp_path / "tampered.jsonl"
    source.write_text("\n".join(tampered) + "\n")
    code, run, drift = await replay(source, tmp_path / "runs")
    assert code == 1 or drift is not None
    run.close()
