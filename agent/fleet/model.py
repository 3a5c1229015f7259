"""A model on a fleet (`agent run --fleet ray --model claude-...`): the normal loop, with the
fleet connected (or the local cluster of --boxes started) before the first turn and closed after
the last, and run_trial among the tools (tools/run_trial.py). The model places trials; several
run_trial calls of one turn run at once on different boxes (agent/tool_batch.py).

Events as on one box, plus `fleet_started {engine, nodes, slots, auth}` and each trial's
`trial_started`, `trial_ended`, `benchmark` (as the autopilot's controller writes them).

`agent resume` of such a run (agent/fleet/run.resume_fleet_campaign) reaps before it goes on:
each trial the dead session left in flight has what it started killed where its pid file is
(agent/fleet/resume.reap_left: the lab's node folders on this machine, a task on each node
of a joined cluster) and is recorded as ended, interrupted, with that clean-up; a trial only its
pid file names (its call's events were in the turn's buffer: agent/tool_batch.py) is reaped too
(`trial_reaped`); the dead lab cluster's own processes are killed as the new one starts
(tools/fleet/lab_cluster.reap_cluster); then the cut tool calls are answered (agent/recover.py)
and the loop goes on.
"""

from __future__ import annotations

import asyncio
import sys

from agent.fleet.controller import record_cleanups, secured
from agent.fleet.resume import reap_left, reap_unnamed_left
from agent.interrupts import cancel_on_sigterm
from agent.loop import Agent
from agent.session import make_agent, make_brain, wrap_up
from agent.view.bars import Progress
from agent.view.live import terminal_view
from state.run import Run
from tools.domain.config import Config
from tools.fleet.ray_backend import FleetError, RayFleet

RESUMED = "interrupted: the run's controller ended while it ran (its server killed on resume)"
UNNAMED = "the run's controller ended while it ran, before its run_trial call's events were written"


def drive_on_fleet(
    run: Run, config: Config, fleet: RayFleet, boxes: int | None, recovering: bool = False
) -> int:
    """The loop with the fleet as the tools' (cli/runner.drive's view, signals and clean-up);
    `recovering`: a resumed run, whose dead session is reaped first (settle, recover)."""
    progress = Progress(run.path, lambda: run.state.last_seq)
    agent = make_agent(
        run, make_brain(run.state.model, config), config, progress=progress, fleet=fleet
    )
    view = terminal_view(run, progress, sys.stdout)
    run.listeners += [progress.on_event, view]
    agent.on_end = lambda status: close_then_wrap_up(agent, fleet, status)
    try:
        return asyncio.run(_main(agent, fleet, boxes, recovering))
    finally:
        view.close()


async def _main(agent: Agent, fleet: RayFleet, boxes: int | None, recovering: bool) -> int:
    try:
        # the lab's trials left their servers on this machine: reaped before a cluster starts
        local = fleet.config.address == "local" or boxes is not None
        if recovering and local:
            await settle(agent, fleet)
        try:
            fleet.connect(boxes)
        except FleetError as err:  # the caller's one line, exit 2
            agent.finish("error", 2, str(err))
            raise
        cancel_on_sigterm()
        if recovering:
            if not local:  # a joined cluster: a clean-up task on each of its nodes
                await settle(agent, fleet)
            from agent.recover import recover

            for line in await recover(agent.ctx):  # the cut run_trial calls answered
                print(f"run {agent.run.id}: {line}", file=sys.stderr)
        nodes, slots = fleet.nodes(), fleet.slots()
        auth = secured(agent.run, fleet)
        agent.run.append("fleet_started", engine="ray", nodes=nodes, slots=slots, auth=auth)
        boxes_named = ", ".join(sorted(nodes.values()))
        agent.note(
            f"The fleet: {len(nodes)} boxes ({boxes_named}); up to {slots} trials at once "
            "(run_trial)."
        )
        return await agent.run_loop()
    finally:
        if agent.ctx.hosts is not None:
            await agent.ctx.hosts.close()
        # closed at the loop's end (close_then_wrap_up); here where the loop never ran (a
        # failed connect) or was cut: what is settled after the log's end is said only
        await fleet.close()
        record_cleanups(agent.run, fleet, logged=False)


async def close_then_wrap_up(agent: Agent, fleet: RayFleet, status: str) -> None:
    """The loop's end, before run_finished: the fleet closed (the servers of trials still
    running killed, the local cluster stopped) and what its wedged nodes' clean-ups did, or
    left, recorded in the log (`trial_cleaned`, `trial_left`) - as the autopilot's controller
    records them - then the one-box wrap-up (servers, report)."""
    try:
        await fleet.close()
    finally:
        record_cleanups(agent.run, fleet)
    await wrap_up(agent, status)


async def settle(agent: Agent, fleet: RayFleet) -> None:
    """The trials the dead session left in flight (the fold's `lost`): what each started killed
    where it ran (reap_left), then each recorded as ended - interrupted, with that clean-up -
    so that the log says how every trial ended, before its run_trial call is answered."""
    run = agent.run
    for trial in list(run.state.fleet.lost if run.state.fleet is not None else []):
        cleanup = await reap_left(run, fleet, trial.name)
        run.append(
            "trial_ended",
            trial=trial.name,
            ok=False,
            end="interrupted",
            reason=RESUMED,
            interrupted=True,
            cleanup=cleanup,
            attempt=trial.attempt,
        )
        print(f"run {run.id}: trial {trial.name}: {RESUMED}; {cleanup}", file=sys.stderr)
    if run.state.fleet is None:
        return
    # a call still waiting for the ones before it to finish kept its events in the turn's
    # buffer, and the kill lost them: its trial ran all the same, and its pid file names it
    known = {t.name for t in run.state.fleet.lost} | {e.trial.name for e in run.state.fleet.ended}
    for name, cleanup in (await reap_unnamed_left(run, fleet, known)).items():
        run.append("trial_reaped", trial=name, reason=UNNAMED, cleanup=cleanup)
        print(f"run {run.id}: trial {name}: {UNNAMED}; {cleanup}", file=sys.stderr)
