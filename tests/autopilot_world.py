"""A fast stand-in for the lab in autopilot tests: tools that accept exactly the real tools'
inputs (their own Input models) and write the same events, with sim.truth times seeded noise for
numbers - the real loop, the real todo and recommend tools, no processes."""

from __future__ import annotations

import random
from typing import Any

from sim.flags import FlagError
from sim.truth import model_of, throughput_of
from tools.base import Tool, ToolBox, ToolContext, ToolError, ToolResult
from tools.bench.confighash import config_hash
from tools.compare import Compare
from tools.domain.config import Config, lab_config
from tools.domain.space import render_flags
from tools.kill_server import KillServer
from tools.recommend import Recommend
from tools.run_benchmark import RunBenchmark
from tools.start_server import StartServer
from tools.todo import TodoRead, TodoWrite


class FakeStart(Tool):
    name = StartServer.name
    Input = StartServer.Input

    def __init__(self, busy: tuple[int, ...] = ()) -> None:
        self.busy = busy  # ports a stranger holds

    async def run(self, ctx: ToolContext, inp: Any) -> ToolResult:
        cfg = ctx.config.server
        port = inp.port or cfg.port
        if port in self.busy:
            raise ToolError(
                f"port {port} on host local is in use by pid 1 (nc -l), not by a "
                "server of this run; stop it (bash) if it is a leftover",
                data={"name": inp.name, "port_busy": port},
            )
        command = " ".join([cfg.command, *render_flags(inp.flags), "--port", str(port)])
        pid = 1000 + len(ctx.run.state.results) + ctx.run.state.steps
        ctx.run.append(
            "server_started",
            name=inp.name,
            host="local",
            engine="sim",
            pid=pid,
            pgid=pid,
            port=cfg.port,
            command=command,
            flags=inp.flags,
            log="x.log",
        )
        try:
            model = model_of(inp.flags)
        except FlagError as err:
            reason = str(err)
        else:
            reason = model.failure.message if model.failure is not None else ""
        if reason:
            ctx.run.append("server_failed", name=inp.name, diagnosis=reason, log_excerpt="")
            return ToolResult(
                text=f"server {inp.name} failed to start after 1.0 s: {reason}",
                is_error=True,
                data={"diagnosis": reason},
            )
        ctx.run.append("server_ready", name=inp.name, seconds=1.0)
        return ToolResult(text=f"server {inp.name} ready", data={"name": inp.name})


class FakeKill(Tool):
    name = KillServer.name
    Input = KillServer.Input

    async def run(self, ctx: ToolContext, inp: Any) -> ToolResult:
        names = [inp.name] if inp.name else list(ctx.run.state.servers)
        for name in names:
            ctx.run.append("server_killed", name=name, killed=[], verified={"pid_gone": True})
        return ToolResult(text=f"killed {names or 'nothing'}", data={"killed": names})


class FakeBench(Tool):
    name = RunBenchmark.name
    Input = RunBenchmark.Input

    def __init__(self, seed: int = 0, noise: float = 0.01, fail_first: int = 0) -> None:
        self.seed, self.noise, self.fail_first = seed, noise, fail_first

    async def run(self, ctx: ToolContext, inp: Any) -> ToolResult:
        servers = ctx.run.state.servers
        name = inp.server or next(iter(servers), None)
        if name not in servers:
            raise ToolError(f"no running server named {name!r}")
        flags = servers[name]["flags"]
        if self.fail_first > 0:
            self.fail_first -= 1
            raise ToolError("every request of level 1 failed: connection reset by peer")
        bench = ctx.config.bench
        levels = inp.concurrency or list(bench.concurrency)
        per = throughput_of(model_of(flags), levels, bench.input_len, bench.max_tokens)
        rng = random.Random(self.seed * 100_003 + len(ctx.run.state.results))  # same on resume
        summary = {str(c): round(v * (1 + rng.gauss(0, self.noise)), 2) for c, v in per.items()}
        result_id = f"b{len(ctx.run.state.results) + 1:03d}-{inp.label or name}"
        workload = {
            "endpoint": bench.endpoint,
            "input_len": bench.input_len,
            "max_tokens": bench.max_tokens,
            "ignore_eos": True,
            "temperature": 0.0,
            "dataset": "random",
            "requests_per_level": inp.requests_per_level,
        }
        ctx.run.append(
            "benchmark",
            id=result_id,
            path=f"results/{result_id}.json",
            config_hash=config_hash(servers[name]["command"], workload),  # one per configuration
            server=name,
            command=servers[name]["command"],
            flags=flags,
            label=inp.label or name,
            workload=workload,
            summary=summary,
        )
        return ToolResult(
            text=f"{summary}\nsaved results/{result_id}.json (id {result_id}, config h)",
            data={"id": result_id, "summary": summary},
        )


class FakeCompare(Tool):
    name = Compare.name
    Input = Compare.Input

    async def run(self, ctx: ToolContext, inp: Any) -> ToolResult:
        known = {r["id"] for r in ctx.run.state.results}
        missing = [r for r in inp.results if r not in known]
        if missing:
            raise ToolError(f"unknown results {missing}")
        return ToolResult(text=f"compared {inp.results}")


def world(
    seed: int = 0, noise: float = 0.01, busy: tuple[int, ...] = (), fail_first: int = 0
) -> ToolBox:
    return ToolBox(
        [
            TodoWrite(),
            TodoRead(),
            FakeStart(busy),
            FakeKill(),
            FakeBench(seed, noise, fail_first),
            FakeCompare(),
            Recommend(),
        ]
    )


def lab() -> Config:
    return lab_config(port=30999)
