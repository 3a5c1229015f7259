"""Trials on a Ray cluster: each trial is a Ray task that asks for the trial's resources
(`[fleet] resources`, e.g. {"GPU": 8} or the lab's {"box": 1}), so Ray places it on a node that
has them; the controller keeps the run's one event log and only sees results come back.

A node or worker lost mid-trial is a failed trial with Ray's reason; the controller runs it again
once, pinned to another node (NodeAffinitySchedulingStrategy). Ray's own task retries are off so
that every try is recorded.

Clean-up happens on the node: a trial's files (log, pid file) are in that node's own folder
(`node_dir`), so whatever a lost worker left behind is killed by a small task pinned to the node
(hard NodeAffinitySchedulingStrategy) that runs `reap` there. The controller knows the node because
the trial task is a streaming generator whose first item is where it runs: with backpressure 1 it
does not go on (start the server) before the controller has taken that item, so the controller
knows the node of every trial that can have a server, even when the worker dies. A node that is
gone took its processes with it (in the lab `LocalCluster.kill_box` kills its servers itself).

A clean-up that gets no answer in `reap_timeout_s` (a wedged node: alive, its raylet runs
nothing) is owed, not given up: its task stays submitted and runs when the node answers again;
each of the controller's waits collects what came back (`settled`: `trial_cleaned`), a task that
failed on a node still alive is submitted again, and at `close` the owed ones get one more
`reap_timeout_s`. One that never ran is named LEFT (`trial_left`: box, node, the server's group
and port where this machine can read them, the command to kill it by hand). A node Ray declared
dead while its clean-up waited is not taken to have taken its processes with it: a raylet that
stopped answering is not a machine that went down.

The lab (`LocalCluster`, simulated boxes on this machine) is tools/fleet/lab_cluster.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.domain.fleet_config import BOX, FleetConfig
from tools.fleet import FleetError
from tools.fleet.lab_cluster import BOX_PREFIX, LOOPBACK, LocalCluster, ray_core
from tools.fleet.trial import (
    LOST,
    TrialOutcome,
    TrialSpec,
    node_dir,
    read_pidfile,
    reap,
    reap_unnamed,
    run_trial,
)
from tools.hosts.local import group_running

DOCS = "docs/fleet.md, 'A cluster of your own: authentication'"


Placed = Callable[[str, str, str], None]  # (trial, node, box): where a trial runs


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


def _here() -> tuple[str, str]:
    """This task's node id and box name."""
    ray = _ray()
    node = ray.get_runtime_context().get_node_id()
    box = next((box_of(n["Resources"], node) for n in ray.nodes() if n["NodeID"] == node), node[:8])
    return node, box


def _trial_task(spec: TrialSpec, workdir: str) -> Iterator[dict[str, str] | TrialOutcome]:
    """What runs on the node (a streaming generator, backpressure 1): first where it runs - the
    task goes on only once the controller has taken it - then the trial, in the node's folder."""
    node, box = _here()
    yield {"node": node, "box": box}
    yield asyncio.run(run_trial(spec, node_dir(Path(workdir), node), node=node, box=box))


def _reap_task(workdir: str, trial_id: str, stop_worker: bool) -> dict[str, Any]:
    """Pinned to the trial's node: what the trial left in the node's folder, killed there; with
    the node and box that did it."""
    node, box = _here()
    left = asyncio.run(reap(node_dir(Path(workdir), node), trial_id, stop_worker))
    return {**left, "by_node": node, "by_box": box}


def _reap_unnamed_task(workdir: str, named: list[str]) -> dict[str, Any]:
    """Pinned to a node: the trials its folder has pid files of but the log does not name,
    reaped there (tools/fleet/trial.reap_unnamed); with the node and box that did it."""
    node, box = _here()
    left = asyncio.run(reap_unnamed(node_dir(Path(workdir), node), set(named)))
    return {"left": left, "by_node": node, "by_box": box}


