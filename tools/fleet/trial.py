"""One trial, run on the node it landed on: start the server there, wait for readiness,
benchmark it from the same node (client next to the server, as on one box), kill the server and
everything it spawned, and hand back the measured points and the log's tail.

Pure of any scheduler: the Ray backend calls `run_trial` inside a task, a test can call it
directly. While the server runs, `<workdir>/<trial>.json` names its pid, port and the worker that
owns it, so that a clean-up on the same node (`reap`) can kill what a dead worker left behind.
The workdir a backend passes is the node's own folder (`node_dir`): on a real fleet it is on that
node's disk, and in the lab the controller does not read it either.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sim.gpus import reservations
from state.atomic import write_atomic
from state.secrets import resolve
from tools.bench.deadlines import Deadlines
from tools.bench.energy import HostPower, launch_gpus
from tools.bench.schema import Workload
from tools.bench.sweep import BenchError, Observer, SweepSpec, run_sweep
from tools.domain.config import Config, HostConfig
from tools.errors import ToolError
from tools.hosts import HostError
from tools.hosts.base import CALL_MARK
from tools.hosts.local import LocalHost, holding, kill_group
from tools.servers.command import build_command, refuse_public_bind
from tools.servers.lifecycle import kill_server
from tools.servers.profiles import engine_for
from tools.servers.readiness import StartFailure, Watch, wait_ready

LOG_TAIL_LINES = 20
KILL_WAIT_S = 5.0  # a SIGKILLed worker is gone well within this


@dataclass
class TrialSpec:
    trial_id: str  # unique in the run: names the log and the pid file
    config: Config  # the run's config: server command, engine profile, timeouts
    flags: dict[str, Any]
    groups: list[tuple[list[int], Workload]]  # levels measured together, and their workload
    prompt_seed: int | None = None
    # per group: the first-token deadline learned where these flags or the baseline served its
    # levels (tools/run_benchmark.py `trial_deadlines`); missing: the config's [bench.deadlines]
    deadlines: list[Deadlines] = field(default_factory=list)

    def deadlines_of(self, group: int) -> Deadlines:
        if group < len(self.deadlines):
            return self.deadlines[group]
        return Deadlines.from_job(self.config.bench.deadlines.given())


def launchable(config: Config) -> Config:
    """The run's config as its trials launch it: each secret of the server command that the log
    keeps by reference (`NAME=[redacted]`: a resumed run's config) given its value from this
    process's environment - the controller's, as start_server resolves it on one box. Raises
    state.secrets.UnresolvedSecret (one line) when the environment cannot give it back."""
    command = resolve(config.server.command)
    if command == config.server.command:
        return config
    server = config.server.model_copy(update={"command": command})
    return config.model_copy(update={"server": server})


# How a trial ended, as a type (the human reason is its own field): measured; its server did not
# start (a verdict on the configuration); it started and failed (a verdict on the server); Ray lost
# it with its node or worker (no verdict: it runs again); cut short by a stop (placed on resume)
TrialEnd = Literal["measured", "not_started", "failed", "lost", "interrupted"]
LOST = "lost on its node"  # the words that begin a lost trial's reason (ray_backend._lost)


@dataclass
class TrialOutcome:
    trial_id: str
    ok: bool
    reason: str = ""  # one line, when not ok
    end: TrialEnd = "failed"  # "measured" when ok (set where the outcome is made)
    node: str = ""  # the Ray node id (or "local")
    box: str = ""  # the box's name (its custom resource), when it has one
    command: str = ""
    port: int = 0
    model: str = ""
    points: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    log_tail: str = ""
    ready_s: float = 0.0
    started: float = 0.0  # wall clock (time.time) on the node
    ended: float = 0.0
    cleanup: str = ""
    deadlines: list[dict[str, Any]] = field(default_factory=list)  # each group's, as swept


def node_dir(workdir: Path, node: str) -> Path:
    """A node's own folder under the run's fleet workdir: its trials' logs, pid files and
    simulated GPUs. Only tasks running on that node read or write it."""
    return workdir / node


def private_dir(folder: Path) -> None:
    """A node's folder and the fleet's folder above it, 0700 (their owner's only, as the run
    folder): server logs, pid files, simulated GPUs."""
    folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)  # whatever the umask


def free_port() -> int:
    """A port nobody listens on now: trials of one box never share one."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def box_env(config: Config, box: str, workdir: Path) -> None:
    """Each box its own simulated GPUs (sim/gpus.py's registry is per folder): boxes sharing
    this machine in the lab must not share GPU memory. Set in the worker's environment, not as
    a prefix of the command, so that every box's command (and its config hash) is the same; the
    server and kill_server's GPU check both inherit it, and a worker stays on its node."""
    if engine_for(config).name == "sim" and box:
        os.environ["SIM_GPU_DIR"] = str(workdir / f"gpus-{box}")


def start_detached(command: str, log: str, cwd: Path) -> int:
    """The server in its own session (pid = pgid), every stdio on its log (0600). Not the host's
    start_detached: inside a Ray worker its shell waits for the server to end (the worker's
    environment keeps the call's pipes open), here nothing is shared - nor the cluster's token
    (RAY_AUTH_*: the server needs no access to the cluster)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH_")}
    env[CALL_MARK] = log  # what `reap` finds it by when no pid file names it
    with open(log, "ab", opener=lambda path, flags: os.open(path, flags, 0o600)) as out:
        proc = subprocess.Popen(
            ["bash", "--norc", "--noprofile", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    return proc.pid


async def run_trial(
    spec: TrialSpec, workdir: Path, node: str = "local", box: str = ""
) -> TrialOutcome:
    private_dir(workdir)
    out = TrialOutcome(spec.trial_id, ok=False, node=node, box=box, started=time.time())
    config, engine = spec.config, engine_for(spec.config)
    host = LocalHost(HostConfig(name="local", workdir=str(workdir)))
    port = free_port()
    box_env(config, box, workdir)
    out.command = build_command(config.server.command, spec.flags, engine, port)
    out.port = port
    try:  # the run's config was checked before the cluster started; a flag can still ask for it
        refuse_public_bind(out.command, config.server.allow_public_bind)
    except ToolError as err:
        out.reason, out.end, out.ended = str(err), "not_started", time.time()
        return out
    log = str(workdir / f"{spec.trial_id}.log")
    pidfile = workdir / f"{spec.trial_id}.json"
    pid = 0
    where = {"node": node, "box": box, "worker": os.getpid(), "port": port}
    try:
        # a controller that loses the worker reads this (0600, as every file of the run)
        write_atomic(pidfile, json.dumps(where).encode())
        pid = start_detached(out.command, log, workdir)
        write_atomic(pidfile, json.dumps({**where, "pid": pid}).encode())
        watch = Watch(
            host, engine, pid, log, port, config.server.ready_timeout_s, config.server.model
        )
        ready = await wait_ready(watch)
        out.ready_s, out.model = ready.seconds, ready.model
        for group, (levels, workload) in enumerate(spec.groups):
            deadlines = spec.deadlines_of(group)
            out.deadlines.append(deadlines.to_job())
            sweep = SweepSpec(
                url=f"http://127.0.0.1:{port}",
                levels=levels,
                workload=workload.model_copy(update={"model": workload.model or ready.model}),
                prompt_seed=spec.prompt_seed,
                extra_body=engine.extra_body,
                tokenize_path=engine.tokenize_path,
                metrics_path=engine.metrics_path,
                metrics=engine.profile.metrics,
                deadlines=deadlines,
                power=HostPower(host, launch_gpus(out.command)),  # the server runs here
            )
            got = await run_sweep(sweep, Observer())
            out.points += got.points
            out.notes += got.notes
        out.ok, out.end = True, "measured"
    except StartFailure as err:
        out.reason, out.end = f"the server did not start: {err.diagnosis.text}", "not_started"
    except (BenchError, HostError, OSError) as err:
        out.reason = f"{type(err).__name__}: {err}"
    finally:
        if pid:
            record = {"name": spec.trial_id, "pid": pid, "pgid": pid, "port": port}
            record["command"] = out.command
            try:
                report = await kill_server(host, engine, record, config.server.kill_timeout_s)
                out.cleanup = report.summary()
            except HostError as err:
                out.cleanup = f"could not clean up: {err}"
            pidfile.unlink(missing_ok=True)
            out.log_tail = await asyncio.to_thread(_tail, log, LOG_TAIL_LINES)
            if engine.name == "sim" and box:  # a SIGKILLed server's GPU claim: read, so removed
                with contextlib.suppress(OSError):
                    reservations(workdir / f"gpus-{box}")
        out.ended = time.time()
    return out


def _tail(path: str, lines: int) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


async def reap(workdir: Path, trial_id: str, stop_worker: bool = False) -> dict[str, Any]:
    """What a trial left behind in `workdir` (the node's folder: run this on that node): its pid
    file (node, box, worker, port, pid once the server started), the server's group killed, the
    file removed. `stop_worker`: SIGKILL the trial's Ray worker first, so that it starts nothing
    more (a controller shutting down with the trial still running). A server its pid file does
    not name (the worker died before writing it) is found by the mark in its environment
    (`unnamed`). {} when there is no file:
    the trial ended and cleaned up itself, or never ran here."""
    pidfile = workdir / f"{trial_id}.json"
    info = _read_json(pidfile)
    if info is None:
        return {}
    if stop_worker and info.get("worker"):
        stopped = await _stop_ray_worker(int(info["worker"]))
        info = _read_json(pidfile) or info  # it may have started its server meanwhile
        info["worker_stopped"] = stopped
    named = int(info.get("pid") or 0)
    # every group holding the trial's mark: the server a worker killed between starting it and
    # writing its pid left unnamed, or a process that left the named group (setsid)
    marked = {_group_of(pid) for pid in holding(CALL_MARK, str(workdir / f"{trial_id}.log"), named)}
    groups = [g for g in [named, *sorted(marked)] if g > 0]
    for group in dict.fromkeys(groups):
        await kill_group(group)
    if groups and not named:
        info |= {"pid": groups[0], "unnamed": True}
    pidfile.unlink(missing_ok=True)
    return info


async def reap_unnamed(workdir: Path, named: set[str]) -> dict[str, dict[str, Any]]:
    """`reap` of every trial whose pid file is in `workdir` (a node's folder) but not in `named`
    (the trials the run's log has): a trial whose own events a killed controller never wrote.
    Its Ray worker first (it may still be running, on a cluster that outlived the controller).
    Trial -> what `reap` found."""
    files = sorted(workdir.glob("*.json")) if workdir.is_dir() else []
    left = {}
    for pidfile in files:
        if pidfile.stem not in named:
            left[pidfile.stem] = await reap(workdir, pidfile.stem, stop_worker=True)
    return left


def _group_of(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return 0


def read_pidfile(path: Path) -> dict[str, Any] | None:
    """A trial's pid file (node, box, worker, port, pid), None when absent or unreadable."""
    return _read_json(path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


async def _stop_ray_worker(pid: int) -> bool:
    """SIGKILL a Ray worker by pid and wait (up to KILL_WAIT_S) until it is gone, if that pid is
    still a Ray worker (`ray::...`) and not this process: a pid reused since is left alone."""
    if pid == os.getpid() or not _running(pid, b"ray::"):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT_S
    while _running(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return not _running(pid)


def _running(pid: int, prefix: bytes = b"") -> bool:
    """A live (not zombie) process whose command line starts with `prefix`."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, IndexError):
        return False
    return state != "Z" and cmdline.startswith(prefix)
