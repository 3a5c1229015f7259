"""The clean-up after a lost trial, without Ray: `reap` on a node's folder (tools/fleet/trial.py)
kills the server group its pid file names and, when asked, the trial's Ray worker first (a
process that is no Ray worker is left alone); RayFleet names what it cannot clean up instead of
pretending: a trial lost before it named its node, a node that is gone. The clean-up task pinned
to a live node runs in tests/test_fleet_ray.py (marker ray)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import alive, plain_config
from tools.domain.fleet_config import FleetConfig
from tools.fleet.lab_cluster import OWNER_LOCK, private_temp, release_temp
from tools.fleet.ray_backend import RayFleet, Submitted
from tools.fleet.trial import TrialSpec, node_dir, reap, start_detached


def gone_soon(pid: int) -> bool:
    """Dead within 2 s (a killed process whose parent has not waited for it yet is a zombie)."""
    deadline = time.monotonic() + 2
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


def server_group(folder: Path) -> tuple[int, int]:
    """A server as a trial starts it: its own session, a child beside it. (leader, child)."""
    folder.mkdir(parents=True, exist_ok=True)
    leader = start_detached("sleep 30 & echo $! > child; wait", str(folder / "s.log"), folder)
    deadline = time.monotonic() + 5
    while not (folder / "child").exists() or not (folder / "child").read_text().strip():
        assert time.monotonic() < deadline, "the test's server did not start"
        time.sleep(0.02)
    return leader, int((folder / "child").read_text())


async def test_reap_kills_the_group_its_pid_file_names_and_removes_the_file(
    tmp_path: Path,
) -> None:
    here = node_dir(tmp_path, "node-a")
    leader, child = server_group(here)
    where = {"node": "node-a", "box": "box2", "worker": 1, "port": 1234, "pid": leader}
    (here / "t1.json").write_text(json.dumps(where))
    left = await reap(here, "t1")
    assert left == where
    assert gone_soon(child) and gone_soon(leader)
    assert not (here / "t1.json").exists()
    assert await reap(here, "t1") == {}  # nothing left the second time


async def test_reap_finds_a_server_no_pid_file_names_by_its_mark(tmp_path: Path) -> None:
    """The worker died between starting its server and writing its pid: the pid file has the
    worker and the port only, and the server is found by the trial's mark in its environment."""
    here = node_dir(tmp_path, "node-a")
    here.mkdir(parents=True)
    leader = start_detached("sleep 30 & echo $! > child; wait", str(here / "t1.log"), here)
    other = start_detached("sleep 30", str(here / "t2.log"), here)  # another trial's: stays
    deadline = time.monotonic() + 5
    while not (here / "child").exists() or not (here / "child").read_text().strip():
        assert time.monotonic() < deadline, "the test's server did not start"
        time.sleep(0.02)
    child = int((here / "child").read_text())
    (here / "t1.json").write_text(json.dumps({"node": "node-a", "worker": 1, "port": 1234}))
    try:
        left = await reap(here, "t1")
        assert left == {"node": "node-a", "worker": 1, "port": 1234, "pid": leader, "unnamed": True}
        assert gone_soon(child) and gone_soon(leader) and alive(other)
    finally:
        os.killpg(other, 9)


async def test_reap_reads_only_the_folder_it_is_given(tmp_path: Path) -> None:
    """Another node's pid file is not this node's business: its server stays up."""
    other = node_dir(tmp_path, "node-b")
    leader, child = server_group(other)
    (other / "t1.json").write_text(json.dumps({"node": "node-b", "pid": leader}))
    try:
        assert await reap(node_dir(tmp_path, "node-a"), "t1") == {}
        assert alive(child) and (other / "t1.json").exists()
    finally:
        await reap(other, "t1")
    assert gone_soon(child)


