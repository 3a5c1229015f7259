"""The one-box rule "no server on every interface unless server.allow_public_bind" on every
launch path of the fleet (tools/servers/command.refuse_public_bind, the one check): the run's config
before a cluster or a run folder exists, a trial's command on its node, and run_trial's flags
before a box is taken. Fast: no Ray (the lab cluster's own loopback and token:
tests/test_fleet_ray.py, marker ray)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.session import make_agent
from tests.conftest import ScriptedBrain, tool_turn
from tests.test_run_trial import FakeFleet, tiny, trial_events
from tools.base import ToolError
from tools.domain.config import Config, ServerConfig
from tools.fleet.trial import TrialSpec, run_trial
from tools.servers.command import refuse_public_bind

RULE = "server.allow_public_bind"


@pytest.mark.parametrize(
    "command",
    ["vllm serve m --host 0.0.0.0", "sim --host=::", "x --host 192.168.1.7", "x --host box.lan"],
)
def test_a_public_host_is_refused_in_one_line_unless_allowed(command: str) -> None:
    with pytest.raises(ToolError) as refused:
        refuse_public_bind(command, allowed=False)
    text = str(refused.value)
    assert RULE in text and "\n" not in text
    refuse_public_bind(command, allowed=True)  # the user opted in


@pytest.mark.parametrize(
    "command", ["sim", "x --host 127.0.0.1", "x --host=localhost", "x --host ::1", "x --port 1"]
)
def test_loopback_or_no_host_passes(command: str) -> None:
    refuse_public_bind(command, allowed=False)


def test_a_fleet_run_whose_command_serves_every_interface_is_refused_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text('[server]\nengine = "sim"\ncommand = "python -m sim.server --host 0.0.0.0"\n')
    runs = tmp_path / "runs"
    args = ["run", "--goal", "beat baseline", "--config", str(config), "--runs-dir", str(runs)]
    assert main([*args, "--fleet", "ray", "--boxes", "2"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the brain's notice
    assert last.startswith("agent run: refused: --host 0.0.0.0") and RULE in last
    assert not runs.exists()  # no run folder, no cluster


async def test_run_trial_refuses_a_public_host_flag_before_a_box_is_taken(
    make_run: Any, tmp_path: Path
) -> None:
    fleet = FakeFleet()
    run, config = make_run(tiny(tmp_path))
    turn = tool_turn(("run_trial", {"flags": {"--host": "0.0.0.0"}}))
    agent = make_agent(run, ScriptedBrain([turn]), config, fleet=fleet)
    assert await asyncio.wait_for(agent.run_loop(), 20) == 0
    result = next(e for e in trial_events(run) if e["type"] == "tool_result")
    assert result["is_error"] and RULE in result["text"] and "\n" not in result["text"]
    assert fleet.submitted == []


async def test_a_trial_asked_for_a_public_host_starts_nothing_on_its_node(tmp_path: Path) -> None:
    config = Config(server=ServerConfig(engine="sim", command="sleep 60", port=1), search={})
    spec = TrialSpec("screen-L01-host", config, {"--host": "0.0.0.0"}, [])
    out = await run_trial(spec, tmp_path / "node", node="n1", box="box1")
    assert not out.ok and RULE in out.reason and "\n" not in out.reason
    assert list((tmp_path / "node").iterdir()) == []  # no pid file, no log: nothing launched
