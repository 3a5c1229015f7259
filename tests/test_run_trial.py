"""run_trial, the Claude path over a fleet (tools/run_trial.py), against a fake fleet: the calls of
one turn place their trials at once and get their results in call order; a trial is recorded as
the autopilot's controller records one; a lost trial runs again elsewhere; RayFleet.wait hands
each caller its own trial. And (marker ray) one turn of three run_trial calls by Claude - the
real SDK against a local fake Messages API - on a local Ray cluster of three boxes."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent.brains.autopilot.planner import Experiment
from agent.brains.sse import render_sse
from agent.fleet.controller import FleetCampaign
from agent.session import make_agent, system_prompt
from agent.tool_batch import footprint
from state.events import read_events
from state.run import Run
from tests.conftest import ScriptedBrain, plain_config, tool_turn
from tests.test_fleet_ray import RAY_PROCESSES, live, with_env
from tools.base import ToolBox
from tools.domain.config import Config, load_config
from tools.domain.fleet_config import FleetConfig
from tools.fleet.ray_backend import RayFleet, Submitted
from tools.fleet.trial import TrialOutcome, TrialSpec
from tools.registry import all_tools
from tools.run_trial import RunTrial

TINY = """
[server]
engine = "sim"
command = "true"

[bench]
concurrency = [1, 8]
requests_per_level = 8

[search]
"--attention-backend" = ["flashinfer", "fa3"]

