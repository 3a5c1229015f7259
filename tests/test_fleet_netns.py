"""The fleet on two real boxes: a head box and a worker box, each a network namespace of its own
joined by a veth pair (10.201.0.1 <-> 10.201.0.2), a Ray node in each started by `ray start`
with token authentication (tests/netns_cluster.py). `agent run --fleet ray` joins it from the
head box (RAY_ADDRESS, the token) as an operator's agent joins a cluster of theirs. Shown: trials
land on both nodes, addresses and all; nothing listens but on the link and the boxes' own
loopbacks, nothing at all in this machine's namespace; the GCS refuses a client without the
token, across the link; the worker box lost mid-trial (every process of it SIGKILLed, servers
included) is a lost trial run again on the head box, and the box back (a new node) takes trials.

Marked `ray`; needs root and `ip netns`: skipped, with the reason, where either is missing - but
failed in CI (CI set, as test_guard_sandbox does: CI runs as root). Both tests share one cluster
(about 40 s to start); the first leaves it whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.netns_cluster import (
    GCS_PORT,
    HEAD_IP,
    WORKER_IP,
    TwoBoxes,
    Unavailable,
    ip,
    netns_pids,
)
from tests.test_fleet_ray import SS_USER, TINY, events, with_env

pytestmark = pytest.mark.ray

CONFIG = TINY + '\n[fleet]\naddress = "auto"\nresources = { box = 1 }\n'
RUN_S = 300  # one campaign of the tiny space on a loaded machine, with a node lost


@pytest.fixture(scope="module")
def boxes() -> Iterator[TwoBoxes]:
    two = TwoBoxes()
    try:
        two.start()
    except Unavailable as why:
        two.close()
        if os.environ.get("CI"):  # CI runs as root: a two-box test that is not there fails
            pytest.fail(f"no network namespaces here: {why}")
        pytest.skip(f"no network namespaces here: {why}")
    except BaseException:
        two.close()
        raise
    try:
        yield two
    finally:
        two.close()
    # nothing left: both namespaces (and the veth pair) gone, no process of either, no folder
    names = ip("netns", "list").stdout
    assert two.head not in names and two.worker not in names
    assert with_env(str(two.temp)) == [] and not two.temp.exists()


def sockets(ns: str | None) -> set[tuple[str, str]]:
    """(local address, process name) of every listening TCP socket in namespace `ns` (None: this
    machine's own), as `ss -ltnp` shows them."""
    argv = ["ss", "-ltnpH"] if ns is None else ["ip", "netns", "exec", ns, "ss", "-ltnpH"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout
    found = set()
    for line in out.splitlines():
        cols = line.split()
        found |= {(cols[3], name) for name, _ in SS_USER.findall(line)} if len(cols) >= 4 else set()
    return found


def holders(ns: str | None) -> set[int]:
    """The pids holding a listening TCP socket in namespace `ns` (None: this machine's own)."""
    argv = ["ss", "-ltnpH"] if ns is None else ["ip", "netns", "exec", ns, "ss", "-ltnpH"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout
    return {int(pid) for _, pid in SS_USER.findall(out)}


def host(address: str) -> str:
    return address.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")


def addresses(ns: str) -> set[str]:
    """Every address of namespace `ns`'s interfaces (`ip -o addr`)."""
    out = ip("-n", ns, "-o", "addr", check=False).stdout
    return {line.split()[3].split("/")[0] for line in out.splitlines()}


def campaign(boxes: TwoBoxes, tmp_path: Path, run_id: str) -> tuple[subprocess.Popen[str], Path]:
    """`agent run --fleet ray` started on the head box, joining the cluster with its token."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "agent.toml").write_text(CONFIG)
    env = boxes.env("driver") | {"RAY_ADDRESS": boxes.address, "AGENT_LAB_TIME_SCALE": "50"}
    env.pop("RAY_TMPDIR")  # a driver that joins uses the cluster's session folder
    env.pop("ANTHROPIC_API_KEY", None)
    argv = [sys.executable, "-m", "agent.cli", "run", "--goal", "beat baseline", "--fleet", "ray"]
    argv += ["--config", "agent.toml", "--runs-dir", "runs", "--run-id", run_id]
    return boxes.popen(boxes.head, argv, env, tmp_path), tmp_path / "runs" / run_id


def finish(child: subprocess.Popen[str], deadline: float) -> tuple[str, str]:
    try:
        return child.communicate(timeout=max(10, deadline - time.monotonic()))
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate(timeout=60)


def gcs_client(boxes: TwoBoxes, token: str | None) -> subprocess.CompletedProcess[str]:
    """A GCS client on the worker box, across the link: with `token`, or without any."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    if token is not None:
        env |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    probe = (
        "from ray._raylet import GcsClient; "
        f"c = GcsClient(address='{boxes.address}'); print(len(c.get_all_node_info()))"
    )
    return boxes.run(boxes.worker, [sys.executable, "-c", probe], env)


def test_a_campaign_lands_on_both_boxes_over_the_link_and_only_the_link_listens(
    boxes: TwoBoxes, tmp_path: Path
) -> None:
    nodes = boxes.nodes()  # node id -> address
    assert sorted(nodes.values()) == [HEAD_IP, WORKER_IP]
    child, run = campaign(boxes, tmp_path, "two")
    seen: dict[str | None, set[tuple[str, str]]] = {None: set(), boxes.head: set()}
    seen[boxes.worker] = set()
    ours: set[int] = set()  # every process of both boxes seen while the run ran
    deadline = time.monotonic() + RUN_S
    while child.poll() is None and time.monotonic() < deadline:
        ours |= set(netns_pids(boxes.head)) | set(netns_pids(boxes.worker))
        for ns in seen:
            seen[ns] |= sockets(ns)
        if ns_root := holders(None) & ours:
            pytest.fail(f"a process of the cluster listens in this machine's namespace: {ns_root}")
        time.sleep(1)  # once a second: the machine has other work
    out, err = finish(child, deadline)
    assert child.returncode == 0, out[-2000:] + err[-3000:]

    # trials on both boxes: both nodes, by id and address, in the run's records
    log = events(run)
    ended = [e for e in log if e["type"] == "trial_ended"]
    assert {nodes[e["node"]] for e in ended} == {HEAD_IP, WORKER_IP}, ended
    assert {e["box"] for e in ended} == {"box1", "box2"}
    assert all(e["ok"] for e in ended), ended
    started = next(e for e in log if e["type"] == "fleet_started")
    assert set(started["nodes"]) == set(nodes) and started["slots"] == 2
    auth = f"joined {boxes.address} with token authentication (RAY_AUTH_MODE=token)"
    assert started["auth"] == auth and f"fleet: {auth}" in err
    assert log[-1]["type"] == "run_finished" and log[-1]["exit_code"] == 0
    assert not [p for p in run.rglob("*") if p.is_file() and boxes.token.encode() in p.read_bytes()]

    # ss -ltnp: the GCS, both raylets, the workers, the controller and the simulators listened;
    # each box has only its loopback and its end of the link, so Ray's `*:PORT` is the link
    # there; nothing of the cluster listened in this machine's own namespace
    assert {"gcs_server", "raylet", "python"} <= {name for _, name in seen[boxes.head]}, seen
    assert {"raylet"} <= {name for _, name in seen[boxes.worker]}, seen
    for ns, link in ((boxes.head, HEAD_IP), (boxes.worker, WORKER_IP)):
        assert addresses(ns) - {"127.0.0.1", "::1"} - {link} <= {
            a for a in addresses(ns) if a.startswith("fe80:")
        }  # the link's own IPv6 link-local, no other
        odd = {s for s in seen[ns] if host(s[0]) not in ("*", "0.0.0.0", "127.0.0.1", "::1", link)}
        assert odd == set(), odd
    assert (f"*:{GCS_PORT}", "gcs_server") in seen[boxes.head]

    # the GCS asks for the token, across the link: none or a wrong one is refused
    for token in (None, "not-the-token-" + "x" * 32):
        refused = gcs_client(boxes, token)
        assert refused.returncode != 0 and "AuthenticationError" in refused.stderr, refused
    allowed = gcs_client(boxes, boxes.token)
    assert allowed.returncode == 0 and allowed.stdout.strip() == "2", allowed
    # no simulator of the run is left on either box
    assert with_env(str(run / "fleet")) == []


def test_the_worker_box_lost_mid_trial_then_back(boxes: TwoBoxes, tmp_path: Path) -> None:
    before = boxes.nodes()
    worker = next(n for n, addr in before.items() if addr == WORKER_IP)
    child, run = campaign(boxes, tmp_path, "lost")
    killed: dict[str, Any] = {}
    deadline = time.monotonic() + RUN_S
    while not killed and child.poll() is None and time.monotonic() < deadline:
        for pidfile in (run / "fleet" / worker).glob("*.json"):  # a trial on the worker box
            try:
                info = json.loads(pidfile.read_text())
            except (OSError, ValueError):
                continue
            if info.get("pid"):  # its server is up: the box goes down, servers and all
                killed = {"trial": pidfile.stem, "pids": boxes.kill_worker(), **info}
                break
        time.sleep(0.1)
    assert killed, "no trial was seen running on the worker box"
    assert killed["pid"] in killed["pids"]  # the server was a process of the worker box
    boxes.start_worker()  # the box comes back: a new Ray node at the same address
    out, err = finish(child, deadline)
    assert child.returncode == 0, out[-2000:] + err[-3000:]

    log = events(run)
    retried = [e for e in log if e["type"] == "trial_retried"]
    assert [e["trial"] for e in retried] == [killed["trial"]], retried
    assert "lost on its node" in retried[0]["reason"] and retried[0]["avoid"] == worker
    ended = {e["trial"]: e for e in log if e["type"] == "trial_ended"}
    lost, again = ended[killed["trial"]], ended[killed["trial"] + "-try2"]
    assert not lost["ok"] and (lost["node"], lost["box"]) == (worker, "box2")
    # a joined cluster's node Ray declared dead: the controller cannot tell a box that went
    # down from a raylet that stopped, so its server is not said gone but named at the end
    dead = "Ray declared the node dead (its server runs on if only its raylet stopped)"
    assert lost["cleanup"] == (
        f"could not clean up on box2 (node {worker[:12]}): {dead}; named left at the run's end"
    )
    [left] = [e for e in log if e["type"] == "trial_left"]
    assert (left["trial"], left["node"], left["reason"]) == (
        killed["trial"],
        worker,
        f"LEFT on box2 (node {worker[:12]}): {dead}",
    )
    assert again["ok"] and again["node"] != worker
    assert log[-1]["type"] == "run_finished" and log[-1]["exit_code"] == 0

    # back: a new node at the worker's address, and a campaign's trials land on it
    after = boxes.nodes()
    back = next(n for n, addr in after.items() if addr == WORKER_IP)
    assert back != worker and worker not in after
    child, run = campaign(boxes, tmp_path / "back", "back")
    out, err = finish(child, time.monotonic() + RUN_S)
    assert child.returncode == 0, out[-2000:] + err[-3000:]
    ended_back = [e for e in events(run) if e["type"] == "trial_ended"]
    assert back in {e["node"] for e in ended_back}, ended_back
    assert with_env(str(tmp_path)) == []