@dataclass
class Submitted:
    spec: TrialSpec
    ref: Any  # Ray's ObjectRefGenerator: where the trial runs, then its outcome
    node: str | None  # pinned to this node (a retry), or None: wherever Ray places it
    attempt: int
    on: str | None = None  # the node the trial reported it runs on, before its server starts
    box: str = ""  # that node's box
    deadline: float = math.inf  # time.monotonic() by which it is back, or cancelled and failed


@dataclass
class Owed:
    """A clean-up whose task got no answer (a wedged node): awaited again, resubmitted when it
    failed on a node still alive."""

    trial: str
    node: str
    box: str
    stop_worker: bool
    task: asyncio.Future[Any]
    dead: str = ""  # Ray declared the node dead while it waited: it will never run
    failed: str = ""  # why its last try failed on the node (it was sent again)


@dataclass
class Cleaned:
    """An owed clean-up, settled: done at last (`text`), or LEFT at the run's end."""

    trial: str
    node: str
    box: str
    text: str
    left: bool = False
    pgid: int | None = None  # the server's process group, where this machine can read it
    port: int | None = None
    kill: str = ""  # the command that kills it by hand, on its box

    def event(self) -> dict[str, Any]:
        """`trial_cleaned {trial, node, box, cleanup}` or `trial_left {trial, node, box,
        reason, pgid, port, kill}`: its fields."""
        where = {"trial": self.trial, "node": self.node, "box": self.box}
        if not self.left:
            return {**where, "cleanup": self.text}
        return {**where, "reason": self.text, "pgid": self.pgid, "port": self.port,
                "kill": self.kill}  # fmt: skip


