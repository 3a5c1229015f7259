"""The fleet controller (agent/fleet/controller.py) under the supervisor, without Ray: FleetCampaign
around a fake fleet that hands back canned TrialOutcomes (a made-up truth: fa3 is 10 % faster,
EAGLE3 20 %). `agent stop`, `agent say`, the budgets, the goal's SLO and `agent resume` of a
fleet run; on a real cluster: tests/test_fleet_ray.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agent import interrupts
from agent.brains.autopilot.history import History
from agent.cli.runner import resume_campaign
from agent.fleet import run as fleet_run
from agent.fleet.controller import FleetCampaign
from agent.fleet.resume import RESUMED
from agent.fleet.run import run_fleet, run_fleet_campaign
from agent.session import AUTOPILOT, Limits, start
from agent.session import config_of as recorded_config
from state.inbox import send
from state.run import Run
from tests.conftest import group_alive
from tools.domain.config import Config, load_config
from tools.domain.fleet_config import FleetConfig
from tools.fleet.ray_backend import Cleaned, Submitted
from tools.fleet.trial import LOST, TrialOutcome, TrialSpec

TINY = """
[server]
engine = "sim"

[bench]
concurrency = [1, 8]
max_tokens = 32
requests_per_level = 8

[search]
"--attention-backend" = ["flashinfer", "fa3"]
"--speculative-algorithm" = [false, "EAGLE3"]

[search.baseline]
"--attention-backend" = "flashinfer"
"--speculative-algorithm" = false
"""


def truth(flags: dict[str, Any], c: int) -> float:
    gain = 1.1 if flags.get("--attention-backend") == "fa3" else 1.0
    gain *= 1.2 if flags.get("--speculative-algorithm") == "EAGLE3" else 1.0
    return 100.0 * c**0.7 * gain


def outcome(spec: TrialSpec) -> TrialOutcome:
    levels = [c for levels, _ in spec.groups for c in levels]
    points = [
        {
            "max_concurrency": c,
            "completed": 8,
            "output_throughput": truth(spec.flags, c),
            "p99_ttft_ms": 100.0 * c,  # under 200 ms at C=1 only
            "p99_tpot_ms": 10.0,
        }
        for c in levels
    ]
    command = " ".join(["sim", *(f"{k} {v}" for k, v in sorted(spec.flags.items()) if v)])
    return TrialOutcome(
        spec.trial_id, ok=True, end="measured", node="n1", box="box1", command=command, port=8000,
        model="m", points=points, started=1.0, ended=2.0,
    )  # fmt: skip


class FakeFleet:
    """submit/next_done/close/nodes/slots as RayFleet has them; trials come back in the order
    placed, at once, except those `held` (they never come back: a stop or a crash meets them).
    `idle` runs once when only held trials are left (the supervisor acts then)."""

    def __init__(
        self,
        held: Callable[[str], bool] = lambda _trial: False,
        idle: Callable[[], object] | None = None,
        slots: int = 2,
    ) -> None:
        self.config = FleetConfig(boxes=slots, max_trials=slots)
        self.boxes = slots
        self.held, self.idle = held, idle
        self.pending: list[Submitted] = []
        self.placed: list[str] = []
        self.pins: dict[str, str | None] = {}  # trial -> the node it was pinned to
        self.closed = 0

    def connect(self, boxes: int | None = None) -> None:
        pass

    def nodes(self) -> dict[str, str]:
        return {"n1": "box1", "n2": "box2"}

    def slots(self) -> int:
        return self.boxes

    def submit(
        self, spec: TrialSpec, avoid: str | None = None, attempt: int = 1, pin: str | None = None
    ) -> None:
        self.pending.append(Submitted(spec, None, avoid, attempt))
        self.placed.append(spec.trial_id)
        self.pins[spec.trial_id] = pin

    async def next_done(self) -> tuple[Submitted, TrialOutcome]:
        ready = [s for s in self.pending if not self.held(s.spec.trial_id)]
        if not ready:
            if self.idle is not None:
                self.idle()
                self.idle = None
            await asyncio.Event().wait()  # until cancelled
        self.pending.remove(ready[0])
        return ready[0], outcome(ready[0].spec)

    async def close(self) -> None:
        self.closed += 1
        self.pending.clear()


@pytest.fixture(autouse=True)
def quick_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stop and budget watch polls every 50 ms here, not 0.5 s."""
    monkeypatch.setattr(interrupts, "POLL_S", 0.05)


class Crash(BaseException):
    """The controller dies (a SIGKILL): nothing after it is written."""


