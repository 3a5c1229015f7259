"""Trials on a Ray cluster: each trial is a Ray task that asks for the trial's resources
(`[fleet] resources`, e.g. {"GPU": 8} or the lab's {"box": 1}), so Ray places it on a node that
has them; the controller keeps the run's one event log and only sees results come back.

A node or worker lost mid-trial is a failed trial with Ray's reason; the controller runs it again
once, pinned to another node (NodeAffinitySchedulingStrategy). Ray's own task retries are off so
that every try is recorded.

`LocalCluster` is the lab: a head and N-1 worker nodes on this machine (ray.cluster_utils),
each with the custom resources {"box": 1, "box_<i>": 1} standing in for one box.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.domain.fleet_config import BOX, FleetConfig
from tools.fleet.trial import TrialOutcome, TrialSpec, reap, run_trial

BOX_PREFIX = f"{BOX}_"


class FleetError(Exception):
    """The fleet cannot be reached or used; one line."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise FleetError("the Ray fleet needs Ray: pip install 'campaign-agent[ray]'") from None
    return ray


def box_of(resources: dict[str, Any], node_id: str) -> str:
    """A node's box name: its box_<name> resource, else the start of its node id."""
    names = sorted(k[len(BOX_PREFIX) :] for k in resources if k.startswith(BOX_PREFIX))
    return f"box{names[0]}" if names else node_id[:8]


def _trial_task(spec: TrialSpec, workdir: str) -> TrialOutcome:
    """What runs on the node: the trial, named after the node it landed on."""
    ray = _ray()
    node = ray.get_runtime_context().get_node_id()
    box = next((box_of(n["Resources"], node) for n in ray.nodes() if n["NodeID"] == node), node[:8])
    return asyncio.run(run_trial(spec, Path(workdir), node=node, box=box))


@dataclass
class Submitted:
    spec: TrialSpec
    ref: Any  # the Ray ObjectRef
    node: str | None  # pinned to this node (a retry), or None: wherever Ray places it
    attempt: int


class LocalCluster:
    """A Ray cluster on this machine with `boxes` nodes (the lab); `shutdown` stops every process
    it started."""

    def __init__(self, boxes: int, object_store_mb: int = 100) -> None:
        from ray.cluster_utils import Cluster

        def node(i: int) -> dict[str, Any]:
            return {
                "num_cpus": 1,
                "resources": {BOX: 1, f"{BOX_PREFIX}{i}": 1},
                "object_store_memory": object_store_mb * 2**20,
            }

        head = {**node(1), "include_dashboard": False}
        self.cluster = Cluster(initialize_head=True, head_node_args=head)
        self.workers = [self.cluster.add_node(**node(i)) for i in range(2, boxes + 1)]
        self.address = self.cluster.address

    def kill_box(self, index: int) -> None:
        """Lose one worker box (index 0 = box 2): its raylet and everything under it die."""
        self.cluster.remove_node(self.workers[index])

    def shutdown(self) -> None:
        self.cluster.shutdown()


class RayFleet:
    """The controller's side: connect, place trials, hand back finished ones."""

    def __init__(self, config: FleetConfig, workdir: Path | None = None) -> None:
        self.config = config
        self.workdir = workdir or Path(tempfile.gettempdir()) / f"campaign-fleet-{os.getuid()}"
        self.local: LocalCluster | None = None
        self.pending: dict[asyncio.Future[Any], Submitted] = {}

    def connect(self, boxes: int | None = None) -> None:
        """Join the configured cluster; with address "local" (or `boxes`), start one here."""
        ray = _ray()
        address = self.config.address
        try:
            if boxes is not None or address == "local":
                self.local = LocalCluster(boxes or self.config.boxes, self.config.object_store_mb)
                address = self.local.address
            elif address == "auto":
                address = os.environ.get("RAY_ADDRESS", "auto")
            ray.init(address=address, log_to_driver=False, logging_level="ERROR")
        except (ConnectionError, RuntimeError, ValueError) as err:
            self.shutdown()
            where = "RAY_ADDRESS or a local `ray start`" if address == "auto" else address
            raise FleetError(f"cannot reach the Ray cluster at {where}: {err}") from None
        self._remote = ray.remote(_trial_task)

    def nodes(self) -> dict[str, str]:
        """Alive nodes that can run a trial: node id -> box name."""
        ray = _ray()
        need = self.config.resources
        return {
            n["NodeID"]: box_of(n["Resources"], n["NodeID"])
            for n in ray.nodes()
            if n["Alive"] and all(n["Resources"].get(k, 0) >= v for k, v in need.items())
        }

    def slots(self) -> int:
        """Trials that can run at once: the configured maximum, or fewer nodes' worth."""
        per_node = min((1.0 / v if k == BOX else 1.0) for k, v in self.config.resources.items())
        return max(1, min(self.config.max_trials, int(len(self.nodes()) * per_node)))

    def submit(self, spec: TrialSpec, avoid: str | None = None, attempt: int = 1) -> None:
        """Place a trial; `avoid`: a node that just lost it (a retry goes elsewhere)."""
        options: dict[str, Any] = {"max_retries": 0, **_resource_options(self.config.resources)}
        node = None
        if avoid is not None:
            others = [n for n in self.nodes() if n != avoid]
            busy = [s.node for s in self.pending.values()]
            if others:
                node = min(others, key=busy.count)
                from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=True)
        ref = self._remote.options(**options).remote(spec, str(self.workdir))
        future = asyncio.ensure_future(_await(ref))
        self.pending[future] = Submitted(spec, ref, node, attempt)

    async def next_done(self) -> tuple[Submitted, TrialOutcome]:
        """The next trial to end, as an outcome: a lost node or worker is a failed one."""
        done, _ = await asyncio.wait(self.pending, return_when=asyncio.FIRST_COMPLETED)
        future = next(iter(done))
        sub = self.pending.pop(future)
        try:
            return sub, future.result()
        except Exception as err:  # Ray's errors: the node died, the worker crashed, ...
            outcome = TrialOutcome(sub.spec.trial_id, ok=False, reason=_lost(err))
            left = await reap(self.workdir, sub.spec.trial_id)  # its server outlived the worker
            outcome.node, outcome.box = str(left.get("node", "")), str(left.get("box", ""))
            if left.get("pid"):
                outcome.cleanup = f"killed the server group {left['pid']} the lost worker left"
            return sub, outcome

    async def close(self) -> None:
        """Stop what was started: the local cluster, and the servers of trials still running
        (a worker that dies leaves its server's session behind)."""
        left = [sub.spec.trial_id for sub in self.pending.values()]
        for future in self.pending:
            future.cancel()
        self.pending.clear()
        self.shutdown()
        for trial in left:
            await reap(self.workdir, trial)

    def shutdown(self) -> None:
        try:
            ray = _ray()
            if ray.is_initialized():
                ray.shutdown()
        finally:
            if self.local is not None:
                self.local.shutdown()
                self.local = None


async def _await(ref: Any) -> TrialOutcome:
    result: TrialOutcome = await ref
    return result


def _resource_options(need: dict[str, float]) -> dict[str, Any]:
    """A trial's request as Ray task options: CPU and GPU have their own keywords."""
    custom = {k: v for k, v in need.items() if k not in ("CPU", "GPU")}
    return {"num_cpus": need.get("CPU", 0), "num_gpus": need.get("GPU", 0), "resources": custom}


def _lost(err: BaseException) -> str:
    """Ray's reason in one line."""
    kind = type(err).__name__
    text = " ".join(str(err).split())
    return f"lost on its node ({kind}): {text[:240]}"