class RayFleet:
    """The controller's side: connect, place trials, hand back finished ones."""

    def __init__(
        self, config: FleetConfig, workdir: Path | None = None, placed: Placed | None = None
    ) -> None:
        self.config = config
        self.workdir = workdir or Path(tempfile.gettempdir()) / f"campaign-fleet-{os.getuid()}"
        self.local: LocalCluster | None = None
        self.pending: dict[asyncio.Future[Any], Submitted] = {}
        self.placed = placed  # told where each trial runs, once it does (before its server)
        self.auth = ""  # one line: whether the cluster asks for a token (after connect)
        self.reap_timeout_s = config.reap_timeout_s
        self.owed: dict[tuple[str, str], Owed] = {}  # (trial, node): clean-ups not answered yet
        self.done: list[Cleaned] = []  # owed ones settled, not yet handed to the controller

    def connect(self, boxes: int | None = None) -> None:
        """Join the configured cluster; with address "local" (or `boxes`), start one here."""
        ray = _ray()
        address = self.config.address
        try:
            if boxes is not None or address == "local":
                boxes = boxes or self.config.boxes
                self.local = LocalCluster(boxes, self.config.object_store_mb, self.workdir)
                address = self.local.address
            elif address == "auto":
                address = os.environ.get("RAY_ADDRESS", "auto")
            ray.init(address=address, log_to_driver=False, logging_level="ERROR")
        except (ConnectionError, RuntimeError, ValueError) as err:
            self.shutdown()
            where = "RAY_ADDRESS or a local `ray start`" if address == "auto" else address
            if _refused_for_token(err):
                raise FleetError(
                    f"the Ray cluster at {where} asks for a token: set RAY_AUTH_MODE=token and "
                    "RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) for the agent"
                ) from None
            raise FleetError(f"cannot reach the Ray cluster at {where}: {err}") from None
        self._remote = ray.remote(_trial_task)
        self._reaper = ray.remote(_reap_task)
        self._unnamed_reaper = ray.remote(_reap_unnamed_task)
        self.auth = self._auth(address)

    @property
    def token(self) -> str | None:
        """The token of the cluster this fleet started (None on a joined one): a secret."""
        return self.local.token if self.local is not None else None

    def _auth(self, address: str) -> str:
        """Whether the cluster asks for a token, in one line. A joined cluster let this agent in:
        without a token of its own (RAY_AUTH_MODE is not token here), it has no authentication."""
        if self.local is not None:
            return (
                f"a local cluster of {len(self.nodes())} boxes on {LOOPBACK} only, with token "
                "authentication (a token generated for it)"
            )
        raylet = ray_core()
        if raylet.get_authentication_mode() == raylet.AuthenticationMode.TOKEN:
            return f"joined {address} with token authentication (RAY_AUTH_MODE=token)"
        return (
            f"joined {address}, which has no authentication: it let this agent in without a "
            f"token, as it would anyone who reaches it; turn it on: {DOCS}"
        )

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

    def submit(
        self, spec: TrialSpec, avoid: str | None = None, attempt: int = 1, pin: str | None = None
    ) -> None:
        """Place a trial; `avoid`: a node that just lost it (a retry goes elsewhere); `pin`: the
        node it must run on (a launch pair's: a comparison across boxes is not a pair)."""
        options: dict[str, Any] = {"max_retries": 0, **_resource_options(self.config.resources)}
        options |= {"num_returns": "streaming", "_generator_backpressure_num_objects": 1}
        node = None
        if pin is not None and avoid is None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            node = pin  # hard: waits for that node's slot; a lost node fails it (a retry avoids)
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        if avoid is not None:
            others = [n for n in self.nodes() if n != avoid]
            busy = [s.on or s.node for s in self.pending.values()]
            if others:
                node = min(others, key=busy.count)
                from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=True)
        stream = self._remote.options(**options).remote(spec, str(self.workdir))
        deadline = time.monotonic() + self.config.trial_timeout_min * 60
        sub = Submitted(spec, stream, node, attempt, deadline=deadline)
        self.pending[asyncio.ensure_future(_follow(stream, sub, self.placed))] = sub

    async def wait(self, trial_id: str) -> tuple[Submitted, TrialOutcome]:
        """This trial's end (run_trial: each call awaits its own, several at once)."""
        return await self.next_done(trial_id)

    async def next_done(self, trial_id: str | None = None) -> tuple[Submitted, TrialOutcome]:
        """The next trial to end (or the one named), as an outcome: a lost node or worker is a
        failed one."""
        self._collect()
        waiting = [f for f, s in self.pending.items() if trial_id in (None, s.spec.trial_id)]
        if not waiting:
            raise FleetError(f"no trial {trial_id or 'at all'} in flight")
        while True:
            first = min(self.pending[f].deadline for f in waiting)
            timeout = None if first == math.inf else max(0.0, first - time.monotonic())
            done, _ = await asyncio.wait(
                waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if done:
                break
            late = [f for f in waiting if self.pending[f].deadline <= time.monotonic()]
            if late:
                return await self.past_deadline(late[0])
        future = next(iter(done))
        sub = self.pending.pop(future)
        try:
            return sub, future.result()
        except Exception as err:  # Ray's errors: the node died, the worker crashed, ...
            node, box = sub.on or "", sub.box
            outcome = TrialOutcome(sub.spec.trial_id, False, _lost(err), "lost", node, box)
            # its server outlived the worker (in a session of its own): killed on its node
            outcome.cleanup = await self.clean_up(sub.on, box, sub.spec.trial_id)
            return sub, outcome

    async def past_deadline(self, future: asyncio.Future[Any]) -> tuple[Submitted, TrialOutcome]:
        """A trial not back by its deadline: its task cancelled, what it left on its node killed
        (its worker first), and failed with the reason - not lost: it does not run again."""
        future.cancel()
        sub = self.pending.pop(future)
        with contextlib.suppress(Exception):  # a task already gone, or never placed
            _ray().cancel(sub.ref, force=True)
        minutes = self.config.trial_timeout_min
        why = f"not back within {minutes:g} min (fleet.trial_timeout_min): cancelled"
        out = TrialOutcome(sub.spec.trial_id, False, why, "failed", sub.on or "", sub.box)
        out.cleanup = await self.clean_up(sub.on, sub.box, sub.spec.trial_id, stop_worker=True)
        return sub, out

    async def clean_up(
        self, node: str | None, box: str, trial_id: str, stop_worker: bool = False
    ) -> str:
        """What a trial left on its node, killed by a task pinned there (`reap`, with the
        trial's worker first when `stop_worker`); the outcome's `cleanup`, naming the node that
        did it. No task when the node is unknown (the trial was lost before it said where it
        runs, so before it started a server) or gone (its processes went with it). A task not
        answered in `reap_timeout_s` is owed: done when the node answers (`settled`)."""
        if node is None:
            return "nothing to clean up: the trial was lost before it named its node (no server)"
        where = f"{box or node[:8]} (node {node[:12]})"
        try:
            if node not in self._alive():
                return self._gone(node, box, trial_id, stop_worker)
            task = asyncio.ensure_future(_await(self._reap_on(node, trial_id, stop_worker)))
            answered, _ = await asyncio.wait({task}, timeout=self.reap_timeout_s)
            if not answered:
                self.owed[(trial_id, node)] = Owed(trial_id, node, box, stop_worker, task)
                return (
                    f"could not clean up on {where} yet: no answer in {self.reap_timeout_s:g} s "
                    "(fleet.reap_timeout_s); done when the node answers, named left at the "
                    "run's end if it never does"
                )
            left: dict[str, Any] = task.result()
        except Exception as err:  # the node died meanwhile (NodeDiedError, unschedulable, ...)
            with contextlib.suppress(Exception):
                if node not in self._alive():
                    return self._gone(node, box, trial_id, stop_worker)
            return f"could not clean up on {where}: {_ray_reason(err)}"
        return _reaped(left, stop_worker)

    def _gone(self, node: str, box: str, trial_id: str, stop_worker: bool) -> str:
        """A node Ray no longer counts alive. A machine that went down took its processes with
        it; a raylet that only stopped answering (a wedged node Ray declared dead) did not: its
        server runs on. In the lab its group is looked at on this machine; elsewhere it cannot
        be, so the trial is owed and named LEFT at the run's end, with the command to check."""
        where = f"{box or node[:8]} (node {node[:12]})"
        gone = f"{where} is gone: its processes went with it"
        dead = "Ray declared the node dead"
        if self.local is not None:
            info = read_pidfile(node_dir(self.workdir, node) / f"{trial_id}.json") or {}
            pid = int(info.get("pid") or 0)
            if not pid or not group_running(pid):
                return gone
            dead += f", but its server's group {pid} still runs on this machine"
        else:
            dead += " (its server runs on if only its raylet stopped)"
        task: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        task.cancel()  # nothing to await: no task runs on a dead node
        self.owed[(trial_id, node)] = Owed(trial_id, node, box, stop_worker, task, dead=dead)
        return f"could not clean up on {where}: {dead}; named left at the run's end"

    def _reap_on(self, node: str, trial_id: str, stop_worker: bool) -> Any:
        """The clean-up task, pinned to `node` (hard: it runs there or not at all)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        pinned = NodeAffinitySchedulingStrategy(node, soft=False)
        options = {"num_cpus": 0, "max_retries": 0, "scheduling_strategy": pinned}
        return self._reaper.options(**options).remote(str(self.workdir), trial_id, stop_worker)

    def _collect(self) -> None:
        """The owed clean-ups that came back since the last look, into `done` (each once); one
        that failed on a node still alive submitted again; one whose node Ray declared dead
        kept, to be named left at the run's end. Cheap: it waits for nothing."""
        for key, owed in list(self.owed.items()):
            if owed.dead or not owed.task.done():
                continue
            try:
                left: dict[str, Any] = owed.task.result()
            except Exception as err:  # the node died, or the task failed on it
                alive = False
                with contextlib.suppress(Exception):
                    alive = owed.node in self._alive()
                if alive:  # asked again: it runs when the node can run it
                    owed.failed = _ray_reason(err)
                    ref = self._reap_on(owed.node, owed.trial, owed.stop_worker)
                    owed.task = asyncio.ensure_future(_await(ref))
                else:
                    owed.dead = f"Ray declared the node dead while it waited ({_ray_reason(err)})"
                continue
            del self.owed[key]
            text = f"done after it got no answer at first: {_reaped(left, owed.stop_worker)}"
            self.done.append(Cleaned(owed.trial, owed.node, owed.box, text))

    def settled(self) -> list[Cleaned]:
        """The owed clean-ups settled since the last call (done at last, or LEFT after `close`),
        each handed over once: the controller records them (`trial_cleaned`, `trial_left`)."""
        self._collect()
        out, self.done = self.done, []
        return out

    async def _settle(self) -> None:
        """At the run's end: the owed clean-ups get one more `reap_timeout_s`; what never ran is
        LEFT, named with what this machine can tell of it (the lab's node folders are here)."""
        waiting = [o.task for o in self.owed.values() if not o.dead]
        if waiting:
            await asyncio.wait(waiting, timeout=self.reap_timeout_s)
        self._collect()
        for owed in self.owed.values():
            owed.task.cancel()
            why = owed.dead or (
                f"its clean-up got no answer from the node by the run's end (each wait "
                f"{self.reap_timeout_s:g} s, fleet.reap_timeout_s)"
            )
            if owed.failed and not owed.dead:
                why += f"; a try failed there: {owed.failed}"
            self.done.append(self._left(owed, why))
        self.owed.clear()

    def _left(self, owed: Owed, why: str) -> Cleaned:
        """An owed clean-up named LEFT: the server's group and port from its pid file where this
        machine can read it (the lab), else the command reads the pid file on its box."""
        pidfile = node_dir(self.workdir, owed.node) / f"{owed.trial}.json"
        info = read_pidfile(pidfile) if self.local is not None else None
        pgid = int(info["pid"]) if info and info.get("pid") else None
        port = int(info["port"]) if info and info.get("port") else None
        box = owed.box or owed.node[:8]
        if pgid is not None:
            kill = f"on {box}: kill -KILL -- -{pgid}"
        else:
            read = "import json,sys; print(json.load(open(sys.argv[1]))['pid'])"
            kill = f'on {box}: kill -KILL -- -"$(python3 -c "{read}" {pidfile})"'
        text = f"LEFT on {box} (node {owed.node[:12]}): {why}"
        return Cleaned(owed.trial, owed.node, owed.box, text, True, pgid, port, kill)

    async def clean_up_unnamed(self, named: set[str]) -> tuple[dict[str, str], list[str]]:
        """On each node alive, a task that reaps the trials its folder has pid files of but
        `named` (the run's log) does not: a trial a killed controller placed and never recorded.
        (trial -> what was done, naming the node; a line per node that could not look)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        done: dict[str, str] = {}
        failed: list[str] = []
        for node, box in self.nodes().items():
            pinned = NodeAffinitySchedulingStrategy(node, soft=False)
            options = {"num_cpus": 0, "max_retries": 0, "scheduling_strategy": pinned}
            ref = self._unnamed_reaper.options(**options).remote(str(self.workdir), sorted(named))
            where = f"{box} (node {node[:12]})"
            try:
                got: dict[str, Any] = await asyncio.wait_for(_await(ref), self.reap_timeout_s)
            except TimeoutError:
                failed.append(f"could not look on {where}: no answer in {self.reap_timeout_s:g} s")
                continue
            except Exception as err:  # the node died meanwhile, unschedulable, ...
                failed.append(f"could not look on {where}: {_ray_reason(err)}")
                continue
            for trial, left in got["left"].items():
                pid = left.get("pid")
                what = f"killed the server group {pid} it left" if pid else "no server left"
                done[trial] = f"{where}: {what}"
        return done, failed

    def _alive(self) -> set[str]:
        return {n["NodeID"] for n in _ray().nodes() if n["Alive"]}

    async def close(self) -> dict[str, str]:
        """Stop what was started: the servers of trials still running, each killed (with its
        worker, so that it starts nothing more) by a task on its node before the cluster goes -
        a worker that dies leaves its server's session behind, on a joined cluster and in the
        lab alike - then the local cluster. The owed clean-ups get one more `reap_timeout_s`
        first; those still owed are LEFT (`settled` hands them over). Trial -> what the clean-up
        of a trial in flight did."""
        left = list(self.pending.values())
        for future in self.pending:
            future.cancel()
        self.pending.clear()
        done: dict[str, str] = {}
        try:
            if self.owed:  # a dead node's needs no cluster to be named left
                await self._settle()
            started = [s for s in left if s.on is not None]  # the others have no server
            if started and _ray().is_initialized():
                texts = await asyncio.gather(
                    *(self.clean_up(s.on, s.box, s.spec.trial_id, True) for s in started)
                )
                done = {s.spec.trial_id: text for s, text in zip(started, texts, strict=True)}
        finally:
            self.shutdown()
            self._after_lab()
        return done

    def _after_lab(self) -> None:
        """The lab's shutdown kills every process of its cluster, the servers its trials started
        included (LocalCluster.shutdown): a LEFT server it killed is said so, not left."""
        for i, c in enumerate(self.done):
            if c.left and c.pgid is not None and not group_running(c.pgid):
                text = (f"killed with the lab's cluster at its shutdown (its clean-up task got no "
                        f"answer from {c.box or c.node[:8]})")  # fmt: skip
                self.done[i] = Cleaned(c.trial, c.node, c.box, text)

    def shutdown(self) -> None:
        try:
            with contextlib.suppress(FleetError):  # no Ray installed: none of it was started
                ray = _ray()
                if ray.is_initialized():
                    ray.shutdown()
        finally:
            if self.local is not None:
                self.local.shutdown()
                self.local = None


async def _await(ref: Any) -> Any:
    return await ref


def _reaped(left: dict[str, Any], stop_worker: bool) -> str:
    """What a clean-up task did, in words, naming the node that did it."""
    by = f"{left['by_box']} (node {left['by_node'][:12]})"
    if left.get("pid"):
        whose = "a trial still running" if stop_worker else "the lost worker"
        found = " (no pid file named it: found by its mark)" if left.get("unnamed") else ""
        return f"{by} killed the server group {left['pid']} {whose} left{found}"
    if left.get("worker"):
        return f"{by}: no server to kill (the trial had not started one)"
    return f"{by}: nothing left (the trial had cleaned up)"
    return True


async def _follow(stream: Any, sub: Submitted, placed: Placed | None) -> TrialOutcome:
    """A trial's stream: where it runs (noted on `sub` at once: the task waits for that), then
    its outcome."""
    where: dict[str, str] = await (await stream.__anext__())
    sub.on, sub.box = where["node"], where["box"]
    if placed is not None:
        placed(sub.spec.trial_id, sub.on, sub.box)
    outcome: TrialOutcome = await (await stream.__anext__())
    return outcome


def _resource_options(need: dict[str, float]) -> dict[str, Any]:
    """A trial's request as Ray task options: CPU and GPU have their own keywords."""
    custom = {k: v for k, v in need.items() if k not in ("CPU", "GPU")}
    return {"num_cpus": need.get("CPU", 0), "num_gpus": need.get("GPU", 0), "resources": custom}


def _refused_for_token(err: BaseException) -> bool:
    """Ray's AuthenticationError somewhere under the ConnectionError ray.init raised."""
    seen: BaseException | None = err
    for _ in range(8):  # a chain of causes, not a cycle
        if seen is None:
            return False
        if type(seen).__name__ == "AuthenticationError" or "InvalidAuthToken" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _lost(err: BaseException) -> str:
    """A lost trial's reason: Ray's, in words (the outcome's `end` says it was lost)."""
    return f"{LOST} {_ray_reason(err)}"


def _ray_reason(err: BaseException) -> str:
    """Ray's error in one line: `(WorkerCrashedError): ...`."""
    text = " ".join(str(err).split())
    return f"({type(err).__name__}): {text[:240]}"
