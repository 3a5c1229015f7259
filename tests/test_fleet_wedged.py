"""A wedged node: alive to Ray, its raylet runs nothing (here: SIGSTOPped). Two real trials on a
real local Ray cluster of three boxes, each on its own box, whose servers listen and never get
ready; both boxes are wedged, both trials pass their deadline (fleet.trial_timeout_min) and are
cancelled, and their clean-up tasks get no answer in fleet.reap_timeout_s. Box2 then answers
again (SIGCONT): its owed clean-up runs and kills the server, recorded once (`trial_cleaned`).
Box3 never answers: at the run's end its server is named LEFT (`trial_left`, with its process
group, port and the command to kill it by hand), and that command does kill it.

Ray declares a node dead after about 5 health checks that fail (3 s apart, 10 s each by default:
a raylet stopped for ~30-60 s); a node stopped for longer than that here would be a dead node,
not a wedged one, so this cluster's GCS tolerates more failures (RAY_health_check_failure_
threshold, set before it starts). Marked `ray`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent.fleet.controller import record_cleanups
from agent.view.fleet import fleet_line
from state.run import Run
from tests.conftest import group_alive
from tests.test_fleet_ray import RAY_PROCESSES, listening, live
from tools.domain.config import Config, ServerConfig
from tools.domain.fleet_config import FleetConfig
from tools.fleet.ray_backend import RayFleet
from tools.fleet.trial import TrialSpec, node_dir

# a loaded machine: the cluster, the trials' workers, Ray's health checks take their time
pytestmark = [pytest.mark.ray, pytest.mark.timeout(900)]

# a server that listens and never answers (never ready: its trial runs until its deadline). With
# --escape, a part of its group is out of the lab's reach, as a server on a box of a real cluster
# is out of this machine's: the lab's shutdown kills what its cluster started on this machine
# (the worker's children, whatever carries its RAY_TMPDIR), a real box's server stays. It drops
# that mark and leaves a member of its group (holding the socket) that is no child of the worker.
MUTE = """
import os, socket, sys, time
if "--escape" in sys.argv and "RAY_TMPDIR" in os.environ:
    env = {k: v for k, v in os.environ.items() if k != "RAY_TMPDIR"}
    os.execve(sys.executable, [sys.executable, *sys.argv], env)
port = int(sys.argv[sys.argv.index("--port") + 1])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen()
if "--escape" in sys.argv and os.fork() == 0 and os.fork() != 0:
    os._exit(0)  # the middle one: its child, still in the group, is nobody's child now
