"""`agent run --goal "beat baseline"` end to end: the CLI, the autopilot, the real tools and the
simulator as real processes. Both campaigns are marked slow - the small one takes about 2
minutes, the default lab (the issue's acceptance run) about 5 on 2 cores: .ci/run runs them in its
own stage (`pytest -m slow`), the README's `pytest -q` leaves them out."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sim import truth
from sim.space import default_space
from tools.domain import lab_truth

SMALL = """
[server]
engine = "sim"
port = {port}

[bench]
concurrency = [1, 10, 100]
max_tokens = 64

[search]
"--attention-backend" = ["flashinfer", "fa3"]
"--cuda-graph-max-bs" = [128, 256]
"--speculative-algorithm" = [false, "EAGLE3"]
"--speculative-num-steps" = [1, 3]
"--speculative-eagle-topk" = [1]
"--speculative-num-draft-tokens" = [2, 4]

[search.requires]
"--speculative-num-steps" = {{"--speculative-algorithm" = "EAGLE3"}}
"--speculative-eagle-topk" = {{"--speculative-algorithm" = "EAGLE3"}}
"--speculative-num-draft-tokens" = {{"--speculative-algorithm" = "EAGLE3"}}

[search.baseline]
"--attention-backend" = "flashinfer"
"--cuda-graph-max-bs" = 128
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def agent_run(
    tmp_path: Path, *args: str, timeout: float
) -> tuple[subprocess.CompletedProcess[str], Path]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    runs = tmp_path / "runs"
    argv = [sys.executable, "-m", "agent.cli", "run", "--goal", "beat baseline"]
    child = subprocess.Popen(
        [*argv, "--runs-dir", str(runs), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        out, err = child.communicate(timeout=timeout)
    except BaseException:  # a timeout (ours or pytest's): SIGTERM, so the agent kills its servers
        child.terminate()
        child.communicate(timeout=60)
        raise
    proc = subprocess.CompletedProcess(child.args, child.returncode, out, err)
    folders = [p for p in runs.iterdir() if p.is_dir()] if runs.is_dir() else []
    assert len(folders) == 1, proc.stderr[-2000:]
    return proc, folders[0]


def check_run(proc: subprocess.CompletedProcess[str], run: Path) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "using the autopilot brain" in proc.stderr
    todos = json.loads((run / "todos.json").read_text())["todos"]
    assert todos and {t["status"] for t in todos} <= {"completed", "cancelled"}
    assert (run / "report.md").is_file()
    rec: dict[str, Any] = json.loads((run / "recommendation.json").read_text())
    assert rec["value"] > 0 and rec["baseline_value"] > 0
    assert "--port" in rec["command"]
    return rec


def check_pick(rec: dict[str, Any], value: Callable[[dict[str, Any]], float], best: float) -> None:
    """The pick against the simulator's truth. A claimed win deploys the optimum (within 2 %).
    A run that keeps the baseline is right only for an honest reason: it found the optimum and its
    launch pairs did not establish it (a loaded box), or its noise floor is at least the optimum's
    true gain (the noise hid it)."""
    why = (rec["verdict"], rec["noise_floor"], rec.get("paired", {}).get("stated"), rec["config"])
    if rec["verdict"] == "win":
        assert value(rec["config"]) >= 0.98 * best, why
        return
    truth_gain = best / value(rec["config"]) - 1
    found = value(rec["candidate"]["config"]) >= 0.98 * best
    assert found or rec["noise_floor"] >= truth_gain, why


@pytest.mark.slow  # a whole small campaign (~2 min): .ci/run's slow stage
def test_a_small_lab_campaign_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(SMALL.format(port=free_port()))
    proc, run = agent_run(tmp_path, "--config", "agent.toml", timeout=280)
    rec = check_run(proc, run)
    import tomllib

    space = tomllib.loads(SMALL.format(port=1))["search"]
    levels = [1, 10, 100]
    _, best = lab_truth.optimum(space, levels=levels, max_tokens=64)
    check_pick(rec, lambda c: lab_truth.config_value(c, levels=levels, max_tokens=64), best)


@pytest.mark.slow
@pytest.mark.timeout(1000)  # about 5 minutes; the target is under 10
def test_the_default_lab_campaign(tmp_path: Path) -> None:
    proc, run = agent_run(tmp_path, timeout=900)
    rec = check_run(proc, run)
    _, best = lab_truth.optimum(default_space())
    check_pick(rec, lab_truth.config_value, best)
    # one figure: the noise floor that recommendation.json states is the one report.md and the
    # final screen print, everywhere they print the objective's floor
    assert rec["noise_floor"] is not None
    stated = f"{100 * rec['noise_floor']:.1f}"
    report = (run / "report.md").read_text()
    # the objective's floor, not the per-level one the conclusion's cost line names beside it
    # ("noise floor 3.3% per level, 1.2% on the objective")
    objective_floor = r"noise floor (?:of the objective: \*\*)?(\d+\.\d) ?%(?! per level)"
    in_report = re.findall(objective_floor, report)
    # the final screen (from the run's end on): the narration before it, now printed whole, says
    # the floor as it stood at each step (3.9 % after the first A/A pair, 1.4 % at the end)
    final = proc.stdout[proc.stdout.rfind("] finished: ") :]
    on_screen = re.findall(objective_floor, final)
    assert in_report and on_screen, (report[-2000:], proc.stdout[-2000:])
    assert set(in_report) == set(on_screen) == {stated}, (in_report, on_screen, stated)
    if len(rec["policy"]) >= 2:  # the crossover between the policy's configurations
        low, high = rec["policy"][0]["config"], rec["policy"][-1]["config"]
        levels = [1, 2, 5, 10, 30, 70, 100, 250]
        a, b = truth.throughput(low, levels), truth.throughput(high, levels)
        real = next(c for c in levels if b[c] >= a[c])
        assert abs(levels.index(rec["crossover"][-1]) - levels.index(real)) <= 1
