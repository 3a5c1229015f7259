"""The fleet on a real local Ray cluster (a head and a worker node on this machine, the custom
resources box_1/box_2 standing in for two boxes), through `agent run --fleet ray --boxes 2`: a
small campaign whose screen loses its Ray worker mid-trial; and the clean-up tasks themselves
(pinned to a trial's node, a lost node named gone, close() with a trial in flight). Marked `ray`
(the [ray] extra): .ci/run's ray stage runs it; the README's `pytest -q` leaves it out."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import plain_config
from tools.domain.fleet_config import FleetConfig
from tools.fleet.ray_backend import RayFleet, Submitted
from tools.fleet.trial import TrialSpec, node_dir, start_detached

pytestmark = pytest.mark.ray

TINY = """
[server]
engine = "sim"

[bench]
concurrency = [1, 8]
max_tokens = 32
requests_per_level = 8

[search]
"--attention-backend" = ["flashinfer", "fa3"]

[search.baseline]
"--attention-backend" = "flashinfer"
"""

RAY_PROCESSES = ("raylet", "gcs_server", "ray::", "ray/_private", "ray/dashboard")


def live(match: tuple[str, ...]) -> dict[int, str]:
    """pid -> command line of live (not zombie) processes whose command line has one of `match`."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(m in cmd for m in match):
            out[int(entry.name)] = cmd
    return out


def with_env(needle: str) -> list[int]:
    """Live processes whose environment mentions `needle` (the simulators of a run's boxes)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle.encode() in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def descendants(root: int) -> set[int]:
    """`root` and every live process under it (a run: its cluster, workers and simulators)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo += children.get(pid, [])
    return found


SS_USER = re.compile(r'\("([^"]*)",pid=(\d+),')


def listening() -> list[tuple[str, str, int]]:
    """Every listening TCP socket of this machine, as `ss -ltnp` shows it: (local address, the
    process's name, its pid), once per process holding it."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6:
            found += [(cols[3], name, int(pid)) for name, pid in SS_USER.findall(line)]
    return found


def on_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")
    return host in ("127.0.0.1", "::1")


def env_of(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def ray_sessions() -> set[Path]:
    """Ray's session folders in its default temp folder (where a cluster without its own goes)."""
    return set(Path(tempfile.gettempdir(), "ray").glob("session_2*"))