def tiny_config(tmp_path: Path) -> Config:
    (tmp_path / "agent.toml").write_text(TINY)
    return load_config(tmp_path / "agent.toml")


def new_run(tmp_path: Path, goal: str = "beat baseline", limits: Limits | None = None) -> Run:
    config = tiny_config(tmp_path)
    return start(goal, config, AUTOPILOT, tmp_path / "runs", "f", limits or Limits(), fleet="ray")


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (path / "events.jsonl").read_text().splitlines()]


def fleet_run_to_end(run: Run, fleet: FakeFleet) -> int:
    try:
        return asyncio.run(run_fleet(run, tiny_config(run.path.parent.parent), fleet, None))
    finally:
        run.close()


def screens(trial: str) -> bool:
    return trial.startswith("screen")


def test_a_stop_cancels_the_trials_in_flight_and_concludes_from_what_came_back(
    tmp_path: Path,
) -> None:
    run = new_run(tmp_path)
    fleet = FakeFleet(held=screens, idle=lambda: send(run.path, "stop"))
    assert fleet_run_to_end(run, fleet) == 130

    log = events(run.path)
    assert any(e["type"] == "stop_requested" for e in log)
    cut = [e for e in log if e["type"] == "trial_ended" and e.get("interrupted")]
    assert cut and {e["trial"] for e in cut} == {t for t in fleet.placed if screens(t)}
    assert all(e["reason"] == "stopped by the supervisor" and not e["ok"] for e in cut)
    assert fleet.closed >= 1  # their tasks cancelled, their servers killed (RayFleet.close)
    # the A/A pair that came back is kept and concluded from: the baseline is recommended
    rec = json.loads((run.path / "recommendation.json").read_text())
    assert rec["config"]["--attention-backend"] == "flashinfer" and rec["value"] > 0
    assert (run.path / "report.md").is_file()
    end = log[-1]
    assert end["type"] == "run_finished" and end["status"] == "stopped"
    assert end["exit_code"] == 130 and end["reason"] == "stopped by the supervisor"


def test_a_stop_before_anything_came_back_concludes_with_no_recommendation(
    tmp_path: Path,
) -> None:
    run = new_run(tmp_path)
    fleet = FakeFleet(held=lambda _trial: True, idle=lambda: send(run.path, "stop"))
    assert fleet_run_to_end(run, fleet) == 130
    log = events(run.path)
    cut = [e for e in log if e["type"] == "trial_ended"]
    assert {e["trial"] for e in cut} == set(fleet.placed) and all(e["interrupted"] for e in cut)
    assert not (run.path / "recommendation.json").exists()
    assert log[-1]["status"] == "stopped" and (run.path / "report.md").is_file()


def test_a_lowered_minutes_budget_ends_the_run_as_on_one_box(tmp_path: Path) -> None:
    run = new_run(tmp_path)
    fleet = FakeFleet(
        held=screens, idle=lambda: send(run.path, "budget", limits={"max_minutes": 1e-3})
    )
    assert fleet_run_to_end(run, fleet) == 3

    log = events(run.path)
    assert [e["limits"] for e in log if e["type"] == "limits_changed"] == [{"max_minutes": 1e-3}]
    cut = [e for e in log if e["type"] == "trial_ended" and e.get("interrupted")]
    assert cut and all(e["reason"].startswith("budget exhausted: ") for e in cut)
    assert (run.path / "recommendation.json").is_file()
    end = log[-1]
    assert end["status"] == "budget_exhausted" and end["exit_code"] == 3
    assert end["reason"].startswith("budget exhausted: ") and end["reason"].endswith(" minutes")


def test_the_steps_budget_counts_planning_rounds_and_warns_first(tmp_path: Path) -> None:
    """A round that places trials is a step (an assistant message); at 80 % of max_steps the
    budget_warning wraps the campaign up (no new candidates), then the budget ends it."""
    run = new_run(tmp_path, limits=Limits(max_steps=5))
    assert fleet_run_to_end(run, FakeFleet()) == 3
    log = events(run.path)
    warned = [i for i, e in enumerate(log) if e["type"] == "budget_warning"]
    assert len(warned) == 1 and log[warned[0]]["limit"] == "max_steps"
    later = [e["purpose"] for e in log[warned[0] :] if e["type"] == "trial_started"]
    # wrapped up: no new candidate, the best proven - on two boxes in a crossover, whose first
    # period is its two halves at once (tests/test_fleet_crossover.py)
    assert later == ["cross", "cross"]
    assert (run.path / "recommendation.json").is_file()
    end = log[-1]
    assert (end["status"], end["exit_code"]) == ("budget_exhausted", 3)
    assert end["reason"] == "budget exhausted: 5 of 5 steps"


