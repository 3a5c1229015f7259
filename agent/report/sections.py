"""The report's later sections: ablation, failures, noise floor, setup, reproduce, cost, caveats."""

from __future__ import annotations

import shlex
from typing import Any

from agent.report.data import Contender, flags_change, geomean_ratio, level_ratios, norm_flags
from agent.report.facts import Facts
from agent.report.render import Block, Bullets, Code, Heading, Para, Table

OMITTED = "(omitted)"


def _ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.3f}x"


def _with(flags: dict[str, Any], flag: str, value: Any) -> dict[str, Any]:
    out = dict(flags)
    if value == OMITTED:
        out.pop(flag, None)
    else:
        out[flag] = value
    return out


def ablation(f: Facts) -> list[Block]:
    base, win = f.baseline, f.winner
    if base is None or win is None or base.flags is None:
        return []
    b = norm_flags(base.flags)
    w = norm_flags(win.flags) if win.flags is not None else b
    changed: set[str] = set()
    for c in f.contenders:
        if c.flags is not None:
            nf = norm_flags(c.flags)
            changed |= {k for k in nf.keys() | b.keys() if nf.get(k) != b.get(k)}
    if not changed:
        return []
    rows = []
    for flag in sorted(changed, key=lambda k: (w.get(k) == b.get(k), k)):
        bv, wv = b.get(flag, OMITTED), w.get(flag, OMITTED)
        alone = without = None
        if wv != bv:
            one = f.contender_for(_with(b, flag, wv))
            alone = geomean_ratio(one, base) if one else None
            rest = f.contender_for(_with(w, flag, bv))
            without = geomean_ratio(win, rest) if rest else None
        rows.append(
            [
                f"`{flag}`",
                _text(bv),
                _text(wv),
                _ratio(alone),
                _ratio(without),
                _tried(f, flag, b),
            ]
        )
    headers = ["flag", "baseline", "winner", "alone on the baseline", "winner vs winner without it"]
    headers.append("other values: the best configuration with each (vs baseline)")
    return [
        Heading(2, "Ablation"),
        Para(
            "Geometric-mean throughput ratios over the levels both sides measured; "
            "`-` where that configuration was not measured."
        ),
        Table(headers, rows, right={3, 4}),
    ]


def _tried(f: Facts, flag: str, b: dict[str, Any]) -> str:
    """For each value of `flag` other than the baseline's, the best measured configuration
    with it; "alone" when that configuration changes nothing else."""
    assert f.baseline is not None
    best: dict[str, tuple[float, Contender]] = {}
    for c in f.contenders:
        nf = norm_flags(c.flags) if c.flags is not None else b
        value = _text(nf.get(flag, OMITTED))
        ratio = geomean_ratio(c, f.baseline)
        if value == _text(b.get(flag, OMITTED)) or ratio is None:
            continue
        if value not in best or ratio > best[value][0]:
            best[value] = (ratio, c)
    parts = []
    for value, (ratio, c) in best.items():
        nf = norm_flags(c.flags)
        alone = {k: v for k, v in nf.items() if k != flag} == {
            k: v for k, v in b.items() if k != flag
        }
        parts.append(f"{value}: {_ratio(ratio)} ({'alone' if alone else c.name})")
    return "; ".join(parts) or "-"


def _text(value: Any) -> str:
    return "on" if value is True else str(value)


def failed(f: Facts) -> list[Block]:
    out: list[Block] = [Heading(2, "Failed and crashed configurations")]
    rows = []
    for fail in f.failures:
        change = flags_change(fail.flags, f.base_flags) if fail.flags is not None else "-"
        excerpt = " / ".join(line.strip() for line in fail.excerpt.splitlines() if line.strip())
        rows.append([fail.name, change, fail.diagnosis, excerpt[-200:] or "-"])
    for c in f.contenders:
        if c.failed_levels:
            levels = ",".join(map(str, c.failed_levels))
            reason = f"every request failed at C={levels}"
            rows.append([c.name, flags_change(c.flags, f.base_flags), reason, "-"])
    if not rows:
        return [*out, Para("None: every configuration started and every level measured.")]
    return [*out, Table(["server", "change from the baseline", "reason", "log"], rows)]


def noise(f: Facts) -> list[Block]:
    out: list[Block] = [Heading(2, "Noise floor")]
    if not f.noise:
        text = "Unknown: no configuration was measured twice; small differences may be noise."
        return [*out, Para(text)]
    worst = max(f.noise.values())
    out.append(
        Para(
            f"Repeated measurements of {_names(f.noise_source)} differ by up to "
            f"**{worst * 100:.1f} %**: a difference smaller than this is not a win."
        )
    )
    rows = [[str(c), f"{v * 100:.2f} %"] for c, v in f.noise.items()]
    out.append(Table(["C", "spread (max - min) / mean"], rows, right={0, 1}))
    return out


