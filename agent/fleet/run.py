"""A fleet run put together: `agent run --fleet ray [--boxes N]` and `agent resume` of such a
run - the cluster started (or joined) and stopped, SIGTERM, the terminal view, the report and
run_finished around the autopilot's controller (agent/fleet/controller.py); a model's fleet run
is agent/fleet/model.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent.fleet.controller import FleetBackend, FleetCampaign, record_cleanups
from agent.fleet.resume import fleet_workdir
from agent.interrupts import cancel_on_sigterm
from agent.report import write_report
from agent.session import AUTOPILOT, Limits, config_of, start
from agent.view.live import terminal_view
from state.events import read_events
from state.run import Run
from state.secrets import UnresolvedSecret
from tools.base import ToolError
from tools.domain.config import Config, UsageError
from tools.domain.fleet_config import FleetConfig
from tools.domain.goal_slo import with_goal_slo
from tools.fleet.ray_backend import FleetError, Placed, RayFleet
from tools.fleet.trial import launchable
from tools.servers.command import refuse_public_bind


async def run_fleet(
    run: Run,
    config: Config,
    fleet: FleetBackend,
    boxes: int | None,
    events: list[dict[str, Any]] | None = None,
) -> int:
    """Start (or join) the cluster, run the campaign (`events`: resumed from its log), stop what
    was started; the exit code."""
    start = time.monotonic()
    status, code, reason = "error", 1, "internal error"
    try:
        fleet.connect(boxes)
        cancel_on_sigterm()  # a SIGTERM: the cluster and the servers still go
        campaign = FleetCampaign(run, config, fleet, events)
        campaign.supervision.session_start = start  # the minutes budget counts the cluster's start
        code = await campaign.drive()
        status, reason = campaign.status, campaign.reason
    except (KeyboardInterrupt, asyncio.CancelledError):
        status, code, reason = "stopped", 130, "stopped by a signal"
    finally:
        await fleet.close()
        record_cleanups(run, fleet)  # a wedged node's clean-up: done at last, or LEFT
        write_report(run, status)
        run.append(
            "run_finished",
            status=status,
            exit_code=code,
            reason=reason,
            session_minutes=round((time.monotonic() - start) / 60, 4),
        )
    return code


@contextlib.contextmanager
def shown(run: Run) -> Iterator[None]:
    """The terminal view of `agent run` (agent/view/live.py): the boxes and their trials, each
    trial's end, the todo list - live on a terminal, plain lines otherwise."""
    view = terminal_view(run, None, sys.stdout)
    run.listeners.append(view)
    try:
        yield
    finally:
        view.close()


def placed_in(run: Run) -> Placed:
    """`trial_placed {trial, node, box}` as soon as the backend knows where a trial runs: the
    supervisor sees each box's trial while it runs, not only when it ends."""

    def placed(trial: str, node: str, box: str) -> None:
        run.append("trial_placed", trial=trial, node=node, box=box)

    return placed


def run_fleet_campaign(
    goal: str,
    config: Config,
    model: str,
    runs_dir: Path,
    run_id: str | None,
    limits: Limits,
    boxes: int | None,
) -> int:
    """`agent run --fleet ray [--boxes N]`: the fleet from [fleet] (joined), or a local cluster
    of N simulated boxes; the autopilot plans in batches, a model with run_trial
    (agent/fleet/model.py)."""
    config = with_goal_slo(config, goal)  # as run_campaign: the goal's SLO, the objective
    launch_checked(config)
    fleet_config = config.fleet or FleetConfig()
    if boxes is None and config.fleet is None and config.lab:
        boxes = fleet_config.boxes  # the lab without [fleet]: its own simulated boxes
    if boxes is not None:
        fleet_config = fleet_config.model_copy(update={"boxes": boxes, "address": "local"})
        fleet_config = fleet_config.model_copy(update={"max_trials": max(boxes, 1)})
    config = config.model_copy(update={"fleet": fleet_config})
    run = start(goal, config, model, runs_dir, run_id, limits, fleet="ray")
    print(f"run {run.id}: {run.path}", file=sys.stderr)
    # a model's trials log their events within their run_trial call's (agent/tool_batch.py):
    # a placement arriving from outside the call would split them, so only the controller's
    placed = placed_in(run) if model == AUTOPILOT else None
    fleet = RayFleet(fleet_config, fleet_workdir(run), placed)
    try:
        if model != AUTOPILOT:  # a model places its trials itself (run_trial)
            from agent.fleet.model import drive_on_fleet

            return drive_on_fleet(run, config, fleet, boxes)
        with shown(run):
            return asyncio.run(run_fleet(run, config, fleet, boxes))
    except FleetError as err:
        raise UsageError(str(err)) from None
    finally:
        run.close()


def launch_checked(config: Config) -> None:
    """The one-box rules on the fleet, before a cluster or a run folder exists: a configured
    command that serves on every interface is refused unless server.allow_public_bind (each
    trial's command is checked again on its node, flags included); a resumed run's command
    whose secret the environment cannot give back is refused (tools/fleet/trial.launchable).
    One line, exit 2."""
    try:
        refuse_public_bind(config.server.command, config.server.allow_public_bind)
        launchable(config)
    except (ToolError, UnresolvedSecret) as err:
        raise UsageError(str(err)) from None


def fleet_of(run: Run) -> str | None:
    """The fleet engine a run was started on (run_started's `fleet`), None for a one-box run."""
    with run.events_path.open("rb") as f:
        first = f.readline()
    try:
        fleet = json.loads(first).get("fleet")
    except (ValueError, AttributeError):
        return None
    return str(fleet) if fleet else None


def resume_fleet_campaign(run: Run) -> int:
    """`agent resume` of a fleet run: the cluster its recorded [fleet] names started (or joined)
    again. The autopilot's: the History rebuilt from the log, the trials left unfinished placed
    again, and on to the conclusion. A model's: what the dead session left reaped, its cut
    calls answered, and the loop goes on (agent/fleet/model.py). The caller has logged
    run_resumed and closes the run."""
    config = config_of(run)
    launch_checked(config)
    fleet_config = config.fleet or FleetConfig()
    boxes = fleet_config.boxes if fleet_config.address == "local" else None
    print(f"run {run.id}: resuming on the fleet ({boxes or fleet_config.address})", file=sys.stderr)
    if run.state.model != AUTOPILOT:
        from agent.fleet.model import drive_on_fleet

        fleet = RayFleet(fleet_config, fleet_workdir(run), None)  # as run_fleet_campaign's
        try:
            return drive_on_fleet(run, config, fleet, boxes, recovering=True)
        except FleetError as err:
            raise UsageError(str(err)) from None
    events = read_events(run.events_path).events
    fleet = RayFleet(fleet_config, fleet_workdir(run), placed_in(run))
    try:
        with shown(run):
            return asyncio.run(run_fleet(run, config, fleet, boxes, events))
    except FleetError as err:
        raise UsageError(str(err)) from None
