"""A live run for the supervisor tests: `agent run` (the real CLI, loop, runner, view and
report) driven by a slow scripted brain, in its own process.

    python -m tests.steer_driver --runs-dir D --run-id R [--turns N] [--pace S] [--gate-at K]
                                 [--max-steps N] [--no-server] [--real]

The brain plans todos, starts a "server" (a real detached process, in its own process group),
runs a "benchmark" (a benchmark event, with progress), then reads its todos once per turn,
`--pace` seconds apart, until `--turns`. It acknowledges every supervisor message in its next
turn's text and ends early on "wrap up". With --gate-at K it waits at turn K until the file
`gate` exists in the run folder, so a test can act at a known point.

With --real the server is the simulator (the lab's command on a free port) and the tools are the
real start_server, kill_server and run_benchmark; otherwise small stand-ins that log the same
events (a `sleep` process as the server), for tests that need speed over fidelity.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from agent.brains.base import Turn, TurnRequest
from tools.base import Tool, ToolContext, ToolInput, ToolResult
from tools.todo import TodoRead, TodoWrite

PLAN = [
    ("srv", "start the baseline server", "high"),
    ("bench", "sweep the baseline", "high"),
    ("wait", "keep an eye on the todo list", "medium"),
    ("report", "write the conclusion", "low"),
]
SUMMARY = {"1": 92.6, "10": 480.0, "100": 770.0}


class Scripted(Tool):
    description: ClassVar[str] = ""

    @classmethod
    def spec(cls) -> dict[str, Any]:  # no prompts/tools file for test tools
        schema = cls.Input.model_json_schema()
        return {"name": cls.name, "description": cls.description, "input_schema": schema}


class StartInput(ToolInput):
    name: str = Field("server", description="server name")
    flags: dict[str, Any] = Field(default_factory=dict, description="flags")


class FakeStartServer(Scripted):
    """Starts a real process that outlives nothing: `sleep`, in its own session."""

    name = "start_server"
    Input = StartInput

    async def run(self, ctx: ToolContext, inp: StartInput) -> ToolResult:
        log = ctx.run.path / "logs" / f"{inp.name}.log"
        proc = subprocess.Popen(
            ["sleep", "300"],
            stdout=open(log, "wb"),  # noqa: SIM115 - the child owns it
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        ctx.run.append(
            "server_started", name=inp.name, host="local", engine="sim", pid=proc.pid,
            pgid=proc.pid, port=30000, command="sleep 300", flags=inp.flags, log=str(log),
        )  # fmt: skip
        for i in range(1, 5):
            if ctx.progress:
                ctx.progress("server_load", name=inp.name, fraction=i / 4, line=f"shard {i}/4")
            await asyncio.sleep(0.05)
        ctx.run.append("server_ready", name=inp.name, seconds=0.2)
        return ToolResult(text=f"{inp.name} ready (pid {proc.pid})", data={"pid": proc.pid})


class KillInput(ToolInput):
    name: str | None = Field(None, description="server name; omitted = all")


class FakeKillServer(Scripted):
    name = "kill_server"
    Input = KillInput

    async def run(self, ctx: ToolContext, inp: KillInput) -> ToolResult:
        names = [inp.name] if inp.name else list(ctx.run.state.servers)
        for name in names:
            pgid = ctx.run.state.servers[name]["pgid"]
            try:
                os.killpg(pgid, signal.SIGKILL)
                os.waitpid(pgid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            ctx.run.append("server_killed", name=name, killed=[pgid], verified=True)
        return ToolResult(text=f"killed {', '.join(names) or 'nothing'}")


class BenchInput(ToolInput):
    server: str = Field(description="server name")
    label: str = Field("", description="label")


class FakeBenchmark(Scripted):
    name = "run_benchmark"
    Input = BenchInput

    async def run(self, ctx: ToolContext, inp: BenchInput) -> ToolResult:
        for i, level in enumerate(SUMMARY, 1):
            if ctx.progress:
                ctx.progress(
                    "benchmark",
                    id=inp.label,
                    level=int(level),
                    done=i,
                    total=3,
                    output_throughput=SUMMARY[level],
                )
            await asyncio.sleep(0.05)
        points = {  # as tools/benchmark_outcome.py compacts them
            c: {"output_throughput": v, "median_ttft_ms": 50.0, "p99_ttft_ms": 80.0,
                "median_tpot_ms": 10.0, "p99_tpot_ms": 12.5}
            for c, v in SUMMARY.items()
        }  # fmt: skip
        server = ctx.run.state.servers.get(inp.server, {})
        ctx.run.append(
            "benchmark", id="b1", path="results/b1.json", config_hash="h", server=inp.server,
            command=server.get("command", ""), flags=server.get("flags", {}), label=inp.label,
            workload={"input_len": 512, "max_tokens": 128}, summary=SUMMARY, points=points,
        )  # fmt: skip
        return ToolResult(text="C=1 92.6 tok/s ...")


def plan(active: int, step: int) -> list[dict[str, Any]]:
    todos = []
    for n, (i, content, priority) in enumerate(PLAN):
        status = "completed" if n < active else "in_progress" if n == active else "pending"
        if i == "wait" and step:
            content = f"{content} (turn {step})"
        todos.append({"id": i, "content": content, "priority": priority, "status": status})
    return todos


class SlowBrain:
    name = "scripted"

    def __init__(
        self, run_path: Path, turns: int, pace: float, gate_at: int | None, server: bool,
        real: bool = False,
    ) -> None:  # fmt: skip
        self.run_path, self.turns, self.pace = run_path, turns, pace
        self.gate_at, self.server, self.real = gate_at, server, real
        self.acked: set[int] = set()

    async def next_turn(self, req: TurnRequest) -> Turn:
        state = req.state
        step = state.steps
        if self.gate_at is not None and step == self.gate_at:
            gate = self.run_path / "gate"
            deadline = time.monotonic() + 60
            while not gate.exists() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        elif step > 0:
            await asyncio.sleep(self.pace)
        new = [m for m in state.supervisor if m["seq"] not in self.acked]
        self.acked.update(m["seq"] for m in new)
        text = " ".join(f"Acknowledged supervisor: {m['text']!r}." for m in new)
        if any("wrap up" in m["text"].lower() for m in new) or step >= self.turns:
            return Turn([{"type": "text", "text": (text + " Wrapping up.").strip()}], "end_turn")
        calls: list[tuple[str, dict[str, Any]]]
        if step == 0:
            calls, say = [("todowrite", {"todos": plan(0, step)})], "Planning the campaign."
        elif step == 1 and self.server:
            flags = {"--cuda-graph-max-bs": 128} if self.real else {"--tp": 8}
            calls, say = [("start_server", {"name": "baseline", "flags": flags})], "Start."
        elif step == 2 and self.server:
            bench: dict[str, Any] = {"server": "baseline", "label": "baseline sweep"}
            if self.real:
                bench.update(concurrency=[1, 4], requests_per_level=8, max_tokens=32)
            calls = [("todowrite", {"todos": plan(1, 0)}), ("run_benchmark", bench)]
            say = "Sweeping the baseline."
        else:  # a different list each turn: the same call and result thrice is "stuck"
            calls, say = [("todowrite", {"todos": plan(2, step)})], f"Turn {step}: still here."
        content: list[dict[str, Any]] = [{"type": "text", "text": f"{text} {say}".strip()}]
        for i, (name, inp) in enumerate(calls):
            content.append({"type": "tool_use", "id": f"t{step}_{i}", "name": name, "input": inp})
        usage = {"input_tokens": 1200, "output_tokens": 80}
        return Turn(content, "tool_use", usage=usage, cost_usd=0.01)


FAKE_LAB = '[server]\nengine = "sglang"\ncommand = "sleep 300"\n'
LAB = """# the built-in lab's simulator (command and search filled in), on a port of its own
[server]
engine = "sim"
port = {port}
ready_timeout_s = 60
[bench]
max_tokens = 32
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fake_tools(fleet: bool = False) -> list[Tool]:
    return [TodoWrite(), TodoRead(), FakeStartServer(), FakeKillServer(), FakeBenchmark()]


