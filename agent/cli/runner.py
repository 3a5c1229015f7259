"""Driving a run from the CLI: the terminal view, signals, and the clean-up every run gets."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from agent.interrupts import cancel_on_sigterm
from agent.loop import Agent
from agent.session import (
    Limits,
    config_of,
    make_agent,
    make_brain,
    process_fields,
    start,
    wrap_up,
)
from agent.view.bars import Progress
from state.atomic import is_disk_full
from state.event_types import skipped_note
from state.run import Run, RunError
from tools.domain.config import Config
from tools.domain.goal_slo import with_goal_slo
from tools.hosts.base import HostError
from tools.hosts.sandbox import NO_MASK, NO_SANDBOX


def run_campaign(
    goal: str, config: Config, model: str, runs_dir: Path, run_id: str | None, limits: Limits
) -> int:
    config = with_goal_slo(config, goal)  # "p99 TTFT under 200 ms" in the goal: an SLO objective
    run = start(goal, config, model, runs_dir, run_id, limits)
    print(f"run {run.id}: {run.path}", file=sys.stderr)
    return drive(run, config)


def resume_campaign(path: Path) -> int:
    for name in ("events.jsonl", "run.lock"):  # opened without following links (state/files.py)
        if (path / name).is_symlink():
            raise RunError(
                f"run {path.name}: {name} is a symbolic link, not the run's own file; "
                "nothing was resumed and nothing written through it"
            )
    run = Run.open(path)
    note = skipped_note(run.state.skipped)
    if note is not None:
        print(f"run {run.id}: {note}", file=sys.stderr)
    if not run.state.goal:  # killed between creating the folder and its first event
        run.close()
        raise RunError(
            f"run {run.id} was cut off before it started (no run_started event): "
            f"delete {path} and start it again with `agent run`"
        )
    if run.state.replay_of is not None:  # its brain answered from a recording: nothing to go on
        run.close()
        raise RunError(
            f"run {run.id} is a replay of {run.state.replay_of}, not a campaign: it cannot be "
            "resumed (replay the recording again with `agent replay`)"
        )
    finished = run.state.finished
    if finished and finished["status"] == "finished":
        print(f"run {run.id} already finished: {finished['reason']}", file=sys.stderr)
        return 0
    from agent.fleet.run import fleet_of, resume_fleet_campaign

    fleet = fleet_of(run)
    if run.log.repaired:
        print(f"run {run.id}: {run.log.repaired}", file=sys.stderr)
    try:
        run.append("run_resumed", repaired=run.log.repaired, **process_fields())
        run.sync_todos_file()  # the log wins over a todos.json a crash left behind
    except OSError as err:
        run.close()
        if not is_disk_full(err):
            raise
        print(f"run {run.id}: disk full ({err}): free space, then resume again", file=sys.stderr)
        return 1
    if fleet:  # `agent run --fleet`: the autopilot's controller rebuilds the campaign from the
        # log; a model's loop goes on once what the dead session left is reaped
        try:
            return resume_fleet_campaign(run)
        finally:
            run.close()
    return drive(run, config_of(run), recovering=True)


def drive(run: Run, config: Config, recovering: bool = False) -> int:
    progress = Progress(run.path, lambda: run.state.last_seq)  # ctx.progress for the tools
    agent = make_agent(run, make_brain(run.state.model, config), config, progress=progress)
    view = terminal_view(run, progress)
    run.listeners += [progress.on_event, view]
    agent.on_end = lambda status: wrap_up(agent, status)
    try:
        return asyncio.run(_main(agent, recovering))
    finally:
        view.close()
        run.close()


async def _main(agent: Agent, recovering: bool = False) -> int:
    cancel_on_sigterm()
    try:
        if recovering:  # after a crash: answer cut tool calls, adopt or kill surviving servers
            from agent.recover import recover

            for line in await recover(agent.ctx):
                print(f"run {agent.run.id}: {line}", file=sys.stderr)
        for line in await sandbox_lines(agent):
            print(f"run {agent.run.id}: {line}", file=sys.stderr)
        return await agent.run_loop()
    finally:
        if agent.ctx.hosts is not None:
            await agent.ctx.hosts.close()


PROBE_DEADLINE = 20.0  # seconds for each host to say what its sandbox can do, at the start


async def sandbox_lines(agent: Agent) -> list[str]:
    """Each host's sandbox in one line (issue 47): what it bounds there, or that it has none and
    that what the rules do not allow outright is refused there - probed once per host, here at
    the start (a host that does not answer in time is probed when first used)."""
    ctx = agent.ctx
    if ctx.hosts is None:
        return []
    if not ctx.config.guard.sandbox:
        return [f"no sandbox ([guard] sandbox = false): {NO_SANDBOX}; {NO_MASK}"]
    pool = ctx.hosts

    async def one(name: str) -> str:
        try:
            probed = await asyncio.wait_for(pool.get(name).probed(), PROBE_DEADLINE)
        except TimeoutError:
            why = f"no answer in {PROBE_DEADLINE:g} s"
        except HostError as err:
            why = str(err)
        else:
            return probed.line
        return f"host {name}: its sandbox is not probed yet ({why}); it is when first used"

    return list(await asyncio.gather(*(one(n) for n in pool.names())))


def terminal_view(run: Run, progress: Progress | None = None) -> Any:
    """The live view on a terminal, plain lines otherwise (agent.view.live)."""
    from agent.view.live import terminal_view as make_view

    return make_view(run, progress, sys.stdout)