[search.baseline]
"--attention-backend" = "flashinfer"
"""

LOST = "lost on its node (WorkerCrashedError): the worker died"


def outcome(spec: TrialSpec, box: str, reason: str = "") -> TrialOutcome:
    """What a trial on `box` brings back: every level of its groups measured (tok/s = 100 x C,
    plus the box's number), or nothing with `reason`."""
    now = time.time()
    out = TrialOutcome(
        spec.trial_id,
        ok=not reason,
        reason=reason,
        end="lost" if reason else "measured",
        node=f"node-{box}",
        box=box,
        command=f"true {' '.join(spec.flags)} --port 4242",
        port=4242,
        model="sim-model",
        ready_s=1.25,
        started=now - 9,
        ended=now,
        log_tail="server ready",
        cleanup="killed 1 process",
    )
    if not reason:
        extra = float(box[-1]) if box[-1].isdigit() else 0.0
        for levels, workload in spec.groups:
            for c in levels:
                n = workload.requests_per_level
                rate = 100.0 * c + extra
                out.points.append(
                    {"max_concurrency": c, "completed": n, "num_prompts": n, "duration": 1.0}
                    | {"output_throughput": rate, "median_ttft_ms": 20.0, "p99_ttft_ms": 30.0}
                )
    return out


class FakeFleet:
    """Boxes box1..boxN. A trial holds its box until `ends` lets it go: with `reverse`, the trials
    of a batch of `batch` end last-submitted first, and none ends before all of them were
    submitted - serial calls would never get there. `lose`: trials lost on their node once."""

    def __init__(self, batch: int = 1, reverse: bool = False, lose: tuple[str, ...] = ()) -> None:
        self.config = FleetConfig(retries=1)
        self.batch, self.reverse, self.lose = batch, reverse, set(lose)
        self.submitted: list[tuple[TrialSpec, str | None, int]] = []
        self.ended: list[str] = []
        self.running = 0
        self.most = 0  # trials running at once, at most
        self.all_in = asyncio.Event()
        self.boxes: dict[str, str] = {}

    def submit(
        self, spec: TrialSpec, avoid: str | None = None, attempt: int = 1, pin: str | None = None
    ) -> None:  # pin: the controller's, for a launch pair's second trial (unused here)
        free = [f"box{i}" for i in range(1, 4) if f"box{i}" not in self.boxes.values()]
        free = [b for b in free if f"node-{b}" != avoid] or free
        self.boxes[spec.trial_id] = free[0]
        self.submitted.append((spec, avoid, attempt))
        self.running += 1
        self.most = max(self.most, self.running)
        if len(self.submitted) >= self.batch:
            self.all_in.set()

    async def wait(self, trial_id: str) -> tuple[Submitted, TrialOutcome]:
        await self.all_in.wait()
        order = [s.trial_id for s, _, _ in self.submitted[: self.batch]]
        if self.reverse and trial_id in order:
            later = order[order.index(trial_id) + 1 :]
            while not all(t in self.ended for t in later):
                await asyncio.sleep(0)
        spec, avoid, attempt = next(s for s in self.submitted if s[0].trial_id == trial_id)
        box = self.boxes.pop(trial_id)
        first = trial_id.rsplit("-try", 1)[0]
        lost = first in self.lose and attempt == 1
        self.running -= 1
        self.ended.append(trial_id)
        return Submitted(spec, None, avoid, attempt), outcome(spec, box, LOST if lost else "")

    async def next_done(self) -> tuple[Submitted, TrialOutcome]:  # the controller's call
        return await self.wait(self.submitted[-1][0].trial_id)


def tiny(tmp_path: Path) -> Config:
    (tmp_path / "agent.toml").write_text(TINY)
    return load_config(tmp_path / "agent.toml")


def trial_events(run: Run) -> list[dict[str, Any]]:
    keep = ("tool_call", "tool_result", "trial_started", "trial_ended", "trial_retried")
    return [e for e in read_events(run.events_path).events if e["type"] in (*keep, "benchmark")]


async def campaign(make_run: Any, config: Config, fleet: FakeFleet, *calls: dict[str, Any]) -> Run:
    run, _ = make_run(config)
    turn = tool_turn(*[("run_trial", c) for c in calls])
    agent = make_agent(run, ScriptedBrain([turn]), config, fleet=fleet)
    assert await asyncio.wait_for(agent.run_loop(), 20) == 0
    return run


def test_independent_trials_overlap_and_a_compare_waits_for_them() -> None:
    config = plain_config()
    a = footprint("run_trial", {"flags": {"--x": 1}}, config)
    b = footprint("run_trial", {"flags": {"--x": 2}}, config)
    assert not a.conflicts(b) and not b.conflicts(a)
    assert a.conflicts(footprint("compare", {"results": ["b001"]}, config))
    assert not a.conflicts(footprint("run_benchmark", {}, config))  # both only add results


async def test_three_calls_run_three_trials_at_once_results_in_call_order(
    make_run: Any, tmp_path: Path
) -> None:
    fleet = FakeFleet(batch=3, reverse=True)
    config = tiny(tmp_path)
    labels = ["base", "fa3", "base-again"]
    flags = [{}, {"--attention-backend": "fa3"}, {}]
    run = await campaign(
        make_run,
        config,
        fleet,
        *[{"flags": f, "label": n} for f, n in zip(flags, labels, strict=True)],
    )
    assert fleet.most == 3  # all three on their boxes at once (serial calls would deadlock)
    assert fleet.ended == ["base-again-T03", "fa3-T02", "base-T01"]  # they ended in reverse
    log = trial_events(run)
    results = [e for e in log if e["type"] == "tool_result"]
    assert [r["data"]["trial"] for r in results] == ["base-T01", "fa3-T02", "base-again-T03"]
    assert [r["data"]["box"] for r in results] == ["box1", "box2", "box3"]
    assert all(not r["is_error"] for r in results)
    assert "base-T01 on box1: 9.0 s, ok (ready in 1.2 s)" in results[0]["text"]
    assert "801" in results[0]["text"] and "802" in results[1]["text"]  # each box's own table
    # each call's events together, calls in order: call, started, benchmark, ended, result
    types = [(e["type"], e.get("trial") or e.get("label") or e.get("name")) for e in log]
    for i, label in enumerate(labels):
        trial = f"{label}-T{i + 1:02d}"
        assert types[5 * i : 5 * i + 5] == [
            ("tool_call", "run_trial"),
            ("trial_started", trial),
            ("benchmark", label),
            ("trial_ended", trial),
            ("tool_result", "run_trial"),
        ]
    specs = {s.trial_id: s for s, _, _ in fleet.submitted}
    assert specs["fa3-T02"].flags == {"--attention-backend": "fa3"}
    assert [lv for lv, _ in specs["fa3-T02"].groups] == [[1, 8]]
    assert specs["base-T01"].prompt_seed != specs["base-again-T03"].prompt_seed  # fresh prompts
    saved = sorted(p.name for p in (run.path / "results").glob("*.json"))
    assert len(saved) == 3 and saved[1].startswith("b002-fa3-T02")


async def test_a_trial_is_recorded_as_the_fleet_controller_records_one(
    make_run: Any, tmp_path: Path
) -> None:
    config = tiny(tmp_path)
    flags: dict[str, Any] = {"--attention-backend": "fa3"}
    tool_run = await campaign(make_run, config, FakeFleet(), {"flags": flags, "label": "fa3"})

    ctl_run, _ = make_run(config)
    controller = FleetCampaign(ctl_run, config, FakeFleet())  # type: ignore[arg-type]
    step = Experiment(config=flags, levels=(1, 8), purpose="screen", why="a neighbour")
    await controller.start(step)
    await controller.collect()

    def normal(run: Run) -> list[dict[str, Any]]:
        """The trial's benchmark and trial_ended events, less what names the run or the trial."""
        events = [e for e in trial_events(run) if e["type"] in ("benchmark", "trial_ended")]
        drop = ("seq", "ts", "id", "path", "label", "server", "trial", "started", "ended")
        return [{k: v for k, v in e.items() if k not in drop} for e in events]

    mine, theirs = normal(tool_run), normal(ctl_run)
    assert [e["type"] for e in mine] == ["benchmark", "trial_ended"]
    assert mine == theirs
    assert mine[0]["summary"] == {"1": 101.0, "8": 801.0}
    assert mine[0]["flags"] == flags and mine[0]["workload"]["requests_per_level"] == 8
    tool_result = tool_run.state.results[-1]
    assert tool_result["label"] == "fa3" and tool_result["server"] == "fa3-T01"


async def test_a_trial_lost_with_its_node_runs_again_on_another_box(
    make_run: Any, tmp_path: Path
) -> None:
    fleet = FakeFleet(lose=("fa3-T01",))
    run = await campaign(make_run, tiny(tmp_path), fleet, {"label": "fa3"})
    assert [(s.trial_id, avoid, n) for s, avoid, n in fleet.submitted] == [
        ("fa3-T01", None, 1),
        ("fa3-T01-try2", "node-box1", 2),
    ]
    log = trial_events(run)
    assert [e["type"] for e in log] == [
        "tool_call",
        "trial_started",
        "trial_ended",
        "trial_retried",
        "trial_started",
        "benchmark",
        "trial_ended",
        "tool_result",
    ]
    result = log[-1]
    assert not result["is_error"] and result["data"]["box"] == "box2"
    assert result["text"].startswith("fa3-T01 on box1: 9.0 s, lost on its node")
    assert log[5]["label"] == "fa3" and log[5]["server"] == "fa3-T01-try2"


@pytest.mark.parametrize(
    "inp, words",
    [
        ({"flags": {"--port": 1}}, "set the port with the `port` field"),
        ({"flags": {"bad flag": 1}}, "bad flag name"),
        ({"concurrency": [0]}, "concurrency levels must be 1..4096"),
        ({"label": "a/b"}, "bad trial name"),
    ],
)
async def test_bad_input_is_one_line_and_takes_no_box(
    inp: dict[str, Any], words: str, make_run: Any, tmp_path: Path
) -> None:
    fleet = FakeFleet()
    run, config = make_run(tiny(tmp_path))
    turn = tool_turn(("run_trial", inp))
    agent = make_agent(run, ScriptedBrain([turn]), config, fleet=fleet)
    assert await asyncio.wait_for(agent.run_loop(), 20) == 0
    result = next(e for e in trial_events(run) if e["type"] == "tool_result")
    assert result["is_error"] and words in result["text"] and "\n" not in result["text"]
    assert fleet.submitted == []


async def test_without_a_fleet_run_trial_is_not_offered_and_refuses(
    make_run: Any, tmp_path: Path
) -> None:
    names = [t.name for t in all_tools()]
    assert "run_trial" not in names
    assert [t.name for t in all_tools(fleet=True)] == [*names, "run_trial"]
    assert "run_trial" not in system_prompt()
    assert system_prompt(fleet=True).startswith(system_prompt() + "\n\nThe fleet.")
    run, config = make_run(tiny(tmp_path))
    agent = make_agent(run, ScriptedBrain([]), config)
    assert "run_trial" not in [s["name"] for s in agent.tools.specs()]
    result, _ = await ToolBox([RunTrial()]).call(agent.ctx, "run_trial", {})
    assert result.is_error and result.text.startswith("run_trial needs a fleet")


async def test_ray_fleet_wait_hands_each_caller_its_own_trial(tmp_path: Path) -> None:
    fleet = RayFleet(FleetConfig(), tmp_path)
    config = plain_config()
    loop = asyncio.get_running_loop()
    specs = {t: TrialSpec(t, config, {}, []) for t in ("a", "b")}
    futures = {t: loop.create_future() for t in specs}
    for t, f in futures.items():
        fleet.pending[f] = Submitted(specs[t], None, None, 1)
    waiting_b = asyncio.create_task(fleet.wait("b"))
    futures["a"].set_result(outcome(specs["a"], "box1"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiting_b.done()  # a ended; b's caller still waits for b
    futures["b"].set_exception(RuntimeError("the worker died"))
    sub, out = await waiting_b
    assert sub.spec.trial_id == "b" and not out.ok
    assert out.reason.startswith("lost on its node (RuntimeError)")
    sub, out = await fleet.next_done()  # a is still there for whoever asks next
    assert sub.spec.trial_id == "a" and out.ok
    assert fleet.pending == {}


class FakeMessagesAPI:
    """A local Anthropic Messages API on loopback for an `agent run` child process: scripted
    replies as the server-sent events of a streamed call; count_tokens answered small."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies, self.bodies = list(replies), list[dict[str, Any]]()
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if self.path.endswith("/count_tokens"):
                    payload, kind = json.dumps({"input_tokens": 1000}).encode(), "json"
                else:
                    api.bodies.append(body)
                    payload, kind = render_sse(api.replies.pop(0)), "event-stream"
                self.send_response(200)
                self.send_header(
                    "content-type", f"text/{kind}" if kind != "json" else "application/json"
                )
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def reply(n: int, stop: str, *content: dict[str, Any]) -> dict[str, Any]:
    usage = {"input_tokens": 2000, "output_tokens": 80, "cache_read_input_tokens": 0}
    return {
        "id": f"msg_fleet_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


@pytest.mark.ray
def test_claude_runs_three_trials_at_once_on_three_boxes(tmp_path: Path) -> None:
    """`agent run --fleet ray --boxes 3 --model claude-sonnet-4-6` against the fake API: one
    turn of three run_trial calls; the trials overlap on three boxes, the results come back in
    call order, the run exits 0 and leaves no Ray process and no simulator behind."""
    (tmp_path / "agent.toml").write_text(TINY.replace('command = "true"\n', ""))
    calls = [
        ("base", {}),
        ("fa3", {"--attention-backend": "fa3"}),
        ("base-again", {}),
    ]
    uses = [
        {
            "type": "tool_use",
            "id": f"toolu_{i}",
            "name": "run_trial",
            "input": {"label": n, "flags": f},
        }
        for i, (n, f) in enumerate(calls)
    ]
    api = FakeMessagesAPI(
        [
            reply(1, "tool_use", {"type": "text", "text": "The A/A pair and fa3 at once."}, *uses),
            reply(2, "end_turn", {"type": "text", "text": "Measured: fa3 against the pair."}),
        ]
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env |= {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": api.url}
    env["AGENT_LAB_TIME_SCALE"] = "50"
    ray_before = set(live(RAY_PROCESSES))
    argv = [sys.executable, "-m", "agent.cli", "run", "--goal", "beat baseline"]
    argv += ["--config", "agent.toml", "--runs-dir", "runs", "--run-id", "claude"]
    argv += ["--fleet", "ray", "--boxes", "3", "--model", "claude-sonnet-4-6"]
    try:
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
        )
    finally:
        api.close()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]

    run = tmp_path / "runs" / "claude"
    log = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert log[-1]["type"] == "run_finished" and log[-1]["exit_code"] == 0
    assert sorted(next(e for e in log if e["type"] == "fleet_started")["nodes"].values()) == [
        "box1",
        "box2",
        "box3",
    ]
    assert "run_trial" in [t["name"] for t in api.bodies[0]["tools"]]
    assert "The fleet." in api.bodies[0]["system"][0]["text"]
    first = api.bodies[0]["messages"]  # the briefing, and the note that names the boxes
    assert len(first) == 1 and "The fleet: 3 boxes (box1, box2, box3)" in json.dumps(first)
    ended = [e for e in log if e["type"] == "trial_ended"]
    assert len(ended) == 3 and all(e["ok"] for e in ended)
    assert {e["box"] for e in ended} == {"box1", "box2", "box3"}  # three boxes
    assert max(e["started"] for e in ended) < min(e["ended"] for e in ended)  # at once
    results = [e for e in log if e["type"] == "tool_result"]
    assert [r["id"] for r in results] == ["toolu_0", "toolu_1", "toolu_2"]  # call order
    assert [r["data"]["trial"] for r in results] == ["base-T01", "fa3-T02", "base-again-T03"]
    assert all(not r["is_error"] for r in results)
    benchmarks = [e for e in log if e["type"] == "benchmark"]
    assert [b["label"] for b in benchmarks] == ["base", "fa3", "base-again"]
    assert all(min(b["summary"].values()) > 0 for b in benchmarks)
    # the model saw the three results, in call order, in its second request
    sent = api.bodies[1]["messages"][-1]["content"]
    assert [b["tool_use_id"] for b in sent if b["type"] == "tool_result"] == [
        "toolu_0",
        "toolu_1",
        "toolu_2",
    ]
    # nothing left: no simulator of the run's boxes, no Ray process of its cluster
    assert with_env(str(run / "fleet")) == []
    assert set(live(RAY_PROCESSES)) - ray_before == set()


async def test_a_stop_while_a_trial_runs_records_it_as_interrupted(
    make_run: Any, tmp_path: Path
) -> None:
    fleet = FakeFleet(batch=2)  # one call: its trial never ends
    run, config = make_run(tiny(tmp_path))
    agent = make_agent(run, ScriptedBrain([]), config, fleet=fleet)
    call = asyncio.create_task(agent.tools.call(agent.ctx, "run_trial", {"label": "fa3"}))
    while not fleet.submitted:
        await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    log = trial_events(run)
    assert [e["type"] for e in log] == ["trial_started", "trial_ended"]
    assert log[1]["trial"] == "fa3-T01" and log[1]["interrupted"] and not log[1]["ok"]


@pytest.mark.ray
def test_a_killed_model_fleet_run_is_reaped_and_goes_on_when_resumed(tmp_path: Path) -> None:
    """Issue 24.5: `agent run --fleet ray --boxes 2` by Claude (the real SDK against the fake
    API) is SIGKILLed while its two trials' servers are up; `agent resume` kills what the dead
    run left - the trials' servers and its lab cluster - records both trials as interrupted,
    answers the cut calls and goes on with the model's next turn to the end. Nothing of the
    first run is left (by process group and by port), no event is lost or doubled."""
    from tests.conftest import group_alive, group_members
    from tests.test_fleet_ray import descendants, listening

    (tmp_path / "agent.toml").write_text(TINY.replace('command = "true"\n', ""))
    long = {"concurrency": [1], "requests_per_level": 400}  # busy for as long as the test looks
    first = [
        {"type": "tool_use", "id": f"toolu_{i}", "name": "run_trial", "input": {"label": n} | long}
        for i, n in enumerate(("base", "fa3"))
    ]
    first[1]["input"]["flags"] = {"--attention-backend": "fa3"}
    again = {"type": "tool_use", "id": "toolu_2", "name": "run_trial", "input": {"label": "base"}}
    api = FakeMessagesAPI(
        [
            reply(1, "tool_use", {"type": "text", "text": "The baseline and fa3 at once."}, *first),
            reply(2, "tool_use", {"type": "text", "text": "Cut off: the baseline again."}, again),
            reply(3, "end_turn", {"type": "text", "text": "Measured the baseline."}),
        ]
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env |= {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": api.url}
    env["AGENT_LAB_TIME_SCALE"] = "50"
    ray_before = set(live(RAY_PROCESSES))
    agent = [sys.executable, "-m", "agent.cli"]
    argv = [*agent, "run", "--goal", "beat baseline", "--config", "agent.toml"]
    argv += ["--runs-dir", "runs", "--run-id", "claude", "--fleet", "ray", "--boxes", "2"]
    argv += ["--model", "claude-sonnet-4-6"]
    run = tmp_path / "runs" / "claude"
    child = subprocess.Popen(  # a session of its own: its cluster's group is the run's
        argv,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    servers: dict[str, int] = {}  # trial -> its server's group
    held: set[tuple[str, int, int]] = set()  # (address, pid, pgid) the first run listened on
    try:
        deadline = time.monotonic() + 150
        while len(servers) < 2 and child.poll() is None and time.monotonic() < deadline:
            for pidfile in (run / "fleet").glob("*/*.json"):  # <node id>/<trial>.json
                with contextlib.suppress(OSError, ValueError, KeyError):
                    servers[pidfile.stem] = int(json.loads(pidfile.read_text())["pid"])
            time.sleep(0.05)
        while child.poll() is None and time.monotonic() < deadline:  # both simulators listen
            tree = descendants(child.pid) | {p for g in servers.values() for p in group_members(g)}
            held = {(a, pid, pgid_of(pid)) for a, _, pid in listening() if pid in tree}
            if set(servers.values()) <= {pgid for _, _, pgid in held}:
                break
            time.sleep(0.2)
        child.send_signal(signal.SIGKILL)
        _, err = child.communicate(timeout=30)
        resumed = None
        if len(servers) == 2:
            resumed = subprocess.run(
                [*agent, "resume", "claude", "--runs-dir", "runs"],
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
                start_new_session=True,
            )  # fmt: skip
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate(timeout=30)
        api.close()
    assert len(servers) == 2, "the two trials' servers were not seen up: " + err[-2000:]
    assert resumed is not None and resumed.returncode == 0, resumed and resumed.stderr[-3000:]

    # nothing of the first run left: its servers' groups, every group and port it listened on
    assert all(not group_alive(g) for g in servers.values())
    assert {pgid for _, _, pgid in held} >= set(servers.values())
    left = [(a, pid, pgid) for a, pid, pgid in held if group_alive(pgid)]
    assert left == [], [(a, pid, _cmdline(pid)) for a, pid, _ in left]
    now = {(a, pid) for a, _, pid in listening()}
    assert {(a, pid) for a, pid, _ in held} & now == set()
    assert with_env(str(run / "fleet")) == []
    assert set(live(RAY_PROCESSES)) - ray_before == set()  # no waiting for Ray to notice

    log = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    started = [e["trial"] for e in log if e["type"] == "trial_started"]
    ended = {e["trial"]: e for e in log if e["type"] == "trial_ended"}
    reaped = {e["trial"]: e for e in log if e["type"] == "trial_reaped"}
    assert len(started) == len(set(started)) and set(started) == set(ended)
    assert sum(e["type"] == "trial_ended" for e in log) == len(started)  # one end each
    # the cut trials: the one whose call was written ended as interrupted; the one whose call's
    # events the turn's buffer held (agent/tool_batch.py) found by its pid file; each names the
    # server group it killed. Or the trial cleaned up itself: Ray ends a dead driver's workers
    # with SIGTERM first, a running task gets SystemExit and its `finally` kills its server and
    # removes its pid file - a race with the resume's reaper, won by either under load. Then the
    # reaper finds nothing and says so (nothing is left either way: asserted above)
    named = {t for t in ended if t != started[-1]}
    assert named <= set(servers) and set(reaped) <= set(servers)
    for trial, group in servers.items():
        if trial in ended:
            assert ended[trial]["end"] == "interrupted" and ended[trial]["interrupted"]
        if trial in ended or trial in reaped:
            words = (ended.get(trial) or reaped[trial])["cleanup"]
            assert words in (f"killed the server group {group} it left", "nothing left of it here")
    assert not list((run / "fleet").glob("*/*.json"))  # no pid file left
    third = started[-1]
    # numbered on from the trials the log has (a self-cleaned unnamed trial is not among them)
    assert third == f"base-T{len(named | set(reaped)) + 1:02d}" and ended[third]["ok"]
    results = {e["id"]: e for e in log if e["type"] == "tool_result"}
    assert sorted(results) == ["toolu_0", "toolu_1", "toolu_2"]
    assert sum(e["type"] == "tool_result" for e in log) == 3
    assert results["toolu_0"]["is_error"] and results["toolu_0"]["data"] == {"interrupted": True}
    assert not results["toolu_2"]["is_error"]
    kinds = [e["type"] for e in log]
    assert kinds.count("run_resumed") == 1 and kinds.count("fleet_started") == 2
    assert log[-1]["type"] == "run_finished" and log[-1]["exit_code"] == 0
    # the model was told its two calls were cut, then saw the third's result
    cut = [b for b in api.bodies[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert [b["tool_use_id"] for b in cut] == ["toolu_0", "toolu_1"]
    assert all(b.get("is_error") for b in cut)
    assert "interrupted: the run's controller ended" in resumed.stderr


def pgid_of(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return 0


async def test_a_trial_launches_the_command_with_its_secret_given_back_from_the_environment(
    make_run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumed run's config keeps a secret by reference (`NAME=[redacted]`): a trial, as
    start_server on one box, launches it with the value from the agent's environment - both the
    model's run_trial and the autopilot's controller. Without the variable: one line, no box."""
    (tmp_path / "agent.toml").write_text(TINY.replace('"true"', '"MY_TOKEN=[redacted] true"'))
    config = load_config(tmp_path / "agent.toml")
    monkeypatch.delenv("MY_TOKEN", raising=False)
    fleet = FakeFleet()
    run, _ = make_run(config)
    agent = make_agent(run, ScriptedBrain([]), config, fleet=fleet)
    result, _ = await agent.tools.call(agent.ctx, "run_trial", {"label": "base"})
    assert result.is_error and "\n" not in result.text and "set MY_TOKEN" in result.text
    assert fleet.submitted == []

    monkeypatch.setenv("MY_TOKEN", "s3cret-value-1")
    result, _ = await agent.tools.call(agent.ctx, "run_trial", {"label": "base"})
    assert not result.is_error, result.text
    controller = FleetCampaign(run, config, fleet)  # type: ignore[arg-type]
    await controller.start(Experiment(config={}, levels=(1,), purpose="baseline", why="first"))
    launched = [spec.config.server.command for spec, _, _ in fleet.submitted]
    assert launched == ["MY_TOKEN=s3cret-value-1 true"] * 2
    assert config.server.command == "MY_TOKEN=[redacted] true"  # the run's own config unchanged


class LabFleet(FakeFleet):
    """FakeFleet as RayFleet's lab: connected, closed, two boxes (a resumed run's backend)."""

    def __init__(self, config: FleetConfig) -> None:
        super().__init__()
        self.config, self.local, self.auth, self.token = config, None, "", None
        self.connected = False

    def connect(self, boxes: int | None = None) -> None:
        self.connected = True

    def nodes(self) -> dict[str, str]:
        return {"node-box1": "box1", "node-box2": "box2"}

    def slots(self) -> int:
        return 2

    async def close(self) -> dict[str, str]:
        return {}


def test_a_crashed_model_fleet_run_is_reaped_then_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without Ray: the log a model's fleet run leaves when it is killed while two run_trial
    calls run - the first call's events written, the second's still in the turn's buffer - and
    both trials' servers up on their boxes. `agent resume` kills both servers (before a cluster
    starts), ends the logged trial as interrupted and names the other by its pid file, answers
    both calls, and the model's loop goes on: its next trial is T03."""
    from agent.cli.runner import resume_campaign
    from agent.fleet import run as fleet_run
    from agent.fleet.resume import fleet_workdir
    from agent.session import Limits, start
    from tests.test_fleet_ray import gone, server
    from tools.fleet.trial import node_dir

    fleet_config = FleetConfig(address="local", boxes=2)
    config = tiny(tmp_path).model_copy(update={"fleet": fleet_config})
    model = "claude-sonnet-4-6"
    run = start("beat baseline", config, model, tmp_path / "runs", "c", Limits(), fleet="ray")
    run.append("fleet_started", engine="ray", nodes=LabFleet(fleet_config).nodes(), slots=2)
    uses = [
        {"type": "tool_use", "id": f"toolu_{i}", "name": "run_trial", "input": {"label": n}}
        for i, n in enumerate(("base", "fa3"))
    ]
    run.append("message", role="assistant", content=[{"type": "text", "text": "Two."}, *uses])
    run.append("tool_call", id="toolu_0", name="run_trial", input={"label": "base"})
    run.append("trial_started", trial="base-T01", purpose="run_trial", why="base", flags={},
               levels=[1, 8], attempt=1)  # fmt: skip
    root = fleet_workdir(run)
    base = server(node_dir(root, "node-box1"), "base-T01", node="node-box1", worker=1)
    fa3 = server(node_dir(root, "node-box2"), "fa3-T02", node="node-box2", worker=1)
    run.close()

    again = {"type": "tool_use", "id": "toolu_2", "name": "run_trial", "input": {"label": "base"}}
    api = FakeMessagesAPI([reply(2, "tool_use", again), reply(3, "end_turn")])
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
    fleets: list[LabFleet] = []

    def new_fleet(config: FleetConfig, *_args: Any) -> LabFleet:
        fleets.append(LabFleet(config))
        return fleets[-1]

    monkeypatch.setattr(fleet_run, "RayFleet", new_fleet)
    try:
        assert resume_campaign(tmp_path / "runs" / "c") == 0
    finally:
        api.close()
        for pid in (base, fa3):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    assert gone(base) and gone(fa3) and not list(root.glob("*/*.json"))
    log = [json.loads(line) for line in (tmp_path / "runs/c/events.jsonl").read_text().splitlines()]
    after = [e for e in log if e["seq"] > next(e["seq"] for e in log if e["type"] == "run_resumed")]
    assert [(e["type"], e.get("trial") or e.get("id")) for e in after[:4]] == [
        ("trial_ended", "base-T01"),
        ("trial_reaped", "fa3-T02"),
        ("tool_result", "toolu_0"),
        ("tool_result", "toolu_1"),
    ]
    assert after[0]["end"] == "interrupted" and after[0]["interrupted"] and not after[0]["ok"]
    assert after[0]["cleanup"] == f"killed the server group {base} it left"
    assert after[1]["cleanup"] == f"killed the server group {fa3} it left"
    assert all(e["is_error"] and e["data"] == {"interrupted": True} for e in after[2:4])
    started = [e["trial"] for e in log if e["type"] == "trial_started"]
    assert started == ["base-T01", "base-T03"] and fleets[0].connected
    ended = [e["trial"] for e in log if e["type"] == "trial_ended"]
    assert ended == ["base-T01", "base-T03"]
    assert log[-1]["type"] == "run_finished" and log[-1]["exit_code"] == 0
    # the model was told its two calls were cut (results first), then the fleet's boxes
    sent = api.bodies[0]["messages"][-1]["content"]
    assert [b.get("tool_use_id") for b in sent] == ["toolu_0", "toolu_1", None]
    assert sent[2]["text"].startswith("The fleet: 2 boxes (box1, box2)")


def _cmdline(pid: int) -> str:
    """What a process left running is, for a failure's message."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "(gone)"


def test_a_model_fleet_runs_late_clean_ups_are_recorded_before_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model's fleet run closes its fleet at the loop's end, before run_finished: a wedged
    node's clean-up still owed at the close (LEFT) is in the log as the autopilot's controller
    records it (`trial_left`, with the command that kills it), and said on the terminal."""
    from agent.fleet.model import drive_on_fleet
    from agent.session import Limits, start
    from tools.fleet.ray_backend import Cleaned

    class WedgedLab(LabFleet):
        def __init__(self, config: FleetConfig) -> None:
            super().__init__(config)
            self.late: list[Cleaned] = []
            self.closed = 0

        def settled(self) -> list[Cleaned]:
            out, self.late = self.late, []
            return out

        async def close(self) -> dict[str, str]:
            self.closed += 1
            if self.closed == 1:
                left = Cleaned("fa3-T01", "n2", "box2", "LEFT on box2 (node n2): ...", True, 77)
                left.kill = "on box2: kill -KILL -- -77"
                self.late.append(left)
            return {}

    fleet_config = FleetConfig(address="local", boxes=2)
    config = tiny(tmp_path).model_copy(update={"fleet": fleet_config})
    model = "claude-sonnet-4-6"
    run = start("beat baseline", config, model, tmp_path / "runs", "c", Limits(), fleet="ray")
    api = FakeMessagesAPI([reply(1, "end_turn", {"type": "text", "text": "Done."})])
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
    fleet = WedgedLab(fleet_config)
    try:
        assert drive_on_fleet(run, config, fleet, None) == 0  # type: ignore[arg-type]
    finally:
        api.close()
    log = read_events(run.events_path).events
    kinds = [e["type"] for e in log]
    assert kinds.count("trial_left") == 1 and kinds[-1] == "run_finished"
    assert kinds.index("trial_left") < kinds.index("run_finished")  # recorded before the end
    left = next(e for e in log if e["type"] == "trial_left")
    assert (left["trial"], left["pgid"], left["kill"]) == (
        "fa3-T01",
        77,
        "on box2: kill -KILL -- -77",
    )
    assert fleet.closed >= 1 and "fleet: fa3-T01: LEFT on box2" in capsys.readouterr().err