def _names(names: list[str], most: int = 4) -> str:
    more = len(names) - most
    return ", ".join(names[:most]) + (f" and {more} more" if more > 0 else "")


def setup(f: Facts) -> list[Block]:
    cfg = f.state.config
    server = cfg.get("server") or {}
    bench = {**(cfg.get("bench") or {}), **(f.baseline.workload if f.baseline else {})}
    hosts = ", ".join(f"{h.get('name')} ({h.get('address')})" for h in cfg.get("hosts") or [])
    search = [k for k in cfg.get("search") or {} if k not in ("requires", "baseline")]
    engine, host = server.get("engine", "?"), server.get("host", "?")
    items = [
        f"engine: {engine} on host {host}; hosts: {hosts or '-'}",
        f"base command: `{server.get('command', '?')}`",
        f"workload: input {bench.get('input_len', '?')} tokens, output "
        f"{bench.get('max_tokens', '?')} tokens, levels {bench.get('concurrency', '?')}",
        f"search space: {len(search)} flags ({', '.join(search) or '-'})",
        f"config: {cfg.get('source', '?')} (resolved copy: `config.toml` in the run folder)",
    ]
    return [Heading(2, "Setup"), Bullets(items)]


def reproduce(f: Facts) -> list[Block]:
    out: list[Block] = [Heading(2, "Reproduce")]
    if f.winner is not None:
        out += [Para("Launch the winner:"), Code(f.command_of(f.winner))]
    if f.baseline is not None and f.baseline is not f.winner:
        out += [Para("Launch the baseline:"), Code(f.command_of(f.baseline))]
    target = f.winner or f.baseline
    if target is not None:
        out += [
            Para("Benchmark it (the same workload and levels):"),
            Code(_bench_command(f, target)),
        ]
    s = f.state
    run_cmd = ["agent", "run", "--goal", s.goal, "--config", str(f.run_path / "config.toml")]
    if s.model:
        run_cmd += ["--model", s.model]
    replay_cmd = ["agent", "replay", str(f.run_path), "--check"]
    out += [
        Para("Run the campaign again, or replay this one without servers:"),
        Code(shlex.join(run_cmd) + "\n" + shlex.join(replay_cmd)),
    ]
    return out


def _bench_command(f: Facts, c: Contender) -> str:
    port = (f.state.config.get("server") or {}).get("port", 30000)
    argv = ["agent", "bench", "--url", f"http://127.0.0.1:{port}"]
    argv += ["--concurrency", ",".join(map(str, c.levels))]
    for key, flag in (("input_len", "--input-len"), ("max_tokens", "--max-tokens")):
        if c.workload.get(key) is not None:
            argv += [flag, str(c.workload[key])]
    return shlex.join(argv)


def cost(f: Facts) -> list[Block]:
    c = f.cost
    rows = [
        ["server launches", f"{c['launches']:g} ({c['failed_launches']:g} failed to start)"],
        ["benchmarks", f"{c['benchmarks']:g} ({c['benchmark_minutes']:.1f} benchmark minutes)"],
        ["wall-clock", f"{c['wall_minutes']:.1f} minutes"],
        ["model turns", f"{c['steps']:g}"],
        [
            "model tokens" if f.state.brain != "autopilot" else "model tokens (autopilot: none)",
            f"{c['input_tokens']:,.0f} in (cache included), {c['output_tokens']:,.0f} out",
        ],
        ["model cost", f"${c['usd']:.2f}"],
    ]
    return [Heading(2, "Cost"), Table(["", ""], rows)]


def caveats(f: Facts) -> list[Block]:
    items = []
    base, win = f.baseline, f.winner
    if f.status == "running":
        items.append(
            "The campaign is still running (or was interrupted): this is an interim report."
        )
    elif f.status != "finished":
        items.append(f"The campaign ended with status `{f.status}`: its results may be incomplete.")
    if f.recommendation is None and win is not None:
        items.append("No recommendation.json: the winner is the best measured geometric mean.")
    if win is not None and win is not base and len(win.runs) < 2:
        items.append("The winner was measured on one launch only: it was not re-validated.")
    if base is not None and win is not None and win is not base and f.noise:
        within = [c for c, r in level_ratios(win, base).items() if abs(r - 1) <= f.noise.get(c, 0)]
        if within:
            where = ",".join(map(str, within))
            items.append(f"At C={where} the difference is within the noise floor.")
    if base is not None and win is not None and set(base.levels) - set(win.levels):
        missing = sorted(set(base.levels) - set(win.levels))
        items.append(f"The winner was not measured at C={','.join(map(str, missing))}.")
    if any(not r.from_file for c in f.contenders for r in c.runs):
        items.append("Some result files are missing (a replayed session): figures are the events'.")
    for m in f.state.supervisor:  # steering changes what was explored: the reader must know
        items.append(f'The supervisor said (event {m["seq"]}): "{m["text"]}".')
    return [Heading(2, "Caveats"), Bullets(items or ["None noted."])]