def events(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def test_a_lost_worker_is_retried_on_the_other_box_and_nothing_is_left(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(TINY)
    ray_before = set(live(RAY_PROCESSES))
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "RAY_ADDRESS")}
    env["AGENT_LAB_TIME_SCALE"] = "50"
    run = tmp_path / "runs" / "fleet"
    argv = [sys.executable, "-m", "agent.cli", "run", "--goal", "beat baseline"]
    argv += ["--config", "agent.toml", "--runs-dir", "runs", "--run-id", "fleet"]
    child = subprocess.Popen(
        [*argv, "--fleet", "ray", "--boxes", "2"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    killed: dict[str, Any] = {}
    sockets: set[tuple[str, str]] = set()  # (address, process) listening in the run's tree
    token, server_env = "", {}
    sessions_before = ray_sessions()
    try:
        deadline = time.monotonic() + 150
        looked = 0.0
        while not killed and child.poll() is None and time.monotonic() < deadline:
            if time.monotonic() - looked > 1:  # once a second: the machine has other work
                looked = time.monotonic()
                tree = descendants(child.pid)
                sockets |= {(addr, name) for addr, name, pid in listening() if pid in tree}
                for pid in tree:  # the cluster's processes got the token
                    token = token or env_of(pid).get("RAY_AUTH_TOKEN", "")
            for pidfile in (run / "fleet").glob("*/screen-*.json"):  # <node id>/<trial>.json
                try:
                    info = json.loads(pidfile.read_text())
                except (OSError, ValueError):
                    continue
                if info.get("pid"):  # the screen's server is up: its worker dies now
                    server_env = env_of(int(info["pid"]))
                    os.kill(int(info["worker"]), signal.SIGKILL)
                    killed = {"trial": pidfile.stem, "folder": pidfile.parent.name, **info}
                    break
            time.sleep(0.05)
        out, err = child.communicate(timeout=max(10, deadline - time.monotonic()))
    finally:
        if child.poll() is None:
            child.terminate()
            child.communicate(timeout=60)
    assert killed, "no screen trial was seen running: " + err[-2000:]
    assert child.returncode == 0, out[-2000:] + err[-3000:]

    # closed to the network: every socket the run listened on was on loopback - the GCS, the
    # raylets, the workers, the controller's own core worker, Ray's agents and the simulators
    names = {name for _, name in sockets}
    assert {"gcs_server", "raylet", "python"} <= names, sockets
    assert [s for s in sockets if not on_loopback(s[0])] == []
    # token authentication: the controller held a token for its cluster, by reference only
    assert len(token) >= 32 and "fleet: a local cluster of 2 boxes on 127.0.0.1 only" in err
    assert "SIM_GPU_DIR" in server_env and "RAY_AUTH_TOKEN" not in server_env  # not the server's
    assert not [p for p in run.rglob("*") if p.is_file() and token.encode() in p.read_bytes()]
    # its folders are its owner's, and Ray's session folders went with the cluster
    for folder in [run / "fleet", *(run / "fleet").iterdir()]:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    logs = list((run / "fleet").glob("*/*.log"))
    assert logs and {stat.S_IMODE(p.stat().st_mode) for p in logs} == {0o600}
    assert ray_sessions() - sessions_before == set()
    assert not Path(tempfile.gettempdir(), f"campaign-ray-{os.getuid()}", str(child.pid)).exists()

    log = events(run)
    retried = [e for e in log if e["type"] == "trial_retried"]
    assert [e["trial"] for e in retried] == [killed["trial"]]
    assert "lost on its node" in retried[0]["reason"]
    ended = {e["trial"]: e for e in log if e["type"] == "trial_ended"}
    lost, again = ended[killed["trial"]], ended[killed["trial"] + "-try2"]
    assert not lost["ok"] and lost["box"] == killed["box"]
    # the pid file was in the node's own folder, which the controller does not read: the server
    # was killed by the clean-up task on that node, which names itself
    assert killed["folder"] == killed["node"] == lost["node"]
    by = f"{killed['box']} (node {killed['node'][:12]})"
    assert lost["cleanup"] == f"{by} killed the server group {killed['pid']} the lost worker left"
    assert not list((run / "fleet").glob("*.json"))
    assert again["ok"] and again["box"] != killed["box"]  # retried on the other box
    # each trial was placed (its node and box in the log) before it ended, the lost one too
    placed = {e["trial"]: e for e in log if e["type"] == "trial_placed"}
    assert set(placed) == set(ended)
    for trial, end in ended.items():
        assert placed[trial]["seq"] < end["seq"]
        assert (placed[trial]["node"], placed[trial]["box"]) == (end["node"], end["box"])
    # the A/A pair ran on both boxes at once
    first = [ended[t] for t in ended if t.startswith(("baseline", "noise"))]
    assert {e["box"] for e in first} == {"box1", "box2"}
    assert max(e["started"] for e in first) < min(e["ended"] for e in first)
    # the retry's measurement is the screen's: the campaign went on from it to its conclusion
    labels = [e["label"] for e in log if e["type"] == "benchmark"]
    assert killed["trial"] in labels
    rec = json.loads((run / "recommendation.json").read_text())
    assert rec["value"] > 0 and rec["baseline_value"] > 0
    assert log[-1]["type"] == "run_finished" and log[-1]["exit_code"] == 0

    # nothing left: no simulator of the run's boxes, no Ray process of its cluster
    assert with_env(str(run / "fleet")) == []
    assert set(live(RAY_PROCESSES)) - ray_before == set()


def server(folder: Path, trial: str, **where: Any) -> int:
    """A server a trial left on a node: its own session, its pid file in the node's folder."""
    folder.mkdir(parents=True, exist_ok=True)
    pid = start_detached("sleep 60", str(folder / f"{trial}.log"), folder)
    (folder / f"{trial}.json").write_text(json.dumps({**where, "pid": pid}))
    return pid


def gone(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


async def test_clean_up_runs_on_the_trials_node_and_a_lost_node_is_named_gone(
    tmp_path: Path,
) -> None:
    ray_before = set(live(RAY_PROCESSES))
    fleet = RayFleet(FleetConfig(), tmp_path)
    fleet.connect(boxes=2)
    pids: list[int] = []
    try:
        # the cluster's GCS refuses a client without its token
        assert fleet.local is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        probe = f"from ray._raylet import GcsClient; GcsClient(address='{fleet.local.address}')"
        refused = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120
        )
        assert refused.returncode != 0 and "AuthenticationError" in refused.stderr, refused
        # an agent that joins it with the token says it has authentication
        join = (
            "from pathlib import Path; from tools.domain.fleet_config import FleetConfig; "
            "from tools.fleet.ray_backend import RayFleet; f = RayFleet(FleetConfig(), "
            f"Path({str(tmp_path / 'joined')!r})); f.connect(); print(f.auth); f.shutdown()"
        )
        env |= {"RAY_ADDRESS": fleet.local.address, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        env |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": fleet.local.token}
        joined = subprocess.run(
            [sys.executable, "-c", join], env=env, capture_output=True, text=True, timeout=120
        )
        assert joined.stdout.strip() == (
            f"joined {fleet.local.address} with token authentication (RAY_AUTH_MODE=token)"
        ), joined
        temp = fleet.local.temp
        by_box = {box: node for node, box in fleet.nodes().items()}
        one, two = by_box["box1"], by_box["box2"]
        # box2's task reads box2's folder only: the same trial's file on box1 stays
        pids.append(on_one := server(node_dir(tmp_path, one), "t1", node=one))
        pids.append(on_two := server(node_dir(tmp_path, two), "t1", node=two))
        text = await fleet.clean_up(two, "box2", "t1")
        by = f"box2 (node {two[:12]})"
        assert text == f"{by} killed the server group {on_two} the lost worker left"
        assert gone(on_two) and not gone(on_one)
        assert await fleet.clean_up(two, "box2", "t1") == (
            f"box2 (node {two[:12]}): nothing left (the trial had cleaned up)"
        )
        # a trial the log never named (a killed model run's call held in the turn's buffer):
        # found by its pid file on the node that ran it; the log's trials are left alone
        pids.append(unnamed := server(node_dir(tmp_path, two), "t9", node=two))
        done, failed = await fleet.clean_up_unnamed({"t1"})
        assert failed == [] and done == {"t9": f"{by}: killed the server group {unnamed} it left"}
        assert gone(unnamed) and not gone(on_one)
        # close(): a trial in flight on box1 (its worker a process that is no Ray worker, so it
        # stays) - its server is killed by a task on box1 before the cluster goes
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        spec = TrialSpec("t1", plain_config(), {}, [])
        fleet.pending[future] = Submitted(spec, None, None, 1, on=one, box="box1")
        # box2 goes down: in the lab its servers go with it, as on a real machine
        pids.append(on_two := server(node_dir(tmp_path, two), "t2", node=two))
        assert fleet.local is not None
        fleet.local.kill_box(0)
        assert gone(on_two)
        assert await fleet.clean_up(two, "box2", "t2") == (
            f"box2 (node {two[:12]}) is gone: its processes went with it"
        )
        # a trial not back by its deadline (a wedged worker: this future never completes) is
        # cancelled, failed with the reason, and its server killed on its node
        late: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        pids.append(on_late := server(node_dir(tmp_path, one), "t3", node=one))
        spec3 = TrialSpec("t3", plain_config(), {}, [])
        fleet.pending[late] = Submitted(spec3, None, None, 1, on=one, box="box1", deadline=0.0)
        sub3, out3 = await fleet.next_done("t3")
        assert (sub3.spec.trial_id, out3.ok, out3.end) == ("t3", False, "failed")
        assert out3.reason == "not back within 120 min (fleet.trial_timeout_min): cancelled"
        assert f"killed the server group {on_late}" in out3.cleanup and gone(on_late)
        assert late.cancelled() and late not in fleet.pending
        done = await fleet.close()
        assert done == {"t1": f"box1 (node {one[:12]}) killed the server group {on_one} "
                        "a trial still running left"}  # fmt: skip
        assert future.cancelled() and gone(on_one)
        # the cluster's private temp folder went with it, and its token with the environment
        assert not temp.exists() and "RAY_AUTH_TOKEN" not in os.environ
    finally:
        fleet.shutdown()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    assert set(live(RAY_PROCESSES)) - ray_before == set()
