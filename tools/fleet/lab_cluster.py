"""The lab cluster: a Ray cluster of simulated boxes on this machine (`agent run --fleet ray
--boxes N` without an address), and what is left of one whose controller died.

`LocalCluster` is a head and N-1 worker nodes (ray.cluster_utils), each with the custom resources
{"box": 1, "box_<i>": 1} standing in for one box. It is closed to the network and to other users:
every process of it listens on 127.0.0.1 only, every call carries a token generated for this
cluster (Ray's token authentication), no usage report goes out, and its session folders live in a
folder only this user can enter (`private_temp`), removed at the end. A controller SIGKILLed
leaves its cluster running; every process of it carries that folder in its environment, so the
next lab cluster kills them all (`reap_cluster`). Placing trials on a cluster, lab or not, is
tools/fleet/ray_backend.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import json
import os
import secrets
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

from state.lock import process_alive
from tools.domain.fleet_config import BOX
from tools.fleet import FleetError
from tools.fleet.trial import node_dir
from tools.hosts.local import holding

BOX_PREFIX = f"{BOX}_"  # box_<i>: the resource that names one simulated box
LOOPBACK = "127.0.0.1"  # the lab's node address: what every process of it binds
REAP_CLUSTER_S = 10.0  # a dead controller's cluster: its processes SIGKILLed until none is left


def ray_core() -> Any:
    """Ray's compiled core (its auth mode, its configuration), untyped."""
    return importlib.import_module("ray._raylet")


def lab_env(token: str, temp: Path) -> dict[str, str]:
    """The environment of a lab cluster's processes: the GCS, the raylets and their workers are
    started by this process and inherit it (Ray reads these variables, not arguments)."""
    return {
        "RAY_AUTH_MODE": "token",  # every RPC carries the token; the GCS refuses one without it
        # by reference: the variable's name; its value never reaches the run folder (scrubbed as
        # any *TOKEN* variable, and not passed on to the trials' servers: trial.start_detached)
        "RAY_AUTH_TOKEN": token,
        "RAY_USAGE_STATS_ENABLED": "0",  # no report of this machine to Ray's usage service
        "RAY_TMPDIR": str(temp),  # session folders, sockets, logs: not /tmp/ray
        # Ray's one-machine mode: the driver's own address is loopback too (ray.init would turn
        # 127.0.0.1 into the LAN address otherwise, where nothing listens)
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    }


class LabEnv:
    """`lab_env` set in this process's environment for the cluster's life, then put back as it
    was; Ray's configuration read again each time (it reads the auth mode and the token once per
    process)."""

    def __init__(self, values: dict[str, str]) -> None:
        self.saved = {k: os.environ.get(k) for k in values}
        os.environ.update(values)
        self._reload()

    def restore(self) -> None:
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._reload()

    @staticmethod
    def _reload() -> None:
        from ray._private import ray_constants

        raylet = ray_core()
        # read when ray was first imported: a process that imported it earlier (a test) too
        ray_constants.ENABLE_RAY_CLUSTER = os.environ.get(
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "1"
        ).lower() not in ("0", "false")
        raylet.Config.initialize("")
        raylet.AuthenticationTokenLoader.instance().reset_cache()


OWNER_LOCK = "owner.lock"  # flocked by the controller for its life: the kernel drops it at death
_owner_fds: dict[Path, int] = {}  # this process's lab folders -> their held owner lock


def private_temp(killed: list[int] | None = None) -> Path:
    """The lab cluster's own temp folder (Ray's session folders are 0777 inside):
    <tmp>/campaign-ray-<uid>/<pid>, under a folder only this user can enter. Short, as Ray's
    socket paths must be. The clusters of controllers that died (SIGKILL) are killed here
    (`reap_cluster`; their pids added to `killed`) and their folders removed."""
    for attempt in range(3):
        try:
            return _private_temp(killed)
        except FileNotFoundError:  # the folder above, empty, removed by a cluster ending meanwhile
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def remove_temp(temp: Path) -> None:
    """This process's lab folder removed at its cluster's end, and the folder above it too when
    no other cluster's is left in it: a run leaves nothing in the temp dir."""
    release_temp(temp)
    shutil.rmtree(temp, ignore_errors=True)
    with contextlib.suppress(OSError):  # another controller's folder is there, or it is gone
        os.rmdir(temp.parent)


def _private_temp(killed: list[int] | None) -> Path:
    parent = Path(tempfile.gettempdir()) / f"campaign-ray-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        parent.mkdir(mode=0o700)
    info = parent.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise FleetError(f"{parent} is not a folder of this user's only (0700): remove it")
    mine = parent / str(os.getpid())
    release_temp(mine)  # a cluster this process started before
    for old in parent.iterdir():
        if old.name.isdigit() and old != mine and not _owner_alive(old):
            (killed if killed is not None else []).extend(reap_cluster(old))
            shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(mine, ignore_errors=True)
    staging = parent / f".{mine.name}.new"  # locked before its name is one another run reads
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700)
    fd = os.open(staging / OWNER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)  # not inherited (PEP 446)
    try:  # a file just made in a folder of our own: nobody holds it, so never wait for it
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise FleetError(f"{staging} is locked by another process: remove it") from None
    staging.rename(mine)
    _owner_fds[mine] = fd
    return mine