def test_say_reaches_the_planner_and_is_answered_as_on_one_box(tmp_path: Path) -> None:
    run = new_run(tmp_path)
    send(run.path, "say", text="focus on C=8, and skip speculation")
    assert fleet_run_to_end(run, FakeFleet()) == 0

    log = events(run.path)
    said = [e for e in log if e["type"] == "supervisor_message"]
    assert [e["text"] for e in said] == ["focus on C=8, and skip speculation"]
    answers = [
        b["text"]
        for e in log
        if e["type"] == "message" and e["role"] == "assistant"
        for b in e["content"]
        if b["text"].startswith(f"Supervisor #{said[0]['seq']}:")
    ]
    assert len(answers) == 1 and "throughput at C=8" in answers[0]
    assert "speculation is dropped" in answers[0]
    started = [e for e in log if e["type"] == "trial_started"]
    assert all(e["flags"]["--speculative-algorithm"] is False for e in started)
    assert all(e["levels"] == [8] for e in started if e["purpose"] == "screen")
    rec = json.loads((run.path / "recommendation.json").read_text())
    assert (rec["objective"]["kind"], rec["objective"]["level"]) == ("level", 8)
    assert rec["config"]["--attention-backend"] == "fa3"


def test_the_launch_pairs_run_one_at_a_time_on_one_box(tmp_path: Path) -> None:
    """On a fleet of one box (two prove in crossovers: tests/test_fleet_crossover.py) the winner
    against the baseline in launch pairs (baseline, winner, winner, baseline): each alone on the
    fleet, and every one after the first on the first one's node."""
    run = new_run(tmp_path)
    fleet = FakeFleet(slots=1)
    campaign = FleetCampaign(run, tiny_config(tmp_path), fleet)
    assert asyncio.run(campaign.drive()) == 0
    started = [e for e in events(run.path) if e["type"] == "trial_started"]
    pairs = [e for e in started if e["purpose"] == "pair"]
    base = {"--attention-backend": "flashinfer", "--speculative-algorithm": False}
    assert [e["flags"] == base for e in pairs][:4] == [True, False, False, True]
    assert fleet.pins[pairs[0]["trial"]] is None  # the first goes where Ray places it
    assert all(fleet.pins[e["trial"]] == "n1" for e in pairs[1:])  # then on its node
    log = events(run.path)
    for e in pairs:  # nothing else in flight while a pair's launch runs
        i = log.index(e)
        ended = next(x for x in log[i:] if x["type"] == "trial_ended")
        assert ended["trial"] == e["trial"], ended
        assert not any(x["type"] == "trial_started" for x in log[i + 1 : log.index(ended)])
    rec = json.loads((run.path / "recommendation.json").read_text())
    assert rec["paired"]["pairs"] >= 2 and rec["paired"]["verdict"] == "win"
    run.close()


def test_the_rebuilt_history_is_the_live_one(tmp_path: Path) -> None:
    run = new_run(tmp_path)
    fleet = FakeFleet()
    live = FleetCampaign(run, tiny_config(tmp_path), fleet)
    assert asyncio.run(live.drive()) == 0
    again = FleetCampaign(run, tiny_config(tmp_path), FakeFleet(), events(run.path))
    run.close()
    assert again.h.launches == live.h.launches and len(live.h.launches) >= 4
    assert again.h.measurements == live.h.measurements
    assert again.unfinished == [] and again.trials == live.trials


def test_a_crashed_fleet_run_resumes_places_its_unfinished_trials_and_concludes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = new_run(tmp_path)

    def crash() -> None:
        raise Crash

    live = FleetCampaign(run, tiny_config(tmp_path), FakeFleet(held=screens, idle=crash))
    with pytest.raises(Crash):
        asyncio.run(live.drive())
    run.close()
    lost = {t for t in live.placed if screens(t)}
    assert lost and not any(e["type"] == "run_finished" for e in events(run.path))
    # what the planner reads in flight is the History's state: the trials placed, in order
    assert live.h.in_flight == list(live.placed.values())
    rebuilt = FleetCampaign(Run.open(run.path), live.config, FakeFleet(), events(run.path))
    rebuilt.run.close()
    assert rebuilt.h.measurements == live.h.measurements
    assert {t for t, _, _ in rebuilt.unfinished} == lost

    fleets: list[FakeFleet] = []

    def new_fleet(*_args: Any) -> FakeFleet:
        fleets.append(FakeFleet())
        return fleets[-1]

    monkeypatch.setattr(fleet_run, "RayFleet", new_fleet)
    assert resume_campaign(run.path) == 0
    log = events(run.path)
    retried = [e for e in log if e["type"] == "trial_retried"]
    assert {e["trial"] for e in retried} == lost and all(e["reason"] == RESUMED for e in retried)
    again = {e["trial"]: e for e in log if e["type"] == "trial_started" and e["attempt"] == 2}
    assert set(again) == {f"{t}-try2" for t in lost}
    ended = {e["trial"] for e in log if e["type"] == "trial_ended"}
    assert set(again) <= ended  # placed again on the new fleet and measured
    assert (run.path / "recommendation.json").is_file()
    assert log[-1]["type"] == "run_finished" and log[-1]["status"] == "finished"
    # finished: a second resume says so and exits 0, placing nothing
    capsys.readouterr()
    assert resume_campaign(run.path) == 0
    assert "already finished" in capsys.readouterr().err
    assert len(fleets) == 1


