"""The report's closing sections: the setup, how to reproduce it, what the campaign cost, and
(with a [cost] price) what each configuration costs to serve."""

from __future__ import annotations

import shlex

from agent.report.figures import Figures, api_waits, cost
from agent.report.measured import Configuration
from agent.report.outcome import policy_servers
from agent.report.render import Block, Bullets, Code, Heading, Para, Table
from state.sweeps import count
from tools.domain import cost as serving


def setup(f: Figures) -> list[Block]:
    cfg = f.m.state.config
    server = cfg.get("server") or {}
    bench = {**(cfg.get("bench") or {}), **(f.baseline.workload if f.baseline else {})}
    hosts = ", ".join(f"{h.get('name')} ({h.get('address')})" for h in cfg.get("hosts") or [])
    search = [k for k in cfg.get("search") or {} if k not in ("requires", "baseline")]
    engine, host = server.get("engine", "?"), server.get("host", "?")
    launched = f.m.state.launches.record().launches  # each read the version of its binary
    versions = sorted({v for x in launched if x.started and (v := x.started.engine_version)})
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
    return shlex.join(bench_argv(c, f"http://127.0.0.1:{port}", c.levels))


def bench_argv(c: Configuration, url: str, levels: list[int]) -> list[str]:
    """`agent bench` measuring the server at `url` with `c`'s workload at `levels` (the Reproduce
    section's command; benchmarks/deploy_check.py runs it against the deploy files' servers)."""
    argv = ["agent", "bench", "--url", url, "--concurrency", ",".join(map(str, levels))]
    for key, flag in (("input_len", "--input-len"), ("max_tokens", "--max-tokens")):
        if c.workload.get(key) is not None:
            argv += [flag, str(c.workload[key])]
    return argv


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
    ]
    waits = api_waits(f.m.events)
    if waits is not None:  # an outage the run waited out is part of its wall-clock
        rows.append(["waiting on the model API", f"{waits.text()}, within the wall-clock"])
    rows += [
        ["model turns", f"{c['steps']:g}"],
        [
            "model tokens" if f.m.state.brain != "autopilot" else "model tokens (autopilot: none)",
            f"{c['input_tokens']:,.0f} in (cache included), {c['output_tokens']:,.0f} out",
        ],
        ["model API cost (the campaign's brain)", f"${c['usd']:.2f}"],
        ["serving cost", serving_line(f)],
    ]
    return [Heading(2, "Cost"), Table(["what", "how much"], rows), *serving_table(f)]


def serving_line(f: Figures) -> str:
    """The hardware's price as configured, or the one line that says how to set one."""
    if f.price is None:
        return f"not priced: {serving.HINT}"
    return f"{f.price.describe()}: $ per million output tokens of each configuration below"


def serving_table(f: Figures) -> list[Block]:
    """$ per million output tokens of every configuration measured at every level it served
    (Figures.usd_per_mtok), the cheapest at each level in bold; nothing without a price."""
    if f.price is None or not f.measured:
        return []
    shown = [c for c in f.ranked() if c.levels]
    priced = {id(c): f.usd_per_mtok(c) for c in shown}
    levels = sorted({lv for c in shown for lv in priced[id(c)]})
    cheapest = {
        lv: min(here, key=lambda c: priced[id(c)][lv])
        for lv in levels
        if len(here := [c for c in shown if lv in priced[id(c)]]) > 1
    }
    rows = []
    for c in shown:
        cells = []
        for lv in levels:
            v = priced[id(c)].get(lv)
            text = "-" if v is None else usd(v)
            cells.append(f"**{text}**" if cheapest.get(lv) is c else text)
        name = c.name + (" (winner)" if c is f.winner else "")
        rows.append([name, str(f.gpus(c)), *cells])
    how = (
        f"What each configuration costs to serve, in $ per million output tokens: its hourly price "
        f"({f.price.describe()}"
        + (" x its GPUs" if f.price.usd_per_gpu_hour is not None else "")
        + ") over the output tokens it served in an hour at that level (the mean of its sweeps, "
        "the tok/s of the tables above). The cheapest at each level is in bold; - : not measured "
        "there. The model API cost above is the campaign's, not the server's."
    )
    headers = ["configuration", "GPUs", *(f"C={lv}" for lv in levels)]
    return [Para(how), Table(headers, rows, right=set(range(1, len(headers))))]


def usd(value: float) -> str:
    """Three significant figures (at least): $0.0120, $4.50, $49.4, $1,234."""
    return f"${value:,.0f}" if value >= 100 else f"${value:#.3g}"
