"""Issue 16 item 4: a full disk ends the run cleanly - exit 1, reason "disk full", its servers
killed - and `agent resume` after space is freed goes on with nothing lost.

The disk fills by injection at state/'s write layer (`write_all`, the one way state/ writes
bytes: events, run files, the ledger): from a chosen moment every write raises ENOSPC, as a full
disk does. (A small tmpfs would need root here.)"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import state.atomic
import state.events
import state.ledger
from agent.brains.base import Turn, TurnRequest
from agent.loop import Agent
from agent.recover import recover
from agent.session import Limits, make_agent, start, wrap_up
from benchmarks.kill_resume_lab import free_port
from state.events import read_events
from state.run import Run
from tests.conftest import ScriptedBrain, alive, tool_turn
from tools.domain.config import Config, HostConfig, lab_config

pytestmark = pytest.mark.slow  # a real server, killed and started again: ~6 s

PLAN = [{"id": "a", "content": "measure", "status": "in_progress", "priority": "high"}]


class Disk:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = False
        real = state.atomic.write_all

        def write_all(fd: int, data: bytes) -> None:
            if self.full:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real(fd, data)

        for module in (state.atomic, state.events, state.ledger):
            monkeypatch.setattr(module, "write_all", write_all)


class FillsTheDisk(ScriptedBrain):
    """Starts a server, then the disk is full when its next turn is written."""

    def __init__(self, disk: Disk) -> None:
        super().__init__([tool_turn(("start_server", {}), step=1)])
        self.disk = disk

    async def next_turn(self, request: TurnRequest) -> Turn:
        if len(self.requests) == 1:
            self.disk.full = True
        return await super().next_turn(request)


def lab(tmp_path: Path) -> Config:
    base = lab_config(time_scale=50, port=free_port())
    command = base.server.command.replace("--load-seconds 1.5", "--load-seconds 0.2")
    return Config(
        hosts=[HostConfig(name="local", workdir=str(tmp_path / "work"))],
        server=base.server.model_copy(update={"command": command}),
        search=base.search,
    )


async def test_a_full_disk_ends_the_run_and_resume_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    disk = Disk(monkeypatch)
    config = lab(tmp_path)
    run = start("beat baseline", config, "autopilot", tmp_path / "runs", "r", Limits())
    agent = make_agent(run, FillsTheDisk(disk), config)
    agent.on_end = lambda status: wrap_up(agent, status)
    code = await agent.run_loop()
    assert code == 1
    err = capsys.readouterr().err
    assert "disk full" in err and "Traceback" not in err
    pid = int(run.state.servers["server"]["pid"])  # the kill could not be recorded ...
    assert not alive(pid)  # ... but it was done
    before = read_events(run.events_path)
    assert not before.torn  # no half event
    assert agent.ctx.hosts is not None
    await agent.ctx.hosts.close()
    run.close()

    disk.full = False  # space freed: `agent resume r`
    again = Run.open(run.path)
    again.append("run_resumed", repaired=again.log.repaired)
    brain = ScriptedBrain([tool_turn(("todowrite", {"todos": PLAN}), step=2)])
    resumed: Agent = make_agent(again, brain, config)
    resumed.on_end = lambda status: wrap_up(resumed, status)
    assert resumed.ctx.hosts is not None
    lines = await recover(resumed.ctx)
    assert any("its processes are gone" in line for line in lines), lines
    assert await resumed.run_loop() == 0
    after = read_events(again.events_path).events
    assert after[: len(before.events)] == before.events  # nothing lost
    assert [e["seq"] for e in after] == list(range(1, len(after) + 1))  # no gap
    assert again.state.todos == PLAN and again.state.servers == {}
    await resumed.ctx.hosts.close()
    again.close()