def real_tools(fleet: bool = False) -> list[Tool]:
    from tools.kill_server import KillServer
    from tools.run_benchmark import RunBenchmark
    from tools.start_server import StartServer

    return [TodoWrite(), TodoRead(), StartServer(), KillServer(), RunBenchmark()]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs-dir", type=Path, required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--turns", type=int, default=8)
    p.add_argument("--pace", type=float, default=0.2)
    p.add_argument("--gate-at", type=int)
    p.add_argument("--max-steps", type=int, default=100)
    p.add_argument("--no-server", action="store_true")
    p.add_argument("--real", action="store_true", help="the simulator and the real tools")
    args = p.parse_args(argv)

    import agent.cli.runner
    import agent.session
    from agent.cli import main as cli_main

    run_path = args.runs_dir / args.run_id
    brain = SlowBrain(run_path, args.turns, args.pace, args.gate_at, not args.no_server, args.real)
    agent.cli.runner.make_brain = lambda model, config: brain
    agent.session.all_tools = real_tools if args.real else fake_tools
    config = args.runs_dir / f"{args.run_id}.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(LAB.format(port=free_port()) if args.real else FAKE_LAB)
    return cli_main(
        ["run", "--goal", "beat baseline (scripted)", "--config", str(config),
         "--runs-dir", str(args.runs_dir), "--run-id", args.run_id, "--model", "autopilot",
         "--max-steps", str(args.max_steps)]
    )  # fmt: skip


