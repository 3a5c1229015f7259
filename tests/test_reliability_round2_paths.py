"""Issue 16 item 1: a run started with a relative runs folder resumes from any working directory
(the server log path and the local host's workdir resolve the same after the config reload)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.session import Limits, config_of, start
from benchmarks.kill_resume_lab import free_port
from state.run import Run
from tools.base import ToolBox, ToolContext
from tools.domain.config import lab_config
from tools.hosts import HostPool
from tools.registry import all_tools

pytestmark = pytest.mark.slow  # three real server starts: ~10 s


async def _start_and_kill(run: Run) -> str:
    config = config_of(run)  # as `agent resume` has it: reloaded from the log
    hosts = HostPool(config)
    ctx = ToolContext(run=run, config=config, hosts=hosts)
    tools = ToolBox(all_tools())
    try:
        result, _ = await tools.call(ctx, "start_server", {})
        assert not result.is_error, result.text
        workdir = await hosts.get().workdir()
        log = str(result.data["log"])
        assert Path(log).is_absolute() and Path(log).is_file()
        assert Path(log).parent == run.path.resolve() / "logs"
    finally:
        if run.state.servers:
            await tools.call(ctx, "kill_server", {})
        await hosts.close()
    return workdir


async def test_a_run_in_a_relative_runs_dir_resumes_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # where "~/campaign" would go
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    base = lab_config(time_scale=50, port=free_port())
    command = base.server.command.replace("--load-seconds 1.5", "--load-seconds 0.2")
    config = base.model_copy(update={"server": base.server.model_copy(update={"command": command})})
    run = start("beat baseline", config, "autopilot", Path("runs"), "rel", Limits())
    first = await _start_and_kill(run)
    run.close()
    assert first == str(project)

    # `agent resume rel` from the same folder: the reloaded config kept the workdir
    again = Run.open(Path("runs") / "rel")
    assert await _start_and_kill(again) == first
    again.close()

    # and from another folder, by path
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    third = Run.open(project / "runs" / "rel")
    assert await _start_and_kill(third) == first
    third.close()
    assert not (tmp_path / "home" / "campaign").exists()
