"""The report's sections, conclusion first, as blocks (agent.report.render draws them)."""

from __future__ import annotations

from agent.report.chart import crossing_pairs, crossing_points, draw
from agent.report.data import (
    Contender,
    flags_change,
    geomean_ratio,
    level_ratios,
)
from agent.report.facts import Facts
from agent.report.render import Block, Code, Heading, Image, Para, Table
from agent.report.sections import (
    ablation,
    caveats,
    cost,
    failed,
    noise,
    reproduce,
    setup,
)

CHART_FILE = "report-throughput.png"
MAX_OTHERS = 3  # contenders drawn besides the baseline, the winner and the policy's configs


def pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.3f}x ({(ratio - 1) * 100:+.1f} %)"


def num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def build(f: Facts) -> list[Block]:
    s = f.state
    head = f"Run `{s.run_id or f.run_path.name}` · brain {s.brain or '?'}"
    head += f" ({s.model})" if s.model and s.model != s.brain else ""
    head += f" · status **{f.status}** · started {s.started_ts[:19].replace('T', ' ')} UTC"
    blocks: list[Block] = [Heading(1, f"Campaign report: {s.goal}"), Para(head)]
    blocks += conclusion(f)
    blocks += curves(f)
    blocks += all_configs(f)
    for section in (ablation, failed, noise, setup, reproduce, cost, caveats):
        blocks += section(f)
    return blocks


def conclusion(f: Facts) -> list[Block]:
    out: list[Block] = [Heading(2, "Conclusion")]
    base, win, rec = f.baseline, f.winner, f.recommendation or {}
    if base is None or win is None:
        return [*out, Para("No benchmark finished, so there is nothing to recommend yet.")]
    objective = _objective(f)
    value, base_value = rec.get("value"), rec.get("baseline_value")
    if isinstance(value, int | float) and isinstance(base_value, int | float) and base_value:
        ratio: float | None = value / base_value
        measured = f" ({value:,.1f} vs {base_value:,.1f})"
    else:
        ratio, measured = geomean_ratio(win, base), ""
    if len(f.contenders) == 1:
        out.append(Para("**Keep the baseline**: it is the only configuration measured."))
        out.append(Code(f.command_of(base)))
    elif win is base or (ratio is not None and ratio <= 1.0):
        out.append(
            Para(
                "**Keep the baseline.** No configuration beat it on the objective "
                f"({objective}) by more than the noise."
            )
        )
        out.append(Code(f.command_of(base)))
    else:
        out.append(Para(f"**Deploy {win.name}** ({flags_change(win.flags, f.base_flags)}):"))
        out.append(Code(rec.get("command") or f.command_of(win)))
        out.append(Para(f"**Gain over the baseline:** {pct(ratio)} on {objective}{measured}."))
    out.append(Para("**Concurrency policy:** " + _policy(f)))
    return out


def _objective(f: Facts) -> str:
    raw = (f.recommendation or {}).get("objective") or (f.state.config.get("objective") or {})
    if isinstance(raw, dict):
        kind = raw.get("kind", "geomean")
        extra = {k: v for k, v in raw.items() if k != "kind" and v is not None}
        raw = kind + (" " + ", ".join(f"{k}={v}" for k, v in extra.items()) if extra else "")
    names = {"geomean": "the geometric mean of output throughput over the sweep"}
    return names.get(str(raw), str(raw))


def _policy(f: Facts) -> str:
    rec = f.recommendation or {}
    policy = [p for p in rec.get("policy") or [] if isinstance(p, dict)]
    crossover = rec.get("crossover") or []
    if len(policy) > 1:
        parts = []
        for p in policy:
            lo, hi = p.get("from_concurrency"), p.get("to_concurrency")
            span = f"C>={lo}" if not hi else f"C={lo}" if hi == lo else f"C={lo}-{hi}"
            c = f.contender_for(p.get("config"))
            change = flags_change(p.get("config"), f.base_flags)
            parts.append(f"{span}: **{c.name}** ({change})" if c else f"{span}: {change}")
        text = "; ".join(parts)
        return text + (f" (crossover at C={', '.join(map(str, crossover))})." if crossover else ".")
    assert f.winner is not None and f.baseline is not None
    pairs = crossing_pairs(f.winner, f.baseline) if f.winner is not f.baseline else []
    if crossover or pairs:
        where = (
            f"at C={', '.join(map(str, crossover))}"
            if crossover
            else " and ".join(f"between C={lo} and C={hi}" for lo, hi in pairs)
        )
        return (
            f"one configuration everywhere, but it crosses the baseline {where}: "
            "see the per-level table."
        )
    return "one configuration at every concurrency level measured (no crossover)."