# --- helpers for the tests that drive it -------------------------------------------------------
ROOT = Path(__file__).resolve().parent.parent


def spawn(runs_dir: Path, run_id: str, *args: str, **popen: Any) -> subprocess.Popen[bytes]:
    """Start a driven run in its own process; its output goes to a file in runs_dir."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    popen.setdefault("stdout", open(runs_dir / f"{run_id}.out", "wb"))  # noqa: SIM115
    popen.setdefault("stderr", subprocess.STDOUT)
    argv = [sys.executable, "-m", "tests.steer_driver", "--runs-dir", str(runs_dir)]
    return subprocess.Popen([*argv, "--run-id", run_id, *args], cwd=ROOT, **popen)


# how long a test waits on a driven run or an `agent` process before it calls it hung: an outcome
# arrives in seconds, but on a loaded 2-core machine (two CPU hogs beside the suite) 30 s ran out
DEADLINE_S = 180.0


def agent_cli(*args: str, timeout: float = DEADLINE_S) -> subprocess.CompletedProcess[str]:
    """`agent ...` as a user runs it, in another process."""
    argv = [sys.executable, "-m", "agent.cli", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def wait_for(run_path: Path, predicate: Any, timeout: float = DEADLINE_S) -> list[dict[str, Any]]:
    """Poll the run's events until predicate(events) is true; returns the events."""
    from state.events import read_events

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = read_events(run_path / "events.jsonl").events
        if predicate(events):
            return events
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting on {run_path}")


def waiting_at_gate(events: list[dict[str, Any]], step: int) -> bool:
    """The brain is in its turn `step` (waiting at the gate): `step` turns done and answered.
    Answered means every tool_use block of those turns has its result: a turn's message is
    logged before its calls, so counting tool_call events would match in between (on a loaded
    machine a glance landed there, before the turn's todowrite ran)."""
    turns = [e for e in events if e["type"] == "message" and e["role"] == "assistant"]
    results = [e for e in events if e["type"] == "tool_result"]
    uses = [b for e in turns for b in e["content"] if b.get("type") == "tool_use"]
    return len(turns) == step and len(results) == len(uses)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
