"""Crash safety: SIGKILL `agent run` (and then `agent resume`) at random points of a lab campaign,
resume until it finishes, and check what a crash must never cost.

    .venv/bin/python -m benchmarks.kill_resume [--kills 20] [--per-trial 4] [--seed 1]
                                              [--space small|medium] [--keep DIR]

Each trial is one campaign of the built-in lab (the simulator, the autopilot brain) on a free port.
Only the agent process is killed, as a crash would: its servers live on and the resume must find
them. Kill points are drawn at random (seeded) among: a moment after the session starts, the middle
of a benchmark (after its tool_call), the middle of a server start (after server_started), right
after a todo write, right after a `benchmark` event; a third of the kills also tear the log (half
an event line appended with no newline, as a kill in the middle of os.write leaves it). A thread
reads todos.json all along. Checked per trial: the campaign completes (exit 0); no `benchmark`
event seen after any kill is lost (still in the log, its result file there and valid); todos.json
always valid; events.jsonl always readable (torn tail dropped, seq without gaps); every server
running at a kill adopted or killed on resume; no process of the campaign alive at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

from benchmarks.kill_resume_lab import (
    SPACES,
    Report,
    TodosWatcher,
    Workload,
    kill_leftovers,
    leftover_processes,
    regret,
    valid_result,
    write_config,
)
from state.events import read_events
from state.fold import fold
from tools.bench.schema import Recommendation

ROOT = Path(__file__).resolve().parent.parent
TRIGGERS = ("time", "run_benchmark", "server_started", "todo", "benchmark")


KillPoint = tuple[str, float, bool]  # (trigger, seconds after it, tear the log)


class Trial:
    """One campaign killed `kills` times at random points, or at the points of `plan`."""

    def __init__(
        self,
        root: Path,
        seed: int,
        kills: int,
        space: str = "small",
        plan: list[KillPoint] | None = None,
        workload: Workload | None = None,
    ) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root, self.rng, self.plan = root, random.Random(seed), plan
        self.kills = len(plan) if plan is not None else kills
        self.runs = root / "runs"
        self.run_id = f"kr{seed}"
        self.path = self.runs / self.run_id
        self.workload = workload = workload or Workload()
        self.config = write_config(root, space, workload=workload)
        self.report = Report()
        self.pending: dict[str, int] = {}  # server running at a kill -> last seq seen then
        scale = f"{workload.time_scale:g}"
        self.env = {**os.environ, "AGENT_LAB_TIME_SCALE": scale, "PYTHONUNBUFFERED": "1"}

    def session(self, first: bool) -> list[str]:
        common = ["--runs-dir", str(self.runs)]
        if first:
            args = ["run", "--goal", "beat baseline", "--model", "autopilot", "--config"]
            return [*args, str(self.config), "--run-id", self.run_id, *common]
        return ["resume", self.run_id, *common]

    def run(self, timeout: float = 600) -> Report:
        start = time.monotonic()
        watcher = TodosWatcher(self.path / "todos.json", self.report)
        watcher.start()
        try:
            while self.report.sessions < self.kills + 5:
                left = timeout - (time.monotonic() - start)
                code = self.one_session(not self.started(), left)
                if code == 0:
                    self.report.exit_code = 0
                    break
                if code is not None:  # ended by itself, not killed: resume again
                    self.report.exit_code = code
        finally:
            watcher.stop.set()
            watcher.join()
        self.final_checks()
        self.report.seconds = time.monotonic() - start
        return self.report

    def started(self) -> bool:
        """Whether a run exists to resume; a kill before `run_started` leaves none (the user is
        told to delete the folder and start again, and so does this harness)."""
        if any(e["type"] == "run_started" for e in _events(self.path)):
            return True
        shutil.rmtree(self.path, ignore_errors=True)
        return False

    def one_session(self, first: bool, timeout: float) -> int | None:
        """One `agent run`/`resume`; None when this harness killed it."""
        self.report.sessions += 1
        log = (self.root / f"session-{self.report.sessions}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent.cli", *self.session(first)],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so that a Ctrl-C of the harness does not reach it
        )
        trigger, delay, tear = self.kill_point()
        seen = len(read_events(self.path / "events.jsonl").events) if not first else 0
        fired_at: float | None = time.monotonic() if trigger == "time" else None
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
            if trigger is None:
                continue
            if fired_at is None:
                events = _events(self.path)[seen:]
                if any(_matches(e, trigger) for e in events):
                    fired_at = time.monotonic()
            if fired_at is not None and time.monotonic() - fired_at >= delay:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                log.close()
                self.after_kill(f"{trigger}+{delay:.2f}s", tear)
                return None
        if proc.poll() is None:  # over the harness's time limit
            os.kill(proc.pid, signal.SIGKILL)
        log.close()
        code = proc.wait()
        self.check_log(f"session {self.report.sessions} end")
        return code

    def cleanup(self) -> int:
        """Kill what a failed trial may have left: the simulator processes on the run's ports."""
        events = _events(self.path)
        return kill_leftovers({int(e["port"]) for e in events if e["type"] == "server_started"})

    def kill_point(self) -> tuple[str | None, float, bool]:
        if self.report.kills >= self.kills:
            return None, 0.0, False
        if self.plan is not None:
            return self.plan[self.report.kills]
        trigger = self.rng.choice(TRIGGERS)
        delay = self.rng.uniform(0.0, 6.0) if trigger == "time" else self.rng.uniform(0.0, 0.8)
        return trigger, delay, self.rng.random() < 1 / 3

    def after_kill(self, what: str, tear: bool) -> None:
        r = self.report
        r.kills += 1
        r.triggers.append(what)
        events = self.check_log(f"kill {r.kills} ({what})")
        state = fold(events)
        r.servers_at_kills += len(state.servers)
        self.pending |= {n: events[-1]["seq"] if events else 0 for n in state.servers}
        if tear and events:  # a kill in the middle of an event write
            last = json.dumps(events[-1], separators=(",", ":")).encode()
            with (self.path / "events.jsonl").open("ab") as f:
                f.write(last[: len(last) // 2])
            r.torn += 1

    def check_log(self, when: str) -> list[dict[str, Any]]:
        try:
            contents = read_events(self.path / "events.jsonl")
        except ValueError as err:
            self.report.unreadable_log.append(f"{when}: {err}")
            return []
        events = contents.events
        if [e["seq"] for e in events] != list(range(1, len(events) + 1)):
            self.report.unreadable_log.append(f"{when}: seq has gaps")
        for e in events:
            if e["type"] == "benchmark":
                self.report.reported[e["id"]] = e["path"]
        return events

    def final_checks(self) -> None:
        r = self.report
        events = self.check_log("final")
        ids = {e["id"] for e in events if e["type"] == "benchmark"}
        for rid, path in r.reported.items():
            if rid not in ids or not valid_result(Path(path), rid):
                r.lost.append(rid)
        recovered = [(e["seq"], e.get("name"), e["type"]) for e in events]
        for name, after in self.pending.items():
            found = [t for s, n, t in recovered if n == name and s > after]
            found = [t for t in found if t in ("server_adopted", "server_killed")]
            if not found:
                r.unrecovered.append(name)
        r.adopted = sum(1 for e in events if e["type"] == "server_adopted")
        r.killed_on_resume = sum(
            1 for e in events if e["type"] == "server_killed" and "resume" in e.get("reason", "")
        )
        ports = {int(e["port"]) for e in events if e["type"] == "server_started"}
        r.leftovers = leftover_processes(ports)
        try:
            path = self.path / "recommendation.json"
            r.recommendation = Recommendation.model_validate_json(path.read_bytes()).config
        except (OSError, ValueError):  # none, or not a recommendation (a ValidationError)
            r.recommendation = None
        space = tomllib.loads(self.config.read_text())["search"]
        r.regret = regret(r.recommendation, space, self.workload)


def _events(path: Path) -> list[dict[str, Any]]:
    try:
        return read_events(path / "events.jsonl").events
    except ValueError:
        return []


def _matches(event: dict[str, Any], trigger: str) -> bool:
    if trigger == "run_benchmark":
        return event["type"] == "tool_call" and event.get("name") == "run_benchmark"
    return bool(event["type"] == trigger)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=20, help="kills in all, over several trials")
    p.add_argument("--per-trial", type=int, default=4, help="kills per campaign")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--space", choices=sorted(SPACES), default="medium")
    p.add_argument("--max-tokens", type=int, default=64, help="per request")
    p.add_argument("--requests", type=int, default=8, help="per level")
    p.add_argument("--time-scale", type=float, default=20, help="AGENT_LAB_TIME_SCALE")
    p.add_argument("--keep", type=Path, help="keep the run folders here")
    args = p.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="kill-resume-"))
    w = Workload(args.max_tokens, args.requests, args.time_scale)
    ref = Trial(base / "reference", 0, 0, args.space, plan=[], workload=w).run()
    print(
        f"uninterrupted: exit {ref.exit_code} in {ref.seconds:.1f} s, {len(ref.reported)} "
        f"results, recommends {ref.recommendation} ({ref.regret:.1%} below the optimum)"
    )
    print(
        f"{'trial':>5} {'kills':>5} {'torn':>4} {'sess':>4} {'exit':>4} {'results':>7} "
        f"{'lost':>4} {'todos reads':>11} {'bad':>3} {'srv@kill':>8} {'adopted':>7} "
        f"{'killed':>6} {'left':>4} {'regret':>6} {'s':>6}  kill points"
    )
    totals = dict.fromkeys(("trials", "completed", "passed", "kills", "lost", "torn", "near"), 0)
    seed = args.seed
    while totals["kills"] < args.kills:
        trial = Trial(base / f"trial-{seed}", seed, args.per_trial, args.space, workload=w)
        try:
            r = trial.run()
        finally:
            trial.cleanup()
        for key, value in (
            ("trials", 1),
            ("completed", r.exit_code == 0),
            ("passed", r.ok),
            ("kills", r.kills),
            ("lost", len(r.lost)),
            ("torn", r.torn),
            ("near", r.regret <= 0.02),
        ):
            totals[key] += int(value)
        print(
            f"{seed:>5} {r.kills:>5} {r.torn:>4} {r.sessions:>4} {r.exit_code!s:>4} "
            f"{len(r.reported):>7} {len(r.lost):>4} {r.todos_reads:>11} {len(r.todos_bad):>3} "
            f"{r.servers_at_kills:>8} {r.adopted:>7} {r.killed_on_resume:>6} "
            f"{len(r.leftovers):>4} {r.regret:>6.1%} {r.seconds:>6.1f}  {', '.join(r.triggers)}",
            flush=True,
        )
        for problem in (*r.lost, *r.todos_bad, *r.unreadable_log, *r.unrecovered, *r.leftovers):
            print(f"      problem: {problem}")
        seed += 1
    t = totals
    print(
        f"trials {t['trials']}, completed {t['completed']}, all checks passed {t['passed']}; "
        f"kills survived {t['kills']} ({t['torn']} with a torn log line); results lost "
        f"{t['lost']}; recommendation within 2 % of the true optimum {t['near']}/{t['trials']}; "
        f"run folders under {base}"
    )


if __name__ == "__main__":
    main()