def test_the_goal_slo_is_the_objective_on_the_fleet_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fleet_run, "RayFleet", lambda *_a: FakeFleet())
    goal = "highest throughput with p99 TTFT under 200 ms"
    code = run_fleet_campaign(goal, tiny_config(tmp_path), AUTOPILOT, tmp_path / "runs", "g",
                              Limits(), 2)  # fmt: skip
    assert code == 0
    log = events(tmp_path / "runs" / "g")
    objective = log[0]["config"]["objective"]
    assert objective["kind"] == "slo" and objective["ttft_p99_ms"] == 200
    run = Run.open(tmp_path / "runs" / "g")
    rebuilt = FleetCampaign(run, recorded_config(run), FakeFleet(), log)
    run.close()
    h: History = rebuilt.h
    assert h.measurements and all(m.slo_ok == {1: True, 8: False} for m in h.measurements)


@pytest.mark.ray
def test_a_killed_fleet_controller_is_resumed_on_a_new_cluster(tmp_path: Path) -> None:
    """On a real local cluster: the `agent run --fleet ray --boxes 2` process is SIGKILLed while
    a screen's server is up; `agent resume` starts a cluster again, kills what the dead
    controller's trial left, places the screen again and concludes; nothing is left."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.test_fleet_ray import RAY_PROCESSES, live, with_env
    from tests.test_fleet_ray import TINY as ONE_FLAG

    (tmp_path / "agent.toml").write_text(ONE_FLAG)
    ray_before = set(live(RAY_PROCESSES))
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "RAY_ADDRESS")}
    env["AGENT_LAB_TIME_SCALE"] = "50"
    run = tmp_path / "runs" / "fleet"
    agent = [sys.executable, "-m", "agent.cli"]
    argv = [*agent, "run", "--goal", "beat baseline", "--config", "agent.toml"]
    argv += ["--runs-dir", "runs", "--run-id", "fleet", "--fleet", "ray", "--boxes", "2"]
    child = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    killed: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + 150
        while not killed and child.poll() is None and time.monotonic() < deadline:
            for pidfile in (run / "fleet").rglob("screen-*.json"):  # (in a node folder)
                try:
                    info = json.loads(pidfile.read_text())
                except (OSError, ValueError):
                    continue
                if info.get("pid"):  # the screen's server is up: the controller dies now
                    child.send_signal(signal.SIGKILL)
                    killed = {"trial": pidfile.stem, "file": pidfile, **info}
                    break
            time.sleep(0.05)
        _, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate(timeout=30)
    assert killed, "no screen trial was seen running: " + err[-2000:]
    before = events(run)
    assert not any(e["type"] == "run_finished" for e in before)
    cut = {e["trial"] for e in before if e["type"] == "trial_started"}
    cut -= {e["trial"] for e in before if e["type"] == "trial_ended"}
    assert killed["trial"] in cut
    # the dead controller's job may take its workers down, and a worker that ends gracefully
    # kills its server and removes its pid file itself: whether the resume finds the file (and
    # kills the group it names) is known once that has settled
    time.sleep(5)
    left = killed["file"].exists()

    resumed = subprocess.run(
        [*agent, "resume", "fleet", "--runs-dir", "runs"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    log = events(run)
    retried = [e for e in log if e["type"] == "trial_retried"]
    assert {e["trial"] for e in retried} == cut and all(e["reason"] == RESUMED for e in retried)
    screen = next(e for e in retried if e["trial"] == killed["trial"])
    if left:
        assert f"killed the server group {killed['pid']}" in screen["cleanup"]
    else:
        assert screen["cleanup"] == "nothing left of it here"
    assert not group_alive(int(killed["pid"]))
    ended = {e["trial"]: e for e in log if e["type"] == "trial_ended"}
    assert all(ended[f"{t}-try2"]["ok"] for t in cut)
    assert sum(e["type"] == "fleet_started" for e in log) == 2
    rec = json.loads((run / "recommendation.json").read_text())
    assert rec["value"] > 0 and rec["baseline_value"] > 0
    assert log[-1]["type"] == "run_finished" and log[-1]["status"] == "finished"
    # nothing left: no simulator of the run's boxes, no Ray process of either cluster - the
    # killed controller's was killed by its mark as the resumed one started (reap_cluster), not
    # left for its per-node agents to notice on their own, minutes later
    assert with_env(str(run / "fleet")) == []
    left = {pid: cmd for pid, cmd in live(RAY_PROCESSES).items() if pid not in ray_before}
    assert left == {}, {pid: (cmd[:160], _ray_tmpdir(pid)) for pid, cmd in left.items()}


def test_the_controller_builds_no_loop_to_supervise() -> None:
    """Issue 30.4: the controller checks the inbox and the budgets through agent.supervision, the
    object the one-box loop uses too - it constructs no Agent and imports no loop."""
    import ast

    import agent.fleet.controller as module

    tree = ast.parse(Path(module.__file__).read_text())
    calls = {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "Agent" not in calls and "agent.loop" not in imported
    assert "Supervision" in calls


def _ray_tmpdir(pid: int) -> str | None:
    """Which cluster a Ray process left running belongs to, for a failure's message."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    return next((e.decode()[11:] for e in env if e.startswith(b"RAY_TMPDIR=")), None)