async def test_reap_of_a_trial_that_had_not_started_its_server_kills_nothing(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    bystander = subprocess.Popen(["sleep", "30"])
    procs.append(bystander)
    tmp_path.joinpath("t1.json").write_text(json.dumps({"node": "n", "worker": bystander.pid}))
    left = await reap(tmp_path, "t1")
    assert left == {"node": "n", "worker": bystander.pid}
    assert bystander.poll() is None and not tmp_path.joinpath("t1.json").exists()


async def test_reap_stops_a_ray_worker_first_only_when_asked_and_only_a_ray_worker(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    worker = subprocess.Popen(["bash", "-c", "exec -a ray::_trial_task sleep 30"])
    not_ray = subprocess.Popen(["sleep", "30"])  # a pid reused by something else
    procs += [worker, not_ray]
    deadline = time.monotonic() + 5
    while not Path(f"/proc/{worker.pid}/cmdline").read_bytes().startswith(b"ray::"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    for trial, pid in (("t1", worker.pid), ("t2", not_ray.pid)):
        tmp_path.joinpath(f"{trial}.json").write_text(json.dumps({"worker": pid}))
    assert await reap(tmp_path, "t1") == {"worker": worker.pid}
    assert worker.poll() is None  # not asked: a lost worker's pid may be someone else's now
    tmp_path.joinpath("t1.json").write_text(json.dumps({"worker": worker.pid}))
    assert (await reap(tmp_path, "t1", stop_worker=True))["worker_stopped"] is True
    assert worker.wait(timeout=5) == -9
    assert (await reap(tmp_path, "t2", stop_worker=True))["worker_stopped"] is False
    assert not_ray.poll() is None
    tmp_path.joinpath("t3.json").write_text(json.dumps({"worker": os.getpid()}))
    assert (await reap(tmp_path, "t3", stop_worker=True))["worker_stopped"] is False  # itself


async def test_a_trial_lost_before_it_named_its_node_needs_no_clean_up_task(
    tmp_path: Path,
) -> None:
    """No Ray here: the controller does not ask the cluster about a trial that never said where
    it runs (it waited for the controller to know before starting a server)."""
    fleet = RayFleet(FleetConfig(), tmp_path)
    future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    fleet.pending[future] = Submitted(TrialSpec("t1", plain_config(), {}, []), None, None, 1)
    future.set_exception(RuntimeError("the worker died"))
    _, out = await fleet.next_done()
    assert not out.ok and out.reason.startswith("lost on its node (RuntimeError)")
    assert out.node == "" and out.cleanup.startswith("nothing to clean up: the trial was lost")


async def test_a_gone_node_is_named_and_no_task_is_sent_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = RayFleet(FleetConfig(), tmp_path)
    monkeypatch.setattr(fleet, "_alive", lambda: {"other"})
    future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    spec = TrialSpec("t1", plain_config(), {}, [])
    node = "f" * 56
    fleet.pending[future] = Submitted(spec, None, None, 1, on=node, box="box2")
    future.set_exception(RuntimeError("the node died"))
    _, out = await fleet.next_done()  # no _reaper: a task would fail with AttributeError
    assert (out.node, out.box) == (node, "box2")
    # a joined cluster's node Ray declared dead may be a raylet that only stopped answering
    # (issue 24.6): its server is not said to be gone with it, but named left at the run's end
    where = f"box2 (node {'f' * 12})"
    assert out.cleanup == (
        f"could not clean up on {where}: Ray declared the node dead (its server runs on if only "
        "its raylet stopped); named left at the run's end"
    )
    await fleet.close()
    [left] = fleet.settled()
    assert left.left and (left.trial, left.node, left.box) == ("t1", node, "box2")
    dead = "Ray declared the node dead (its server runs on if only its raylet stopped)"
    assert left.text == f"LEFT on {where}: {dead}"
    pidfile = tmp_path / node / "t1.json"  # on box2: this machine cannot read it
    assert (
        left.pgid is None
        and left.kill.startswith("on box2: kill -KILL -- -")
        and str(pidfile) in left.kill
    )
    assert fleet.settled() == []  # handed over once


def test_a_dead_controllers_lab_cluster_is_killed_before_a_new_one_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, procs: list[subprocess.Popen[bytes]]
) -> None:
    """Issue 24.5: a controller SIGKILLed leaves its lab cluster (GCS, raylets, Ray's agents) and
    its trials' servers running, each with the cluster's temp folder in its environment; the
    next lab cluster (`agent resume`, or any run) kills them all by that mark and removes the
    folder. A live controller's cluster, and anything not marked, is left alone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    parent = tmp_path / f"campaign-ray-{os.getuid()}"
    parent.mkdir(mode=0o700)
    gone_controller = subprocess.Popen(["true"])
    gone_controller.wait()
    dead = parent / str(gone_controller.pid)  # its folder, named by its pid, outlived it
    dead.mkdir()
    holder = subprocess.Popen(["sleep", "60"])  # a live controller
    procs.append(holder)
    living = parent / str(holder.pid)
    living.mkdir()

    def marked(folder: Path, **popen: Any) -> subprocess.Popen[bytes]:
        env = {**os.environ, "RAY_TMPDIR": str(folder)}
        procs.append(subprocess.Popen(["sleep", "60"], env=env, **popen))
        return procs[-1]

    raylet = marked(dead)
    server = marked(dead, start_new_session=True)  # a trial's server: a session of its own
    other = marked(living)
    bystander = subprocess.Popen(["sleep", "60"])
    procs.append(bystander)
    killed: list[int] = []
    mine = private_temp(killed)
    assert sorted(killed) == sorted([raylet.pid, server.pid])
    assert raylet.wait(timeout=5) == -9 and server.wait(timeout=5) == -9
    assert other.poll() is None and bystander.poll() is None
    assert not dead.exists() and living.exists() and mine == parent / str(os.getpid())


def test_a_dead_controllers_folder_is_reaped_though_its_pid_now_names_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, procs: list[subprocess.Popen[bytes]]
) -> None:
    """A folder outlives its SIGKILLed controller until the next lab cluster starts, maybe days
    later; with pid_max 32768 its pid may by then be another process's. The owner's lock, not the
    pid, says whether the controller runs: a free lock under a live pid is a dead controller's."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    parent = tmp_path / f"campaign-ray-{os.getuid()}"
    parent.mkdir(mode=0o700)
    stranger = subprocess.Popen(["sleep", "60"])  # the reused pid: not a controller
    procs.append(stranger)
    reused = parent / str(stranger.pid)
    reused.mkdir()
    (reused / OWNER_LOCK).touch()  # the dead controller's lock, free since its death
    holding_lock = (  # a live controller: its pid, and its folder's lock held
        "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
        "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"
    )
    living = parent / "0"  # renamed to its pid once that is known
    living.mkdir()
    controller = subprocess.Popen(
        [sys.executable, "-c", holding_lock, str(living / OWNER_LOCK)], stdout=subprocess.PIPE
    )
    procs.append(controller)
    assert controller.stdout is not None and controller.stdout.readline() == b"held\n"
    living = living.rename(parent / str(controller.pid))

    def marked(folder: Path) -> subprocess.Popen[bytes]:
        env = {**os.environ, "RAY_TMPDIR": str(folder)}
        procs.append(subprocess.Popen(["sleep", "60"], env=env))
        return procs[-1]

    orphan, kept = marked(reused), marked(living)
    killed: list[int] = []
    mine = private_temp(killed)
    try:
        assert killed == [orphan.pid] and orphan.wait(timeout=5) == -9
        assert kept.poll() is None and stranger.poll() is None and living.exists()
        # this run's own folder is locked the moment its name exists
        fd = os.open(mine / OWNER_LOCK, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    finally:
        release_temp(mine)


class Reaper:
    """The clean-up task as the controller submits it (`options(...).remote(...)`), without Ray:
    each submission a future the test answers (or never does: a wedged node)."""

    def __init__(self) -> None:
        self.sent: list[asyncio.Future[Any]] = []

    def options(self, **_: Any) -> Reaper:
        return self

    def remote(self, *_: Any) -> asyncio.Future[Any]:
        self.sent.append(asyncio.get_running_loop().create_future())
        return self.sent[-1]


@pytest.mark.ray  # runs in the ray stage, where Ray is installed (no cluster is started)
async def test_an_owed_clean_up_is_sent_again_done_once_and_left_if_it_never_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No Ray: a clean-up not answered in reap_timeout_s is owed; a try that failed on a node
    still alive is sent again; the one that ran is handed over once; one never answered is LEFT
    at the close, with the try that failed."""
    fleet = RayFleet(FleetConfig(reap_timeout_s=0.05), tmp_path)
    node = "a" * 56
    monkeypatch.setattr(fleet, "_alive", lambda: {node})
    monkeypatch.setattr(
        "ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy", lambda *a, **k: None
    )
    fleet._reaper = reaper = Reaper()
    where = f"box2 (node {'a' * 12})"
    text = await fleet.clean_up(node, "box2", "t1", True)
    assert text.startswith(f"could not clean up on {where} yet: no answer in 0.05 s")
    assert fleet.settled() == []
    reaper.sent[0].set_exception(RuntimeError("the raylet dropped it"))
    await asyncio.sleep(0)
    assert fleet.settled() == [] and len(reaper.sent) == 2  # sent again: the node is alive
    reaper.sent[1].set_result({"pid": 77, "worker": 5, "by_node": node, "by_box": "box2"})
    await asyncio.sleep(0)
    [done] = fleet.settled()
    assert (done.trial, done.left) == ("t1", False)
    assert done.text == (
        f"done after it got no answer at first: {where} killed the server group 77 a trial "
        "still running left"
    )
    assert fleet.settled() == []  # once
    await fleet.clean_up(node, "box2", "t2", True)
    reaper.sent[2].set_exception(RuntimeError("the raylet dropped it"))
    await asyncio.sleep(0)
    await fleet.close()
    [left] = fleet.settled()
    assert left.left and left.trial == "t2"
    no_answer = "its clean-up got no answer from the node by the run's end (each wait 0.05 s"
    failed = "a try failed there: (RuntimeError): the raylet dropped it"
    assert left.text == f"LEFT on {where}: {no_answer}, fleet.reap_timeout_s); {failed}"
    assert fleet.owed == {}
