"""A real two-box Ray cluster on this machine for the tests marked `ray`: two network namespaces
joined by a veth pair - the head box (10.201.0.1) and a worker box (10.201.0.2) - each with only
its loopback and its end of the link, a Ray node started in each by `ray start` with token
authentication, the worker joined to the head over the link. Nothing of it is in this machine's
own namespace: Ray's gRPC servers bind every interface (`*:PORT`) for any node address but
127.0.0.1, so a box of its own is what keeps them on the link (docs/fleet.md, "Two real boxes").

Needs root and `ip netns` (iproute2); `TwoBoxes.start` raises Unavailable, with the reason, where
either is missing. `close` leaves nothing, whatever happened: every process of both namespaces is
SIGKILLed (a process cannot leave its namespace), the namespaces deleted (the veth pair with
them), the Ray folders removed. Never `ray stop`: it kills every Ray process of the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEAD_IP, WORKER_IP = "10.201.0.1", "10.201.0.2"  # a private /30 on the veth pair, nothing else
GCS_PORT = 6379  # inside the head's own namespace: no other cluster can hold it
PREFIX = "cag-"  # our namespaces: cag-h<pid>, cag-w<pid> (<pid>: the test process that made them)
START_S = 180.0  # a `ray start` on a loaded machine
GONE_S = 30.0  # a namespace's processes SIGKILLed until none is left


class Unavailable(Exception):
    """No network namespaces here (not root, no iproute2, no CAP_NET_ADMIN): the reason."""


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=60)


def netns_pids(name: str) -> list[int]:
    """The live processes in namespace `name` (`ip netns pids`), zombies left out."""
    out = ip("netns", "pids", name, check=False).stdout.split()
    alive = []
    for pid in map(int, out):
        with contextlib.suppress(OSError, IndexError):
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                alive.append(pid)
    return alive


def kill_netns(name: str) -> list[int]:
    """Every process of namespace `name` SIGKILLed until none is left (a dying raylet's workers
    may still be forking). The pids killed."""
    killed: list[int] = []
    deadline = time.monotonic() + GONE_S
    while (left := netns_pids(name)) and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed += [p for p in left if p not in killed]
        time.sleep(0.1)
    return killed


def reap_stale() -> None:
    """The namespaces and Ray folders of a test process that died without its clean-up
    (SIGKILL): their processes killed, the namespaces deleted, the folders removed."""
    for line in ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        match = re.fullmatch(rf"{PREFIX}[hw](\d+)", name)
        if match and not Path(f"/proc/{match.group(1)}").exists():
            kill_netns(name)
            ip("netns", "del", name, check=False)
    for folder in Path(tempfile.gettempdir()).glob(f"{PREFIX}ns*-*"):
        match = re.fullmatch(rf"{PREFIX}ns(\d+)-\w+", folder.name)
        if match and not Path(f"/proc/{match.group(1)}").exists():
            shutil.rmtree(folder, ignore_errors=True)


class TwoBoxes:
    """The two boxes; `start()` brings them up, `close()` takes everything down."""

    def __init__(self) -> None:
        me = os.getpid()
        self.head, self.worker = f"{PREFIX}h{me}", f"{PREFIX}w{me}"
        self.token = secrets.token_urlsafe(32)
        # short (Ray's socket paths), 0700 (Ray's session folders inside are 0777)
        self.temp = Path(tempfile.mkdtemp(prefix=f"{PREFIX}ns{me}-"))
        self.address = f"{HEAD_IP}:{GCS_PORT}"
        self.made: list[str] = []  # namespaces made, deleted by close()
        self.worker_starts = 0

    def env(self, box: str) -> dict[str, str]:
        """A Ray node's environment: token auth, no usage report, its own folder, this repo's
        code importable by its workers (the same filesystem on both boxes)."""
        keep = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        return keep | {
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": self.token,
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_TMPDIR": str(self.temp / box),
            "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [keep.get("PYTHONPATH")])]),
        }

    def start(self) -> None:
        if os.geteuid() != 0:
            raise Unavailable("a network namespace needs root (CI runs as root)")
        if shutil.which("ip") is None:
            raise Unavailable("`ip` (iproute2) is not installed")
        reap_stale()
        for name in (self.head, self.worker):
            made = ip("netns", "add", name, check=False)
            if made.returncode != 0:
                raise Unavailable(f"`ip netns add` failed: {made.stderr.strip()}")
            self.made.append(name)
        a, b = f"cva{os.getpid()}"[:15], f"cvb{os.getpid()}"[:15]
        ip("link", "add", a, "netns", self.head, "type", "veth", "peer", "name", b, "netns",
           self.worker)  # fmt: skip
        for name, dev, addr in ((self.head, a, HEAD_IP), (self.worker, b, WORKER_IP)):
            ip("-n", name, "addr", "add", f"{addr}/30", "dev", dev)
            ip("-n", name, "link", "set", dev, "up")
            ip("-n", name, "link", "set", "lo", "up")
        self.ray_start(self.head, HEAD_IP, 1, "--head", f"--port={GCS_PORT}",
                       "--include-dashboard=false")  # fmt: skip
        self.start_worker()

    def start_worker(self) -> None:
        """The worker box's Ray node joined to the head (again, after `kill_worker`)."""
        self.worker_starts += 1
        self.ray_start(self.worker, WORKER_IP, 2, f"--address={self.address}")

    def ray_start(self, ns: str, addr: str, box: int, *args: str) -> None:
        ray = Path(sys.executable).with_name("ray")
        resources = f'{{"box": 1, "box_{box}": 1}}'  # box<i> in the run's records
        argv = [str(ray), "start", f"--node-ip-address={addr}", "--num-cpus=1", *args]
        argv += [f"--resources={resources}", "--object-store-memory=100000000"]
        argv += ["--disable-usage-stats"]
        name = "head" if ns == self.head else "worker"
        done = self.run(ns, argv, self.env(name), timeout=START_S)
        if done.returncode != 0:
            raise RuntimeError(f"ray start on the {name} box failed: {done.stderr[-2000:]}")

    def run(
        self, ns: str, argv: list[str], env: dict[str, str], timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """`argv` run to its end inside namespace `ns`."""
        return subprocess.run(
            ["ip", "netns", "exec", ns, *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
        )

    def popen(self, ns: str, argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
        return subprocess.Popen(
            ["ip", "netns", "exec", ns, *argv],
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def kill_worker(self) -> list[int]:
        """The worker box lost: its raylet, its workers and its servers SIGKILLed at once, as
        when a machine goes down. The pids killed."""
        return kill_netns(self.worker)

    def nodes(self) -> dict[str, str]:
        """The cluster's live nodes as the GCS tells them: node id -> node address (asked from
        the head box, with the token)."""
        probe = (
            "import json, ray; ray.init(address='auto', logging_level='ERROR'); "
            "print(json.dumps({n['NodeID']: n['NodeManagerAddress'] for n in ray.nodes() "
            "if n['Alive']}))"
        )
        env = self.env("client") | {"RAY_ADDRESS": self.address}
        env.pop("RAY_TMPDIR")
        done = self.run(self.head, [sys.executable, "-c", probe], env)
        if done.returncode != 0:
            raise RuntimeError(f"could not list the nodes: {done.stderr[-2000:]}")
        found: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
        return found

    def close(self) -> None:
        for name in self.made:
            kill_netns(name)
            ip("netns", "del", name, check=False)  # the veth pair goes with it
        self.made.clear()
        shutil.rmtree(self.temp, ignore_errors=True)
