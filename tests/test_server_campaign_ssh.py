"""A whole autopilot campaign with the simulator on a loopback OpenSSH host runs to the end the
same way as on the local host: same tool calls, same recommendation, nothing left running.

The space is small and its differences wide (cuda-graph-max-bs 16 vs 128 is 38 % at C=40,
EAGLE-3 loses 40 % or more at both levels) so that measurement noise on a busy 2-core machine
cannot change a decision; the tool calls are compared without the free text quoting numbers.
The simulator runs at time scale 3, not 10: at 10 the benchmark through the SSH port forward
carried ~6000 tok/s of real time at C=40 and the tunnel, not the server, set the pace - the SSH
run measured cuda-graph-max-bs 128 at +7 % where the local one (and the truth) said +17 %, and
the two campaigns chose differently (issue 16, item 17). At 3 both measure +17 %, floor < 1 %."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from state.events import read_events

pytest_plugins = ["tests.ssh_fixtures"]

CONFIG = """
{hosts}

[server]
engine = "sim"
host = "{host}"
command = "SIM_GPU_DIR={gpus} {python} -m sim {flags}"
port = {port}
ready_timeout_s = 60
kill_timeout_s = 5

[bench]
concurrency = [10, 40]
input_len = 32
max_tokens = 32

[search]
"--cuda-graph-max-bs" = [16, 128]
"--speculative-algorithm" = [false, "EAGLE3"]

[search.baseline]
"--cuda-graph-max-bs" = 16

[objective]
# the same decisions on both hosts: no repeats bought for precision, which would follow the
# machine's load (noise-adaptive measurement is tested in tests/test_strategy_noise.py)
precision = 0.5

[model]
name = "autopilot"
"""


FLAGS = (
    "--time-scale 3 --model-path m --tp 8 --disable-custom-all-reduce --load-seconds 0.3 "
    "--noise 0 --seed 1"
)


def same_call(name: str, inp: dict[str, Any]) -> tuple[str, Any]:
    """A call without the free text that quotes measured numbers (they differ run to run)."""
    if name == "todowrite":
        return name, [(t["id"], t["status"]) for t in inp["todos"]]
    return name, {k: v for k, v in inp.items() if k != "reason"}


def before_pairs(calls: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The calls before the launch that starts the first pair (its benchmark's label `pair-`)."""
    for i, (name, inp) in enumerate(calls):
        if name == "run_benchmark" and str(inp.get("label", "")).startswith("pair-"):
            start = max(j for j in range(i) if calls[j][0] == "start_server")
            return calls[:start]
    return calls


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def campaign(tmp: Path, run_id: str, hosts: str, host: str) -> dict[str, Any]:
    gpus = tmp / f"gpus-{run_id}"
    gpus.mkdir()
    cfg = tmp / f"{run_id}.toml"
    cfg.write_text(
        CONFIG.format(
            hosts=hosts, host=host, gpus=gpus, python=sys.executable, flags=FLAGS, port=free_port()
        )
    )
    code = main(
        [
            "run",
            "--goal",
            "beat baseline",
            "--config",
            str(cfg),
            "--runs-dir",
            str(tmp / "runs"),
            "--run-id",
            run_id,
        ]
    )
    run = tmp / "runs" / run_id
    events = read_events(run / "events.jsonl").events
    calls = [
        same_call(b["name"], b["input"])
        for e in events
        if e["type"] == "message" and e["role"] == "assistant"
        for b in e["content"]
        if b["type"] == "tool_use"
    ]
    return {
        "code": code,
        "calls": calls,
        "events": events,
        "recommendation": json.loads((run / "recommendation.json").read_text())["config"],
        "gpus": list(gpus.glob("*.json")),
    }


@pytest.mark.slow  # two whole campaigns (~45 s): .ci/run's slow stage
def test_campaign_over_ssh_matches_the_local_one(sshd_server: Any, tmp_path: Path) -> None:
    local = campaign(tmp_path, "local", '[[hosts]]\nname = "local"', "local")
    box = sshd_server.host_config("lab", workdir=str(tmp_path / "remote"))
    hosts = (
        f'[[hosts]]\nname = "lab"\naddress = "{box.address}"\n'
        f'identity_file = "{box.identity_file}"\nknown_hosts = "{box.known_hosts}"\n'
        f'workdir = "{box.workdir}"'
    )
    remote = campaign(tmp_path, "ssh", hosts, "lab")

    assert local["code"] == remote["code"] == 0
    # the same decisions up to the launch pairs; how many pairs the verdict needs is read from
    # their measured spread, which a loaded machine moves (the pairs are tested in test_paired.py)
    assert before_pairs(remote["calls"]) == before_pairs(local["calls"])
    assert remote["recommendation"] == local["recommendation"]
    for result in (local, remote):
        kinds = [e["type"] for e in result["events"]]
        assert kinds.count("server_started") == kinds.count("server_ready") >= 2
        for e in result["events"]:
            if e["type"] == "server_killed":
                assert all(e["verified"].values()), e
        assert result["gpus"] == []  # every simulated GPU reservation released
    started = [e for e in remote["events"] if e["type"] == "server_started"]
    assert {e["host"] for e in started} == {"lab"}
    assert all(e["log"].startswith(str(tmp_path / "remote" / "logs" / "ssh")) for e in started)