def legend(f: Facts, c: Contender, prefix: str = "") -> str:
    change = "" if c is f.baseline else f" ({short_text(flags_change(c.flags, f.base_flags), 48)})"
    return f"{prefix}{c.name}{change}"


def short_text(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def chart_curves(f: Facts) -> list[tuple[str, Contender, str]]:
    base, win = f.baseline, f.winner
    chosen: list[tuple[str, Contender, str]] = []
    if base is not None:
        chosen.append((legend(f, base, "baseline: "), base, "baseline"))
    if win is not None and win is not base:
        chosen.append((legend(f, win, "winner: "), win, "winner"))
    seen = {id(c) for _, c, _ in chosen}
    for p in (f.recommendation or {}).get("policy") or []:
        c = f.contender_for(p.get("config") if isinstance(p, dict) else None)
        if c is not None and id(c) not in seen:
            chosen.append((legend(f, c, "policy: "), c, "other"))
            seen.add(id(c))
    if base is not None:
        others = [
            (r, c)
            for c in f.contenders
            if id(c) not in seen and len(c.levels) >= 3 and (r := geomean_ratio(c, base))
        ]
        for _, c in sorted(others, key=lambda rc: -rc[0])[:MAX_OTHERS]:
            screened = len(c.levels) * 2 < len(base.levels)
            role = "screened" if screened else "other"
            chosen.append((legend(f, c, "screened: " if screened else ""), c, role))
    return chosen


def crossover_marks(f: Facts) -> list[float]:
    rec = (f.recommendation or {}).get("crossover") or []
    marks = [float(x) for x in rec if isinstance(x, int | float)]
    if not marks and f.winner is not None and f.baseline is not None and f.winner is not f.baseline:
        marks = crossing_points(f.winner, f.baseline)
    return marks


def curves(f: Facts) -> list[Block]:
    if f.baseline is None:
        return []
    out: list[Block] = [Heading(2, "Throughput by concurrency")]
    marks = crossover_marks(f)
    title = "Output throughput vs concurrency" + (
        f" (crossover near C={', '.join(f'{x:.0f}' for x in marks)})" if marks else ""
    )
    png = draw(chart_curves(f), marks, title)
    out.append(Image(CHART_FILE, png, "output throughput vs concurrency"))
    rows = []
    shown = [
        c for _, c, role in chart_curves(f) if role in ("baseline", "winner") or _in_policy(f, c)
    ]
    levels = sorted({c for k in shown for c in k.levels})
    for level in levels:
        here = [c for c in shown if c.value(level) is not None]
        top = max(here, key=lambda c: c.value(level) or 0.0)
        for c in here:
            vs = level_ratios(c, f.baseline).get(level)
            name = f"**{c.name}**" if c is top and len(here) > 1 else c.name
            row = [str(level), name, num(c.value(level)), "-" if vs is None else f"{vs:.3f}x"]
            row += [num(c.value(level, k)) for k in ("ttft_p50", "ttft_p99", "tpot_p50")]
            row.append(num(c.value(level, "tpot_p99")))
            rows.append(row)
    headers = ["C", "configuration", "tok/s", "vs baseline"]
    headers += ["TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "TPOT p99 ms"]
    out.append(Table(headers, rows, right={0, 2, 3, 4, 5, 6, 7}))
    if len(shown) > 1:
        out.append(Para("The fastest configuration at each level is in bold."))
    return out


def _in_policy(f: Facts, c: Contender) -> bool:
    policy = (f.recommendation or {}).get("policy") or []
    return any(isinstance(p, dict) and f.contender_for(p.get("config")) is c for p in policy)


def all_configs(f: Facts) -> list[Block]:
    if not f.contenders or f.baseline is None:
        return []
    rows = []
    for c in sorted(f.contenders, key=lambda c: -(geomean_ratio(c, f.baseline) or 0)):  # type: ignore[arg-type]
        ratios = level_ratios(c, f.baseline)
        best = max(ratios.items(), key=lambda kv: kv[1], default=None)
        mark = " (winner)" if c is f.winner else " (baseline)" if c is f.baseline else ""
        rows.append(
            [
                c.name + mark,
                flags_change(c.flags, f.base_flags) if c.flags is not None else c.command,
                ",".join(map(str, c.levels)) or "-",
                str(len(c.runs)),
                pct(geomean_ratio(c, f.baseline)),
                f"{best[1]:.3f}x at C={best[0]}" if best else "-",
            ]
        )
    headers = ["configuration", "change from the baseline", "levels", "runs"]
    headers += ["geomean vs baseline", "best level"]
    return [Heading(2, "All configurations measured"), Table(headers, rows, right={3, 4})]
