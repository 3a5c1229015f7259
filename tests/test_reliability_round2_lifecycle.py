"""Issue 16 item 6: SIGTERM while the agent starts a server (on the local host and on an SSH
host) leaves no server it launched.

SIGTERM cancels the loop's task (agent/cli/runner.py). The window: the launch command has started
the server but its pid has not come back yet (a slow SSH channel); the run had no record of the
server, so its end killed nothing. The launch is made slow there, the run is cancelled in it."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from agent.session import Limits, make_agent, start, wrap_up
from benchmarks.kill_resume_lab import free_port
from tests.conftest import ScriptedBrain, alive, tool_turn
from tools.domain.config import Config, HostConfig, lab_config

pytest_plugins = ["tests.ssh_fixtures"]
pytestmark = pytest.mark.slow  # a real server start on each host: ~3 s each


@pytest.mark.parametrize("kind", ["local", "asyncssh"])
async def test_sigterm_during_a_server_launch_leaves_no_server(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    work = str(tmp_path / "work")
    if kind == "local":
        host = HostConfig(name="local", workdir=work)
    else:
        host = request.getfixturevalue("asyncssh_server").host_config("box", workdir=work)
    base = lab_config(time_scale=50, port=free_port())
    config = Config(
        hosts=[host],
        server=base.server.model_copy(update={"host": host.name}),
        search=base.search,
    )
    run = start("beat baseline", config, "autopilot", tmp_path / "runs", "r", Limits())
    agent = make_agent(run, ScriptedBrain([tool_turn(("start_server", {}))]), config)
    agent.on_end = lambda status: wrap_up(agent, status)
    assert agent.ctx.hosts is not None
    target = agent.ctx.hosts.get(host.name)
    real = target.start_detached
    launched: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def slow_reply(command: str, log: str, cwd: str | None = None) -> int:
        pid = await real(command, log, cwd)  # the server runs from here on
        launched.set_result(pid)
        await asyncio.sleep(5)  # its pid is still on the way back
        return pid

    target.start_detached = slow_reply  # type: ignore[method-assign]
    task = asyncio.create_task(agent.run_loop())
    pid = await asyncio.wait_for(launched, 60)
    task.cancel()  # what SIGTERM does
    try:
        assert await task == 130
        assert not alive(pid), "the server the agent launched outlived it"
    finally:
        if alive(pid):  # clean up after a failure, not to leave it to the next test
            os.killpg(pid, signal.SIGKILL)
    end = run.state.finished
    assert end is not None and end["status"] == "stopped"
    await agent.ctx.hosts.close()
    run.close()