class WedgedFleet(FakeFleet):
    """A fleet one of whose clean-ups a wedged node owed: done late (handed over at the second
    look, while trials come back), and another still owed at the close, LEFT."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0
        self.late: list[Cleaned] = []

    def settled(self) -> list[Cleaned]:
        self.looks += 1
        out, self.late = self.late, []
        if self.looks == 2:
            out.append(Cleaned("t0", "n2", "box2", "done after it got no answer at first: ..."))
        return out

    async def close(self) -> None:
        await super().close()
        left = Cleaned("t9", "n2", "box2", "LEFT on box2 (node n2): ...", True, 4242, 8123)
        left.kill = "on box2: kill -KILL -- -4242"
        self.late.append(left)


def test_a_wedged_nodes_late_clean_up_and_what_it_left_are_recorded_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = new_run(tmp_path)
    fleet = WedgedFleet()
    assert fleet_run_to_end(run, fleet) == 0
    log = events(run.path)
    kinds = [e["type"] for e in log]
    assert kinds.count("trial_cleaned") == 1 and kinds.count("trial_left") == 1
    cleaned = next(e for e in log if e["type"] == "trial_cleaned")
    assert (cleaned["trial"], cleaned["node"], cleaned["box"]) == ("t0", "n2", "box2")
    left = next(e for e in log if e["type"] == "trial_left")
    assert (left["pgid"], left["port"]) == (4242, 8123)
    assert left["kill"] == "on box2: kill -KILL -- -4242"
    assert kinds.index("trial_left") < kinds.index("run_finished")  # recorded before the end
    assert "fleet: t9: LEFT on box2 (node n2): ...; kill it: on box2: kill -KILL -- -4242" in (
        capsys.readouterr().err
    )
    folded = Run.open(run.path).state.fleet
    assert folded is not None and folded.cleaned == ["t0"] and folded.left[0]["pgid"] == 4242


def test_a_trial_lost_and_placed_again_stays_in_flight_once(tmp_path: Path) -> None:
    """A trial lost with its node is cancelled in the History and placed again: in flight once,
    after the others (as the controller's own trials), and nothing is in flight at the end."""
    run = new_run(tmp_path)
    lost_once: set[str] = set()
    seen: list[tuple[list[Any], list[Any]]] = []

    class Losing(FakeFleet):
        async def next_done(self) -> tuple[Submitted, TrialOutcome]:
            sub, out = await super().next_done()
            seen.append((list(live.h.in_flight), list(live.placed.values())))
            if screens(sub.spec.trial_id) and sub.spec.trial_id not in lost_once:
                lost_once.add(sub.spec.trial_id)
                out = replace(out, end="lost", ok=False, reason=f"{LOST}: it died", node="n1")
            return sub, out

    live = FleetCampaign(run, tiny_config(tmp_path), Losing())
    assert asyncio.run(live.drive()) == 0
    run.close()
    assert lost_once and any(e["type"] == "trial_retried" for e in events(run.path))
    assert all(h == c for h, c in seen) and live.h.in_flight == []
