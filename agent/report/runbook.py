"""The report's closing sections: the setup, how to reproduce it, and what it cost."""

from __future__ import annotations

import shlex

from agent.report.figures import Figures, cost
from agent.report.measured import Configuration
from agent.report.outcome import policy_servers
from agent.report.render import Block, Bullets, Code, Heading, Para, Table
from state.sweeps import count


def setup(f: Figures) -> list[Block]:
    cfg = f.m.state.config
    server = cfg.get("server") or {}
    bench = {**(cfg.get("bench") or {}), **(f.baseline.workload if f.baseline else {})}
    hosts = ", ".join(f"{h.get('name')} ({h.get('address')})" for h in cfg.get("hosts") or [])
    search = [k for k in cfg.get("search") or {} if k not in ("requires", "baseline")]
    engine, host = server.get("engine", "?"), server.get("host", "?")
    versions = sorted(
        {str(e["engine_version"]) for e in f.m.events if e.get("engine_version")}
    )  # each launch read the version of the binary it ran (server_started)
    version = f" (version {', '.join(versions)})" if versions else " (version not read)"
    items = [
        f"engine: {engine}{version} on host {host}; hosts: {hosts or '-'}",
        f"base command: `{server.get('command', '?')}`",
        f"workload: input {bench.get('input_len', '?')} tokens, output "
        f"{bench.get('max_tokens', '?')} tokens, levels {bench.get('concurrency', '?')}",
        f"search space: {len(search)} flags ({', '.join(search) or '-'})",
        f"config: {cfg.get('source', '?')} (resolved copy: `config.toml` in the run folder)",
    ]
    return [Heading(2, "Setup"), Bullets(items)]


def reproduce(f: Figures) -> list[Block]:
    out: list[Block] = [Heading(2, "Reproduce")]
    servers = policy_servers(f)
    for server in servers:  # a policy: one server per range
        out += [Para(f"Launch the server for {server.span} ({server.name}):"), Code(server.command)]
    if f.winner is not None and not servers:
        out += [Para("Launch the winner:"), Code(f.m.command_of(f.winner))]
    if f.baseline is not None and f.baseline is not f.winner:
        out += [Para("Launch the baseline:"), Code(f.m.command_of(f.baseline))]
    target = f.winner or f.baseline
    if target is not None:
        out += [
            Para("Benchmark it (the same workload and levels):"),
            Code(_bench_command(f, target)),
        ]
    s = f.m.state
    run_cmd = ["agent", "run", "--goal", s.goal, "--config", str(f.m.run_path / "config.toml")]
    if s.model:
        run_cmd += ["--model", s.model]
    replay_cmd = ["agent", "replay", str(f.m.run_path), "--check"]
    out += [
        Para("Run the campaign again, or replay this one without servers:"),
        Code(shlex.join(run_cmd) + "\n" + shlex.join(replay_cmd)),
    ]
    return out


def _bench_command(f: Figures, c: Configuration) -> str:
    port = (f.m.state.config.get("server") or {}).get("port", 30000)
    argv = ["agent", "bench", "--url", f"http://127.0.0.1:{port}"]
    argv += ["--concurrency", ",".join(map(str, c.levels))]
    for key, flag in (("input_len", "--input-len"), ("max_tokens", "--max-tokens")):
        if c.workload.get(key) is not None:
            argv += [flag, str(c.workload[key])]
    return shlex.join(argv)


def cost_section(f: Figures) -> list[Block]:
    c = cost(f.m)
    rows = [
        ["server launches", f"{c['launches']:g} ({c['failed_launches']:g} failed to start)"],
        [
            "sweeps",
            f"{c['sweeps']:g} ({count(int(c['benchmark_calls']), 'benchmark call')}, "
            f"{c['benchmark_minutes']:.1f} benchmark minutes)",
        ],
        ["wall-clock", f"{c['wall_minutes']:.1f} minutes"],
        ["model turns", f"{c['steps']:g}"],
        [
            "model tokens" if f.m.state.brain != "autopilot" else "model tokens (autopilot: none)",
            f"{c['input_tokens']:,.0f} in (cache included), {c['output_tokens']:,.0f} out",
        ],
        ["model cost", f"${c['usd']:.2f}"],
    ]
    return [Heading(2, "Cost"), Table(["what", "how much"], rows)]
