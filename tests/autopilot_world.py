"""A fast stand-in for the lab in autopilot tests: tools that accept exactly the real tools'
inputs (their own Input models) and write the same events, with sim.truth times seeded noise for
numbers - the real loop, the real todo and recommend tools, no processes."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from agent.brains.autopilot.offline import sim_floors
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


def model(flags: dict[str, Any], base: Sequence[str]) -> Any:
    """The simulator's model of `flags` on `base` (its base flags; none: the lab's)."""
    return model_of(flags, base) if base else model_of(flags)


class FakeStart(Tool):
    name = StartServer.name
    Input = StartServer.Input

    def __init__(self, busy: tuple[int, ...] = (), base: Sequence[str] = ()) -> None:
        self.busy = busy  # ports a stranger holds
        self.base = base

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
            found = model(inp.flags, self.base)
        except FlagError as err:
            reason = str(err)
        else:
            reason = found.failure.message if found.failure is not None else ""
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

    def __init__(
        self, seed: int = 0, noise: float = 0.01, fail_first: int = 0, base: Sequence[str] = ()
    ) -> None:
        self.seed, self.noise, self.fail_first = seed, noise, fail_first
        self.base = base

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
        per = throughput_of(model(flags, self.base), levels, bench.input_len, bench.max_tokens)
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
        floors = sim_floors(bench.max_tokens, bench.input_len, self.base or None)(flags, levels)
        points = {
            str(c): {
                "output_throughput": summary[str(c)],
                "floor_tok_s": tok_s,
                "floor_share": summary[str(c)] / tok_s,
                "floor_bound": b,
            }
            for c, (tok_s, b) in floors.items()
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
            points=points,  # with the floor of each level, as run_benchmark's events carry it
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
    seed: int = 0,
    noise: float = 0.01,
    busy: tuple[int, ...] = (),
    fail_first: int = 0,
    base: Sequence[str] = (),
) -> ToolBox:
    """The stand-in tools; `base`: the simulator's base flags (a profile's; none: the lab's)."""
    return ToolBox(
        [
            TodoWrite(),
            TodoRead(),
            FakeStart(busy, base),
            FakeKill(),
            FakeBench(seed, noise, fail_first, base),
            FakeCompare(),
            Recommend(),
        ]
    )


def lab() -> Config:
    return lab_config(port=30999)