time.sleep(3600)
"""


def events(run: Run) -> list[dict[str, Any]]:
    return [json.loads(line) for line in run.events_path.read_text().splitlines()]


def listens(port: int) -> bool:
    return any(addr.rsplit(":", 1)[1] == str(port) for addr, _, _ in listening())


def until(check: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return bool(check())


async def test_a_wedged_nodes_clean_up_waits_for_it_and_one_that_never_answers_is_left(
    tmp_path: Path, make_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_health_check_failure_threshold", "1000")
    script = tmp_path / "mute.py"
    script.write_text(MUTE)
    ray_before = set(live(RAY_PROCESSES))
    run, _ = make_run()
    # the deadline leaves a loaded machine time to start each trial's worker and server
    fleet = RayFleet(FleetConfig(trial_timeout_min=1.5, reap_timeout_s=5), tmp_path / "fleet")
    fleet.connect(boxes=3)
    stopped: list[int] = []
    servers: list[int] = []
    try:
        assert fleet.local is not None
        raylets = {n.node_id: n.all_processes["raylet"][0].process.pid for n in fleet.local.workers}
        by_box = {box: node for node, box in fleet.nodes().items()}
        two, three = by_box["box2"], by_box["box3"]
        for trial, node, escape in (("t1", two, ""), ("t2", three, " --escape")):
            server = ServerConfig(
                engine="sim", command=f"{sys.executable} {script}{escape}", ready_timeout_s=900
            )
            spec = TrialSpec(trial, Config(server=server, search={}), {}, [])
            fleet.submit(spec, pin=node)
        infos: dict[str, dict[str, Any]] = {}

        def up() -> bool:
            for trial, node in (("t1", two), ("t2", three)):
                with contextlib.suppress(OSError, ValueError):
                    info = json.loads(
                        (node_dir(tmp_path / "fleet", node) / f"{trial}.json").read_text()
                    )
                    if info.get("pid") and listens(int(info["port"])):
                        infos[trial] = info
            return len(infos) == 2

        deadline = time.monotonic() + 80
        while not up() and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        assert len(infos) == 2, f"the trials' servers did not come up: {infos}"
        servers += [int(i["pid"]) for i in infos.values()]
        for node in (two, three):  # both boxes wedged: alive to Ray, running nothing
            os.kill(raylets[node], signal.SIGSTOP)
            stopped.append(raylets[node])
        assert set(fleet.nodes()) >= {two, three}

        for trial, box, node in (("t1", "box2", two), ("t2", "box3", three)):
            _, out = await fleet.next_done(trial)
            assert (out.trial_id, out.end) == (trial, "failed")
            assert out.reason == "not back within 1.5 min (fleet.trial_timeout_min): cancelled"
            assert out.cleanup == (
                f"could not clean up on {box} (node {node[:12]}) yet: no answer in 5 s "
                "(fleet.reap_timeout_s); done when the node answers, named left at the run's "
                "end if it never does"
            )
        one, other = infos["t1"], infos["t2"]
        # nothing was killed yet: the servers still listen
        assert group_alive(one["pid"]) and listens(one["port"])
        assert group_alive(other["pid"]) and listens(other["port"])
        record_cleanups(run, fleet)
        assert [e for e in events(run) if e["type"] in ("trial_cleaned", "trial_left")] == []

        # box2 answers again: its clean-up task, submitted while it was wedged, runs now
        os.kill(raylets[two], signal.SIGCONT)
        stopped.remove(raylets[two])

        def cleaned() -> bool:
            record_cleanups(run, fleet)  # as the controller does at each of its waits
            return any(e["type"] == "trial_cleaned" for e in events(run))

        deadline = time.monotonic() + 180
        while not cleaned() and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        done = [e for e in events(run) if e["type"] == "trial_cleaned"]
        assert len(done) == 1, events(run)[-5:]
        assert (done[0]["trial"], done[0]["node"], done[0]["box"]) == ("t1", two, "box2")
        assert done[0]["cleanup"] == (
            f"done after it got no answer at first: box2 (node {two[:12]}) killed the server "
            f"group {one['pid']} a trial still running left"
        )
        assert until(lambda: not group_alive(one["pid"]) and not listens(one["port"]), 30)
        assert fleet_line(done[0]) == f"fleet: t1: {done[0]['cleanup']}"

        # box3 never answers: at the run's end its clean-up gets one more wait, then is LEFT
        await fleet.close()
        record_cleanups(run, fleet)
        record_cleanups(run, fleet)  # nothing twice
        late = [e for e in events(run) if e["type"] in ("trial_cleaned", "trial_left")]
        assert [e["type"] for e in late] == ["trial_cleaned", "trial_left"]
        left = late[1]
        assert (left["trial"], left["node"], left["box"]) == ("t2", three, "box3")
        assert (left["pgid"], left["port"]) == (other["pid"], other["port"])
        assert left["reason"] == (
            f"LEFT on box3 (node {three[:12]}): its clean-up got no answer from the node by the "
            "run's end (each wait 5 s, fleet.reap_timeout_s)"
        )
        assert left["kill"] == f"on box3: kill -KILL -- -{other['pid']}"
        line = fleet_line(left)
        assert line is not None and "LEFT on box3" in line and left["kill"] in line
        # it is left indeed (out of the lab's sweep, as on a real box), and the command kills it
        assert group_alive(other["pid"]) and listens(other["port"])
        subprocess.run(["bash", "-c", left["kill"].split(": ", 1)[1]], check=True, timeout=30)
        assert until(lambda: not group_alive(other["pid"]) and not listens(other["port"]), 30)
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        fleet.shutdown()
        for pid in servers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    assert until(lambda: not set(live(RAY_PROCESSES)) - ray_before, 30)


async def test_a_node_ray_declares_dead_while_wedged_is_not_said_to_have_taken_its_server(
    tmp_path: Path, make_run: Any
) -> None:
    """Ray's own health checks (defaults here) declare a node whose raylet is stopped dead; its
    server still runs on this machine, so its trial's clean-up is not `gone: its processes went
    with it` but named LEFT at the run's end, with the group and port that still listen."""
    script = tmp_path / "mute.py"
    script.write_text(MUTE)
    ray_before = set(live(RAY_PROCESSES))
    run, _ = make_run()
    # its deadline is met only when the controller next waits on it (below, once Ray has
    # declared the node dead): its clean-up then asks a node that is not alive
    fleet = RayFleet(FleetConfig(trial_timeout_min=0.1, reap_timeout_s=5), tmp_path / "fleet")
    fleet.connect(boxes=2)
    raylet = 0
    server = 0
    try:
        assert fleet.local is not None
        two = fleet.local.workers[0].node_id
        raylet = fleet.local.workers[0].all_processes["raylet"][0].process.pid
        config = ServerConfig(engine="sim", command=f"{sys.executable} {script} --escape")
        fleet.submit(TrialSpec("t1", Config(server=config, search={}), {}, []), pin=two)
        pidfile = node_dir(tmp_path / "fleet", two) / "t1.json"
        info: dict[str, Any] = {}

        def up() -> bool:
            with contextlib.suppress(OSError, ValueError):
                info.update(json.loads(pidfile.read_text()))
            return bool(info.get("pid")) and listens(int(info["port"]))

        deadline = time.monotonic() + 80
        while not up() and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        assert up(), f"the trial's server did not come up: {info}"
        server = int(info["pid"])
        os.kill(raylet, signal.SIGSTOP)
        deadline = time.monotonic() + 240  # Ray's defaults: about 30-65 s
        while two in fleet.nodes() and time.monotonic() < deadline:
            await asyncio.sleep(1)
        assert two not in fleet.nodes(), "Ray did not declare the stopped node dead"
        # the trial is cancelled at its deadline (Ray did not fail its task here: its worker
        # runs on), or lost with its node: its clean-up finds its server's group running here
        _, out = await fleet.next_done("t1")
        assert out.reason.startswith(("not back within 0.1 min", "lost on its node")), out.reason
        where = f"box2 (node {two[:12]})"
        dead = f"Ray declared the node dead, but its server's group {server} still runs on "
        dead += "this machine"
        assert out.cleanup == f"could not clean up on {where}: {dead}; named left at the run's end"
        await fleet.close()
        record_cleanups(run, fleet)
        late = [e for e in events(run) if e["type"] in ("trial_cleaned", "trial_left")]
        assert [e["type"] for e in late] == ["trial_left"]
        assert late[0]["reason"] == f"LEFT on {where}: {dead}"
        assert (late[0]["pgid"], late[0]["port"]) == (server, info["port"])
        assert group_alive(server) and listens(info["port"])  # it is left indeed
        subprocess.run(["bash", "-c", late[0]["kill"].split(": ", 1)[1]], check=True, timeout=30)
        assert until(lambda: not group_alive(server) and not listens(info["port"]), 30)
    finally:
        if raylet:
            with contextlib.suppress(ProcessLookupError):
                os.kill(raylet, signal.SIGCONT)
        fleet.shutdown()
        if server:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server, signal.SIGKILL)
    assert until(lambda: not set(live(RAY_PROCESSES)) - ray_before, 30)
