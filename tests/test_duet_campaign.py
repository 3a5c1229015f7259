"""The lab campaign with `[server] side_by_side = true` (issue 46): the autopilot proves its winner
in a duet with the baseline beside it instead of launch pairs - end to end through the CLI, the
real tools and the simulator as real processes. Slow (about 5 minutes): .ci/run's slow stage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.space import default_space
from tests.test_lab_campaign import agent_run, check_run
from tools.domain import lab_truth


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_lab_side_by_side_ends_with_a_duet_and_states_it(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text("[server]\nside_by_side = true\n")
    proc, run = agent_run(tmp_path, "--config", "agent.toml", timeout=1100)
    rec = check_run(proc, run)
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [c for c in calls if c["name"] == "duet"], "no duet was called"
    benchmarks = [e for e in events if e["type"] == "benchmark"]
    assert not [b for b in benchmarks if str(b.get("label", "")).startswith("pair-")]
    sides = {b["duet"]["side"] for b in benchmarks if b.get("duet")}
    assert sides == {"a", "b"}
    # the verdict is the duet's, in its rounds; a win deploys the optimum (within 2 %)
    assert rec["paired"] is not None and "duet round" in rec["paired"]["stated"], rec["paired"]
    _, best = lab_truth.optimum(default_space())
    if rec["verdict"] == "win":
        assert lab_truth.config_value(rec["config"]) >= 0.98 * best, rec["config"]
    else:  # an honest keep: the duet did not establish the optimum
        assert lab_truth.config_value(rec["candidate"]["config"]) >= 0.98 * best
    # the baseline's server beside the winner was stopped: nothing of the run is left up
    kills = [c for c in calls if c["name"] == "kill_server" and c["input"].get("name")]
    assert any(c["input"]["name"] == "duet-base" for c in kills)
    # and the run replays exactly from its log
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    argv = [sys.executable, "-m", "agent.cli", "replay", str(run), "--check"]
    check = subprocess.run(
        [*argv, "--runs-dir", str(tmp_path / "replays")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
