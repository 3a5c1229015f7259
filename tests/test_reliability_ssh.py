"""SSH faults under a running campaign: the connection is cut 12 times at random moments (seeded)
while the real loop drives tools on the host; every cut is survived by a reconnect and the work
goes on to the end. A changed host key is refused (tests/test_hosts_ssh.py also checks SSHHost
alone; here it is the tool call the model makes).

The cuts are placed on the work actually done, not on the clock alone: each waits for the
connection the previous cut forced the host to make (and for a step that succeeded since), then
lands a random moment into the work on it (mid-command, mid-transfer, or between calls), and the
campaign ends only with a call that started after the last cut. So every cut hits a live
connection and is followed by a reconnect, however fast or slow the machine: "12 cuts, 13
connections" holds on a loaded box too. Cuts timed by the clock alone failed 7 runs of 8 beside
two CPU hogs: a cut fell between a cut and its reconnect, or after the last remote call."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncssh
import pytest

from agent.brains.base import Turn, TurnRequest
from agent.session import Limits, make_agent, start
from state.events import read_events
from tools.domain.config import Config, ServerConfig

if TYPE_CHECKING:
    from tests.ssh_fixtures import Proxy, SSHServerBase

pytest_plugins = ["tests.ssh_fixtures"]

CUTS = 12
STEPS = 30
RECONNECT_DEADLINE_S = 120.0  # a campaign that makes no new connection for this long stalled
# what a cut may cost the call it lands on: the model is told, and the next call reconnects
CUT_ERRORS = (
    "was lost during the command",
    "cannot open a channel",
    "failed:",
    "cannot connect",
    "SFTP is not available",
)


class RetryingBrain:
    """Works through STEPS steps on the host; a step whose call failed is tried again (as a model
    would: the same intent, a fresh call), until the step succeeds. Keeps going past STEPS while
    the cutter is still cutting, so that every cut lands on live work."""

    name = "retrying"

    def __init__(self, cutter_done: threading.Event) -> None:
        self.cutter_done = cutter_done
        self.step = 0
        self.attempt = 0
        self.failures: list[str] = []
        self.after_cuts: int | None = None  # the first step asked for once the cuts were over

    async def next_turn(self, request: TurnRequest) -> Turn:
        last = request.state.last_results
        if last and last[-1]["is_error"]:
            self.failures.append(str(last[-1]["text"]))
            self.attempt += 1
        elif last:
            self.step, self.attempt = self.step + 1, 0
        if self.after_cuts is None and self.cutter_done.is_set():
            self.after_cuts = self.step  # this call starts after the last cut: it reconnects
        if self.step >= STEPS and self.after_cuts is not None and self.step > self.after_cuts:
            return Turn(
                content=[{"type": "text", "text": "all steps done"}], stop_reason="end_turn"
            )
        name, inp = self.call(self.step)
        block = {
            "type": "tool_use",
            "id": f"toolu_{self.step}_{self.attempt}",
            "name": name,
            "input": inp,
        }
        return Turn(content=[block], stop_reason="tool_use")

    def call(self, i: int) -> tuple[str, dict[str, Any]]:
        kind = i % 4
        if kind == 0:  # a command that takes a while: cuts land mid-command
            return "bash", {"command": f"sleep 0.{i % 7}; touch step-{i}; echo try {self.attempt}"}
        if kind == 1:
            return "read_log", {"path": f"step-{i - 1}", "mode": "range", "length": 64}
        if kind == 2:
            return "put_file", {"local_path": "events.jsonl", "remote_path": f"copy-{i}.jsonl"}
        back = f"outputs/back-{i}.jsonl"  # get_file saves into outputs/ or logs/ (issue 47)
        return "get_file", {"remote_path": f"copy-{i - 1}.jsonl", "local_path": back}


def cut_live_connections(
    proxy: Proxy,
    host: Any,
    brain: RetryingBrain,
    rng: random.Random,
    done: threading.Event,
    hits: list[int],
) -> None:
    """CUTS cuts, each a random moment into the work on a connection the host made since the
    previous cut, once a step has succeeded since then: a step is not cut again and again (its
    identical failures would read as a stuck model). A campaign that stalls ends the cutting:
    the test then fails on the number of cuts, not on a timeout."""
    made, step = 0, -1
    try:
        for _ in range(CUTS):
            deadline = time.monotonic() + RECONNECT_DEADLINE_S
            while host.connects <= made or brain.step <= step:  # the reconnect, and progress
                if time.monotonic() > deadline or done.is_set():  # stalled, or the loop ended
                    return
                threading.Event().wait(0.01)
            made = host.connects
            threading.Event().wait(rng.uniform(0.05, 0.6))
            hits.append(len(proxy.links))  # the open links the cut aborts
            step = brain.step
            proxy.cut()
    finally:
        done.set()


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("server_name", "seed"), [("asyncssh_server", 1), ("sshd_server", 2)])
async def test_random_cuts_reconnect_and_the_campaign_goes_on(
    server_name: str,
    seed: int,
    request: pytest.FixtureRequest,
    ssh_proxy: Callable[[SSHServerBase], Proxy],
    tmp_path: Path,
) -> None:
    server: SSHServerBase = request.getfixturevalue(server_name)
    proxy = ssh_proxy(server)
    host = server.host_config("box", port=proxy.port, workdir=str(tmp_path / "work"))
    config = Config(hosts=[host], server=ServerConfig(command="true", host="box"))
    run = start("survive cuts", config, "autopilot", tmp_path / "runs", "cuts", Limits(500))
    done, hits = threading.Event(), list[int]()
    brain = RetryingBrain(done)
    agent = make_agent(run, brain, config)
    ssh = agent.ctx.hosts.get("box")  # the loop's own host: it counts its connections
    cutter = threading.Thread(
        target=cut_live_connections,
        args=(proxy, ssh, brain, random.Random(seed), done, hits),
        daemon=True,
    )
    cutter.start()
    try:
        code = await agent.run_loop()
        connects = ssh.connects
    finally:
        done.set()  # (a failed loop: stop cutting)
        cutter.join(30)
        await agent.ctx.hosts.close()
        run.close()
    print(f"cuts {hits}, connects {connects}, failed calls {len(brain.failures)}")
    assert code == 0 and brain.step >= STEPS
    assert len(hits) == CUTS and all(hits), hits  # every cut aborted a live connection
    assert connects >= CUTS + 1, (connects, hits)  # each cut was followed by a reconnect
    for text in brain.failures:  # what a cut cost was said in one clear line
        assert any(e in text for e in CUT_ERRORS) and "Traceback" not in text, text
    work = tmp_path / "work"
    assert all((work / f"step-{i}").exists() for i in range(0, STEPS, 4))
    events = read_events(run.events_path)
    assert not events.torn and events.events[-1]["type"] == "run_finished"


async def test_a_changed_host_key_is_refused_through_the_tools(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    server: SSHServerBase = request.getfixturevalue("asyncssh_server")
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{server.port} {other}\n")
    host = server.host_config("box", known_hosts=str(known), workdir=str(tmp_path / "work"))
    config = Config(hosts=[host], server=ServerConfig(command="true", host="box"))
    run = start("g", config, "autopilot", tmp_path / "runs", "key", Limits())
    agent = make_agent(run, RetryingBrain(threading.Event()), config)
    marker = tmp_path / "work" / "ran"
    try:
        for name, inp in (
            ("bash", {"command": f"touch {marker}"}),
            ("start_job", {"name": "j", "command": f"touch {marker}"}),
            ("read_log", {"path": "/etc/hostname"}),
        ):
            result, _ = await agent.tools.call(agent.ctx, name, inp)
            assert result.is_error and "CHANGED" in result.text and "ssh-keygen -R" in result.text
            assert "\n" not in result.text
    finally:
        await agent.ctx.hosts.close()
        run.close()
    assert not marker.exists()
