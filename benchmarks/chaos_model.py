"""A faulty model API, for real (issue 23 items 3-6): `agent run` with the Claude brain on the
built-in lab, against a loopback Messages API (tests/fake_messages_api.py) that cuts its stream
at several points, drops and resets the connection, sends junk events, refuses the prompt as too
long, answers 413/429/500/529 in bursts and for minutes, stalls a stream for ten minutes with the
connection open, and stops a reply on max_tokens inside a tool call (issue 49) - while a
simulated server of the run is up. Hostile engines are benchmarks/chaos.py's.

    .venv/bin/python -m benchmarks.chaos_model [--only NAME ...]

Each scenario is a fresh `agent run` process (its own session: what it leaves running is found
by its process group); the scripted model plans, starts the lab's server, reads its todos and
concludes; the fault hits the calls after the server started. Printed per scenario: seconds to
the outcome, the outcome (retried / compacted / paused / stopped / budget / gave up / refused /
not run) against the one expected, what was left running, and `agent replay --check`. Then the
time for a stop or a budget to act during a wait (median, max), and the totals: hangs, false
finishes, left running.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from state.events import epoch, read_events
from state.inbox import send
from state.lock import process_alive
from tests.fake_messages_api import (
    Cut,
    Drop,
    FakeMessagesAPI,
    Fault,
    Malformed,
    Reset,
    Stall,
    Status,
    cut_inside_input,
    message,
    text,
    tool_use,
)
from tools.domain.config import ModelConfig, lab_config
from tools.domain.config_toml import to_toml

MODEL = "claude-sonnet-4-6"
CONCLUSION = "The baseline stands: nothing measured beat it."
ROOT = Path(__file__).resolve().parent.parent  # this tree, for the child processes
HANG_S = 300  # a scenario past this is a hang
TOO_LONG = "prompt is too long: 212000 tokens > 200000 maximum"
PLAN = [
    {"id": "p1", "content": "Start the lab server", "status": "in_progress", "priority": "high"}
]


def replies() -> list[dict[str, Any] | bytes]:
    return [
        message(1, "tool_use", text("Plan first."), tool_use(1, "todowrite", todos=PLAN)),
        message(2, "tool_use", tool_use(2, "start_server")),
        message(3, "tool_use", text("Up. What is left?"), tool_use(3, "todoread")),
        message(4, "end_turn", text(CONCLUSION)),
    ]


def cut_kill() -> list[dict[str, Any] | bytes]:
    """The third reply stops on max_tokens inside a kill_server call's name (the SDK's partial
    parser would read `kill_server {}`: every server of the run), then the run goes on."""
    cut = message(3, "max_tokens", text("Killing the draft."), tool_use(3, "kill_server"))
    plain = replies()
    return [*plain[:2], cut_inside_input(cut, '{"name": "cand-eag'), *plain[2:]]


@dataclass
class Scenario:
    name: str
    expect: str  # the outcome that is right
    faults: list[Fault] = field(default_factory=list)
    outage: tuple[Fault, float] | None = None
    act: str = ""  # "stop": `agent stop` at the first wait of `act_on`; "budget": --max-minutes
    # the model_wait stage the stop is sent in; "stall": once the API began a stalled stream
    act_on: str = "retry"
    max_minutes: float | None = None
    overload_wait_minutes: float | None = None
    stall_timeout_s: float | None = None  # [model] stall_timeout_s (default 90 s)
    script: Callable[[], list[dict[str, Any] | bytes]] | None = None  # the replies; None: replies


STREAM_EVENTS = 9  # the third reply's stream: message_start ... message_stop
SCENARIOS = [
    Scenario("cut after message_start", "retried", [Cut(events=1, times=2)]),
    Scenario("cut inside a text block", "retried", [Cut(events=4, times=2)]),
    Scenario("cut before message_stop", "retried", [Cut(events=STREAM_EVENTS - 1, times=2)]),
    Scenario("connection dropped mid-stream x3", "retried", [Drop(events=3, times=3)]),
    Scenario("connection reset mid-stream x2", "retried", [Reset(events=5, times=2)]),
    Scenario("junk JSON event x2", "retried", [Malformed(events=3, times=2)]),
    Scenario("429 burst x3 (retry-after 1)", "retried", [Status(code=429, retry_after=1, times=3)]),
    Scenario("500 burst x3", "retried", [Status(code=500, times=3)]),
    Scenario("529 burst x4", "retried", [Status(code=529, times=4)]),
    Scenario("400 prompt too long", "compacted", [Status(code=400, message=TOO_LONG)]),
    Scenario("413 request too large", "compacted", [Status(code=413, message="too large")]),
    Scenario(
        "529 for a minute (retry-after 2)",
        "paused",
        outage=(Status(code=529, retry_after=2, times=1000), 60),
    ),
    Scenario(
        "500 for a minute (retry-after 2)",
        "paused",
        outage=(Status(code=500, retry_after=2, times=1000), 60),
    ),
    Scenario(
        "529 for 10 min, overload_wait 0.5 min",
        "gave up",
        outage=(Status(code=529, retry_after=2, times=1000), 600),
        overload_wait_minutes=0.5,
    ),
    Scenario("401 (a bad key)", "refused", [Status(code=401, message="invalid x-api-key")]),
    Scenario(
        "stop in a 300 s retry-after wait",
        "stopped",
        outage=(Status(code=529, retry_after=300, times=1000), 3600),
        act="stop",
    ),
    Scenario(
        "stop in the loop's pause",
        "stopped",
        outage=(Status(code=529, retry_after=1, times=1000), 3600),
        act="stop",
        act_on="pause",
    ),
    Scenario("stop in a cut-stream retry", "stopped", [Cut(events=2, times=1000)], act="stop"),
    Scenario(
        "stalled 10 min, stall_timeout 5 s",
        "retried",
        [Stall(events=3, seconds=600)],
        stall_timeout_s=5,
    ),
    Scenario(
        "stop in a 10-min stalled stream",
        "stopped",
        [Stall(events=3, seconds=600)],
        act="stop",
        act_on="stall",
    ),
    Scenario("kill_server cut at max_tokens", "not run", script=cut_kill),
    Scenario(
        "--max-minutes 0.4 in a 300 s wait",
        "budget",
        outage=(Status(code=529, retry_after=300, times=1000), 3600),
        act="budget",
        max_minutes=0.4,
    ),
]


@dataclass
class Outcome:
    name: str
    expect: str
    outcome: str = "?"
    seconds: float = 0.0
    left: list[str] = field(default_factory=list)
    replay: str = "?"
    act_s: float | None = None  # a stop or a budget: from the moment it applied to the end
    hang: bool = False
    false_finish: bool = False


def outcome_of(events: list[dict[str, Any]], served: list[str]) -> str:
    end = events[-1] if events and events[-1]["type"] == "run_finished" else None
    if end is None:
        return "no end"
    status = end["status"]
    named = {"stopped": "stopped", "budget_exhausted": "budget", "model_unavailable": "gave up"}
    if status in named:
        return named[status]
    if status == "error":
        return "refused" if "refused the request" in end["reason"] else f"error: {end['reason']}"
    if status != "finished":
        return status
    if any(e["type"] == "tool_call_cut" for e in events):  # answered as an error, never run
        ran = any(e["type"] == "tool_call" and e["name"] == "kill_server" for e in events)
        return "ran cut call" if ran else "not run"
    if any(e["type"] == "compaction" and e.get("cause") for e in events):
        return "compacted"
    if any(e["type"] == "model_wait" and e.get("stage") == "pause" for e in events):
        return "paused"
    if any(kind != "reply" for kind in served):
        return "retried"
    return "clean"


def left_running(pgid: int, events: list[dict[str, Any]]) -> list[str]:
    """The run's process group, and the servers it started, still alive (a zombie waiting for
    its reaper has ended: process_alive, as `agent watch` decides)."""
    left = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            left.append(f"pid {stat.parent.name} of the run's group")
            os.kill(int(stat.parent.name), signal.SIGKILL)
    for e in events:
        if e["type"] == "server_started" and process_alive(int(e.get("pid") or 0)):
            left.append(f"server {e['name']} pid {e['pid']}")
    return left


def run_one(scenario: Scenario, root: Path) -> Outcome:
    out = Outcome(scenario.name, scenario.expect)
    api = FakeMessagesAPI((scenario.script or replies)(), scenario.faults, scenario.outage, after=2)
    workdir = root / scenario.name.replace(" ", "_").replace("/", "_")
    workdir.mkdir(parents=True)
    env = {**os.environ, "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": api.url}
    env["AGENT_LAB_TIME_SCALE"] = "50"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    argv = [sys.executable, "-m", "agent.cli", "run", "--goal", "beat baseline"]
    argv += ["--model", MODEL, "--runs-dir", "runs", "--run-id", "r"]
    if scenario.max_minutes is not None:
        argv += ["--max-minutes", f"{scenario.max_minutes:g}"]
    settings = {
        k: v
        for k, v in (
            ("overload_wait_minutes", scenario.overload_wait_minutes),
            ("stall_timeout_s", scenario.stall_timeout_s),
        )
        if v is not None
    }
    if settings:
        lab = lab_config()
        model = ModelConfig.model_validate(settings)
        config = lab.model_copy(update={"model": model}).model_dump(mode="json")
        (workdir / "agent.toml").write_text(to_toml(config))
        argv += ["--config", "agent.toml"]
    run_path = workdir / "runs" / "r"
    started = time.time()
    proc = subprocess.Popen(
        argv,
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    stop_at: float | None = None
    try:
        while proc.poll() is None:
            if time.time() - started > HANG_S:
                out.hang = True
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(30)
                break
            stalled = scenario.act_on == "stall" and "stall" in api.served
            if (
                scenario.act == "stop"
                and stop_at is None
                and (stalled or waiting(run_path, scenario.act_on))
            ):
                send(run_path, "stop")
                stop_at = time.time()
            time.sleep(0.1)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    finally:
        api.close()
    out.seconds = time.time() - started
    events = read_events(run_path / "events.jsonl").events if run_path.is_dir() else []
    out.outcome = outcome_of(events, api.served)
    out.false_finish = out.outcome in ("clean", "retried", "compacted", "paused", "not run") and (
        events[-1].get("reason") != CONCLUSION
    )
    out.left = left_running(proc.pid, events)
    end_ts = epoch(events[-1]["ts"]) if events and events[-1]["type"] == "run_finished" else None
    if end_ts is not None and scenario.act == "stop" and stop_at is not None:
        out.act_s = end_ts - stop_at
    if end_ts is not None and scenario.act == "budget" and scenario.max_minutes:
        session = epoch(events[0]["ts"]) or started
        out.act_s = end_ts - (session + scenario.max_minutes * 60)
    if "Traceback" in err:
        out.outcome += " (traceback)"
    recorded = events[-1].get("exit_code") if events else None
    out.replay = replay_check(workdir, run_path, recorded)
    return out


def waiting(run_path: Path, stage: str) -> bool:
    path = run_path / "events.jsonl"
    if not path.is_file():
        return False
    try:
        events = read_events(path).events
    except ValueError:
        return False
    return any(e["type"] == "model_wait" and e.get("stage") == stage for e in events)


def replay_check(workdir: Path, run_path: Path, recorded: int | None) -> str:
    """`agent replay --check`: no drift, exit 0 whatever the recorded run's end (docs/cli.md)."""
    if not (run_path / "events.jsonl").is_file():
        return "no run"
    argv = [sys.executable, "-m", "agent.cli", "replay", str(run_path), "--check"]
    argv += ["--runs-dir", str(workdir / "replays")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=120)
    if "check: no drift" in done.stdout:
        code = done.returncode
        return "passes" if code == 0 else f"no drift, exit {code} (run: {recorded})"
    first = (done.stderr.strip().splitlines() or ["?"])[0]
    return f"DRIFT: {first[:70]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="run the scenarios whose name contains these")
    parser.add_argument("--keep", type=Path, help="keep the run folders here")
    args = parser.parse_args()
    chosen = [s for s in SCENARIOS if not args.only or any(w in s.name for w in args.only)]
    results = []
    with tempfile.TemporaryDirectory(prefix="chaos-model-") as tmp:
        for scenario in chosen:
            result = run_one(scenario, args.keep or Path(tmp))
            results.append(result)
            right = "ok" if result.outcome == result.expect else f"WRONG (want {result.expect})"
            act = f"  acted in {result.act_s:.1f} s" if result.act_s is not None else ""
            print(
                f"{result.name:<38} {result.seconds:6.1f} s  {result.outcome:<10} {right:<20}"
                f" left: {', '.join(result.left) or 'nothing'}  replay --check: {result.replay}"
                f"{act}",
                flush=True,
            )
    acts = [r.act_s for r in results if r.act_s is not None]
    print(
        f"\nscenarios {len(results)}, right {sum(r.outcome == r.expect for r in results)}, "
        f"hangs {sum(r.hang for r in results)}, false finishes "
        f"{sum(r.false_finish for r in results)}, left running {sum(bool(r.left) for r in results)}"
    )
    if acts:
        print(
            f"stop/budget acted during waits: median {statistics.median(acts):.1f} s, "
            f"max {max(acts):.1f} s (n={len(acts)})"
        )
    print(json.dumps({"replay_passes": sum(r.replay == "passes" for r in results)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