def release_temp(temp: Path) -> None:
    """This process's lab folder given up: its owner lock released (the folder stays)."""
    fd = _owner_fds.pop(temp, None)
    if fd is not None:
        os.close(fd)


def _owner_alive(folder: Path) -> bool:
    """The controller that made `folder` still runs: its pid is alive and it holds the folder's
    owner lock. The pid alone is not enough: on a box with pid_max 32768 a folder outlives its
    dead controller for days, and a reused pid would spare its orphans."""
    if not process_alive(int(folder.name)):
        return False
    try:
        fd = os.open(folder / OWNER_LOCK, os.O_RDONLY)
    except FileNotFoundError:  # made by a version before the lock: the pid decides
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def reap_cluster(temp: Path) -> list[int]:
    """Every process of a lab cluster whose controller died (SIGKILL: no shutdown ran), killed:
    its GCS, raylets, workers and Ray's agents - and the servers its trials started - all carry
    its temp folder in their environment (RAY_TMPDIR, `lab_env`). Left alone, the agents notice
    only minutes later and the servers never do. The pids killed."""
    killed: list[int] = []
    deadline = time.monotonic() + REAP_CLUSTER_S
    while time.monotonic() < deadline:
        left = [p for p in _of_cluster(temp) if p != os.getpid()]
        if not left:
            break
        for pid in left:  # a raylet that dies may start nothing more; a worker may be new
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed += [p for p in left if p not in killed]
        time.sleep(0.05)
    return killed


def _of_cluster(temp: Path) -> list[int]:
    """The processes of the cluster whose temp folder is `temp`: marked in their environment, or
    holding a file under it open - Ray's agents retitle themselves (setproctitle), which can
    overwrite the environment /proc shows, and they keep their logs there open."""
    found = set(holding("RAY_TMPDIR", str(temp)))
    inside = f"{temp}/"
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in found:
            continue
        with contextlib.suppress(OSError):
            for fd in os.scandir(f"{entry.path}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(fd.path).startswith(inside):
                        found.add(int(entry.name))
                        break
    return sorted(found)


class LocalCluster:
    """A Ray cluster on this machine with `boxes` nodes (the lab); `shutdown` stops every process
    it started and removes its temp folder. Loopback only, token authentication, no usage
    stats (`lab_env`). `workdir`: the fleet's, whose node folders `kill_box` empties."""

    def __init__(self, boxes: int, object_store_mb: int = 100, workdir: Path | None = None) -> None:
        self.workdir = workdir
        self.cluster: Any = None
        self.reaped: list[int] = []  # processes of dead controllers' clusters, killed first
        self.temp = private_temp(self.reaped)
        self.token = secrets.token_urlsafe(32)
        self.env = LabEnv(lab_env(self.token, self.temp))
        try:
            from ray.cluster_utils import Cluster

            def node(i: int) -> dict[str, Any]:
                return {
                    "num_cpus": 1,
                    "resources": {BOX: 1, f"{BOX_PREFIX}{i}": 1},
                    "object_store_memory": object_store_mb * 2**20,
                    "node_ip_address": LOOPBACK,  # the GCS, raylets and workers bind it
                }

            head = {**node(1), "include_dashboard": False}
            self.cluster = Cluster(initialize_head=True, head_node_args=head)
            self.workers = [self.cluster.add_node(**node(i)) for i in range(2, boxes + 1)]
            self.address = self.cluster.address
        except BaseException:
            self.shutdown()
            raise

    def kill_box(self, index: int) -> None:
        """Lose one worker box (index 0 = box 2): its raylet and everything under it die. A real
        machine that goes down takes its servers with it; here they run in sessions of their own
        on this machine, so the box's servers (its folder's pid files) are killed too."""
        node = self.workers[index]
        self.cluster.remove_node(node)
        if self.workdir is not None:
            for pidfile in node_dir(self.workdir, node.node_id).glob("*.json"):
                with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                    os.killpg(int(json.loads(pidfile.read_text())["pid"]), signal.SIGKILL)

    def shutdown(self) -> None:
        try:
            if self.cluster is not None:
                self.cluster.shutdown()
                self.cluster = None
        finally:
            self.env.restore()
            # Ray's per-node agents outlive their raylet by a moment (they poll it): none is
            # left running when this controller's cluster is gone
            reap_cluster(self.temp)
            remove_temp(self.temp)
