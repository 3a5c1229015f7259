"""What a fleet run's earlier controller left, for the one that resumes it: the trials its log
says were placed and never came back (`replay`, the History rebuilt on the way with the live
controller's `learn`), and the servers they left on their nodes, killed (`reap_left`,
`reap_unnamed_left`). The autopilot's controller (agent/fleet/controller.py) and a model's
(agent/fleet/model.py) resume through it; docs/fleet.md, "Resume".
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.brains.autopilot.planner import Experiment
from agent.brains.autopilot.purposes import purpose_of
from state.fleet import first_name
from state.run import Run
from tools.fleet.trial import TrialEnd, reap, reap_unnamed
from tools.trial_outcome import end_of

RESUMED = "the run's controller ended before it came back; placed again on resume"

# learn(step, end, reason, its benchmark events): a trial that came back, into the History
Learn = Callable[[Experiment, TrialEnd, str, list[dict[str, Any]]], None]
# retries(end, attempt): whether a trial that ended so runs again
Retries = Callable[[TrialEnd, int], bool]
Unfinished = tuple[str, Experiment, int]  # (trial, step, attempt)


def experiment_of(event: dict[str, Any]) -> Experiment:
    """The experiment a `trial_started` event placed (ValueError: a purpose the planner has not)."""
    purpose = purpose_of(str(event.get("purpose") or ""))
    if purpose is None:
        raise ValueError(f"trial {event.get('trial')}: unknown purpose {event.get('purpose')!r}")
    return Experiment(
        config=dict(event.get("flags") or {}),
        levels=tuple(int(c) for c in event.get("levels") or ()),
        purpose=purpose,
        why=str(event.get("why") or ""),
        fresh=bool(event.get("fresh", False)),
        period=int(event.get("period") or 0),
        base=dict(event["base"]) if event.get("base") else None,  # a crossover half's other
    )


def replay(
    events: list[dict[str, Any]], learn: Learn, retries: Retries
) -> tuple[int, list[Unfinished]]:
    """A resumed run's History from its log: each trial learned (learn) at its trial_ended
    from the benchmark events recorded before it, in the order they ended - as the live
    controller learned them. A trial started and never ended, cut short by a stop
    (interrupted) or lost and not retried yet is left to place again (the controller's
    place_unfinished). The trials the log placed (first tries), and those left."""
    trials = 0
    open_: dict[str, Unfinished] = {}  # first name -> (trial, step, attempt)
    measured: dict[str, list[dict[str, Any]]] = {}  # trial -> its benchmark events
    for e in events:
        kind = e.get("type")
        if kind == "trial_started":
            trial, attempt = str(e["trial"]), int(e.get("attempt") or 1)
            trials += 1 if attempt == 1 else 0
            open_[first_name(trial)] = (trial, experiment_of(e), attempt)
        elif kind == "benchmark":
            result = {k: v for k, v in e.items() if k not in ("seq", "type")}
            measured.setdefault(str(e.get("server")), []).append(result)
        elif kind == "trial_ended" and not e.get("interrupted"):
            trial = str(e["trial"])
            entry = open_.get(first_name(trial))
            if entry is None or entry[0] != trial:
                continue
            end, reason = end_of(e), str(e.get("reason") or "")
            if retries(end, entry[2]):
                continue  # its next try follows in the log, or is placed on resume
            del open_[first_name(trial)]
            learn(entry[1], end, reason, measured.pop(trial, []))
    return trials, list(open_.values())


async def reap_left(run: Run, fleet: Any, trial: str) -> str:
    """The server a trial of an earlier session of `run` left, killed where its pid file is
    (tools/fleet/trial.reap); what was done, in words. A local cluster (the lab) died with the
    controller that started it, but its nodes' folders are on this machine: reaped here, with
    or without a cluster. A joined cluster outlives the controller: a clean-up task on each node
    alive (RayFleet.clean_up, with the trial's worker first; `fleet` connected); the node that
    ran it answers. The autopilot's resume and a model's (agent/fleet/model.py) both use it."""
    if fleet.config.address == "local":
        root = fleet_workdir(run)
        folders = [root, *sorted(p for p in root.iterdir() if p.is_dir())] if root.is_dir() else []
        for folder in folders:
            left = await reap(folder, trial)
            if left.get("pid"):
                return f"killed the server group {left['pid']} it left"
        return "nothing left of it here"
    clean_up = getattr(fleet, "clean_up", None)
    if clean_up is None:
        return "not cleaned up: this backend cannot run a task on a node"
    texts = [await clean_up(node, box, trial, True) for node, box in fleet.nodes().items()]
    killed = [t for t in texts if "killed" in t]
    return "; ".join(killed) or "no node had anything left of it"


async def reap_unnamed_left(run: Run, fleet: Any, named: set[str]) -> dict[str, str]:
    """The trials whose pid files are still in the run's node folders but that the log does not
    name (`named`: the trials it has): a model's run_trial call whose events the turn's buffer
    held when the controller was killed (agent/tool_batch.py). What each left, killed
    (tools/fleet/trial.reap_unnamed): in the lab's folders on this machine, or by a task on each
    node of a joined cluster (RayFleet.clean_up_unnamed; `fleet` connected). Trial -> words."""
    if fleet.config.address != "local":
        clean_up = getattr(fleet, "clean_up_unnamed", None)
        if clean_up is None:
            return {}
        done, failed = await clean_up(named)
        for line in failed:
            print(f"fleet: {line}", file=sys.stderr)
        return dict(done)
    root = fleet_workdir(run)
    folders = [root, *sorted(p for p in root.iterdir() if p.is_dir())] if root.is_dir() else []
    done = {}
    for folder in folders:
        for trial, left in (await reap_unnamed(folder, named)).items():
            pid = left.get("pid")
            done[trial] = f"killed the server group {pid} it left" if pid else "no server left"
    return done


def fleet_workdir(run: Run) -> Path:
    """Where the trials keep their server logs and pid files (each box's own on a real fleet)."""
    return run.path / "fleet"
