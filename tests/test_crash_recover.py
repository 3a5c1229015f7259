"""agent/recover.py piece by piece: what a resume finds after a crash, with real simulator servers
(the run's record of them, as a killed agent leaves it)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.cli.runner import resume_campaign
from agent.recover import close_dangling_calls, recover
from agent.session import Limits, start
from benchmarks.kill_resume_lab import free_port
from state.events import read_events
from state.run import Run, RunError
from tools.base import INTERRUPTED_PREFIX, ToolBox, ToolContext
from tools.domain.config import Config, HostConfig, lab_config
from tools.hosts import HostPool
from tools.registry import all_tools


def lab(tmp_path: Path, load_seconds: float = 0.3) -> Config:
    base = lab_config(time_scale=50, port=free_port())
    command = base.server.command.replace("--load-seconds 1.5", f"--load-seconds {load_seconds}")
    return Config(
        hosts=[HostConfig(name="local", workdir=str(tmp_path / "work"))],
        server=base.server.model_copy(update={"command": command}),
        search=base.search,
    )


@pytest.fixture
async def crashed(tmp_path: Path) -> AsyncIterator[tuple[ToolContext, Config]]:
    """A run that started a server, then 'crashed': the Run is reopened from its folder, the
    server lives on."""
    config = lab(tmp_path)
    run = start("beat baseline", config, "autopilot", tmp_path / "runs", "r", Limits())
    ctx = ToolContext(run=run, config=config, hosts=HostPool(config))
    result, _ = await ToolBox(all_tools()).call(ctx, "start_server", {})
    assert not result.is_error, result.text
    run.close()  # the agent dies here; its server does not
    await ctx.hosts.close()
    again = Run.open(run.path)
    ctx = ToolContext(run=again, config=config, hosts=HostPool(config))
    yield ctx, config
    if ctx.run.state.servers:
        await ToolBox(all_tools()).call(ctx, "kill_server", {})
    await ctx.hosts.close()
    ctx.run.close()


async def test_a_live_server_is_adopted(crashed: tuple[ToolContext, Config]) -> None:
    ctx, _ = crashed
    record = ctx.run.state.servers["server"]
    lines = await recover(ctx)
    assert lines == [f"server server: still serving on local:{record['port']}, adopted"]
    assert ctx.run.state.servers["server"]["adopted_seq"] == ctx.run.state.last_seq
    result, _ = await ToolBox(all_tools()).call(
        ctx, "run_benchmark", {"concurrency": [1], "requests_per_level": 2, "max_tokens": 8}
    )
    assert not result.is_error, result.text  # the run goes on with it


async def test_a_dead_server_is_recorded_killed(crashed: tuple[ToolContext, Config]) -> None:
    ctx, _ = crashed
    pgid = int(ctx.run.state.servers["server"]["pgid"])
    os.killpg(pgid, signal.SIGKILL)  # the box's OOM killer, say
    # gone once the kernel has run the kills, as recover sees processes (a fixed 0.3 s sleep
    # raced a loaded machine)
    host, deadline = ctx.hosts.get(), time.monotonic() + 60
    while any(p.pgid == pgid for p in await host.processes()):
        assert time.monotonic() < deadline, f"group {pgid} still there 60 s after SIGKILL"
        await asyncio.sleep(0.05)
    (line,) = await recover(ctx)
    assert line.startswith("server server: its processes are gone")
    killed = read_events(ctx.run.events_path).events[-1]
    assert killed["type"] == "server_killed" and "found on resume" in killed["reason"]
    assert ctx.run.state.servers == {}


async def test_a_server_still_loading_is_killed_and_its_port_freed(tmp_path: Path) -> None:
    config = lab(tmp_path, load_seconds=60)
    run = start("beat baseline", config, "autopilot", tmp_path / "runs", "slow", Limits())
    ctx = ToolContext(run=run, config=config, hosts=HostPool(config))
    launch = ToolBox(all_tools()).call(ctx, "start_server", {})
    task = asyncio.create_task(launch)
    while "server" not in run.state.servers:  # server_started is logged at launch
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)
    task.cancel()  # the agent dies mid-load
    with pytest.raises(asyncio.CancelledError):
        await task
    pgid = int(run.state.servers["server"]["pgid"])
    (line,) = await recover(ctx)
    assert "says 503" in line or "not answering" in line, line
    assert "port free: yes" in line and ctx.run.state.servers == {}
    assert not await ctx.hosts.get().group_alive(pgid)  # (a zombie child of this test is dead)
    await ctx.hosts.close()
    run.close()


def test_calls_cut_by_a_crash_are_answered_once(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "r")
    uses = [
        {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"command": "true"}}
        for i in range(3)
    ]
    run.append("message", role="assistant", content=uses)
    run.append("tool_call", id="t0", name="bash", input={})
    run.append("tool_result", id="t0", name="bash", text="exit 0", is_error=False, data={})
    run.append("tool_call", id="t1", name="bash", input={})  # killed while t1 ran
    assert close_dangling_calls(run) == ["t1", "t2"]
    assert close_dangling_calls(run) == []  # a second resume adds nothing
    blocks = run.state.messages[-1]["content"]
    assert [b["tool_use_id"] for b in blocks] == ["t0", "t1", "t2"]
    assert all(b["content"].startswith(INTERRUPTED_PREFIX) for b in blocks[1:])
    assert run.state.current_tool is None
    run.close()


def test_a_run_cut_before_its_first_event_is_explained(tmp_path: Path) -> None:
    Run.create(tmp_path, "early").close()  # killed between the folder and run_started
    with pytest.raises(RunError, match=r"cut off before it started.*agent run"):
        resume_campaign(tmp_path / "early")


async def test_a_briefing_cut_off_is_written_again(tmp_path: Path) -> None:
    config = lab(tmp_path)
    run = Run.create(tmp_path / "runs", "b")
    run.append("run_started", run_id="b", goal="beat baseline", config={})
    ctx = ToolContext(run=run, config=config, hosts=HostPool(config))
    assert await recover(ctx) == ["wrote the briefing that a crash cut off"]
    assert run.state.messages[0]["role"] == "user"
    assert "beat baseline" in run.state.messages[0]["content"][0]["text"]
    await ctx.hosts.close()
    run.close()
