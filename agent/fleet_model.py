"""A model on a fleet (`agent run --fleet ray --model claude-...`): the normal loop, with the
fleet connected (or the local cluster of --boxes started) before the first turn and closed after
the last, and run_trial among the tools (tools/run_trial.py). The model places trials; several
run_trial calls of one turn run at once on different boxes (agent/tool_batch.py).

Events as on one box, plus `fleet_started {engine, nodes, slots, auth}` and each trial's
`trial_started`, `trial_ended`, `benchmark` (as the autopilot's controller writes them).
"""

from __future__ import annotations

import asyncio
import sys

from agent.fleet_controller import secured
from agent.interrupts import cancel_on_sigterm
from agent.loop import Agent
from agent.session import make_agent, make_brain, wrap_up
from agent.view.bars import Progress
from agent.view.live import terminal_view
from state.run import Run
from tools.domain.config import Config
from tools.fleet.ray_backend import FleetError, RayFleet


def drive_on_fleet(run: Run, config: Config, fleet: RayFleet, boxes: int | None) -> int:
    """The loop with the fleet as the tools' (cli/runner.drive's view, signals and clean-up)."""
    progress = Progress(run.path, lambda: run.state.last_seq)
    agent = make_agent(
        run, make_brain(run.state.model, config), config, progress=progress, fleet=fleet
    )
    view = terminal_view(run, progress, sys.stdout)
    run.listeners += [progress.on_event, view]
    agent.on_end = lambda status: wrap_up(agent, status)
    try:
        return asyncio.run(_main(agent, fleet, boxes))
    finally:
        view.close()


async def _main(agent: Agent, fleet: RayFleet, boxes: int | None) -> int:
    try:
        try:
            fleet.connect(boxes)
        except FleetError as err:  # the caller's one line, exit 2
            agent.finish("error", 2, str(err))
            raise
        cancel_on_sigterm()
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
        await fleet.close()  # the servers of trials still running, the local cluster
