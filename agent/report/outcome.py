"""The report's first sections - what the campaign found: the conclusion (what to deploy, the gain,
the concurrency policy), throughput by concurrency (chart and table), every configuration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.report.chart import crossing_pairs, crossing_points, draw
from agent.report.figures import Figures
from agent.report.measured import Configuration, flags_change
from agent.report.render import Block, Code, Heading, Image, Para, Table
from tools.bench.energy import NO_POWER, NO_POWER_TAIL
from tools.bench.floor import FLOOR_NOTE
from tools.bench.schema import PairedRecord
from tools.domain import stats
from tools.domain.physics import CEILINGS, Headroom, headroom_of
from tools.recommend import ROUTING_RULE

CHART_FILE = "report-throughput.png"
MAX_OTHERS = 3  # configurations drawn besides the baseline, the winner and the policy's
LATENCIES = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms")


def pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.3f}x ({(ratio - 1) * 100:+.1f} %)"


def num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def objective_text(f: Figures) -> str:
    if f.kind == "geomean":
        return "the geometric mean of output throughput over the sweep"
    return f.kind + (f" C={f.level}" if f.level is not None else "")


def unmeasured_reasons(f: Figures) -> list[str]:
    """Why each configuration that served no level was not measured (its latest sweep's
    commonest error), one line each, a reason said once for all the configurations it hit."""
    by_reason: dict[str, list[str]] = {}
    for c in f.m.configs:
        if not c.levels:
            by_reason.setdefault(c.runs[-1].failure_reason(), []).append(c.name)
    return [f"{', '.join(names)}: {reason}" for reason, names in by_reason.items()]


def unmeasured_text(f: Figures, why: bool = True) -> str:
    """Why there is no winner although benchmarks ran, in one sentence (`why`: with the errors)."""
    reasons = f" ({'; '.join(unmeasured_reasons(f))})" if why else ""
    if not f.measured:
        return f"no configuration could be measured: every benchmark failed at every level{reasons}"
    return f"the baseline could not be measured{reasons}, so nothing can be compared with it"


def design(paired: PairedRecord, how: bool = True) -> str:
    """How the paired figure was measured, and why a drift of the box does not move it."""
    if paired.unit == "duet round":
        why = "both servers up, blocks alternated at each level, so a drift of the box hits both"
        return f"in a duet ({why})" if how else why
    why = "launched alternately, so a drift of the box common to both cancels"
    return f"in launch pairs ({why})" if how else why


def conclusion(f: Figures) -> list[Block]:
    out: list[Block] = [Heading(2, "Conclusion")]
    base, win, cand, rec = f.baseline, f.winner, f.candidate, f.m.recommendation
    paired = f.paired  # a duet's rounds or launch pairs: the verdict's figure
    if base is None:
        return [*out, Para("No benchmark finished, so there is nothing to recommend yet.")]
    if win is None:
        text = unmeasured_text(f)
        return [*out, Para(f"**No recommendation.** {text[0].upper() + text[1:]}.")]
    floor = stats.percent(f.floor)
    if len(f.measured) == 1:
        out.append(Para("**Keep the baseline**: it is the only configuration measured."))
        out.append(Code(f.m.command_of(base)))
    elif win is base:
        tried = ""
        means = f.by_means
        if cand is not None and cand is not base and f.versus is not None and means is not None:
            tried = f" The best candidate, {cand.name}, measured {pct(f.versus.ratio)}: "
            tried += f"{means.verdict}."
        opening = (
            "No configuration beat it on the objective "
            f"({objective_text(f)}) by more than the noise floor ({floor})."
        )
        if rec is not None and rec.verdict == "not established" and cand:
            # the sweeps' means beat the floor: what withholds the win is the next sentence
            opening = (
                f"No configuration is established as better on the objective ({objective_text(f)})."
            )
            unpaired = pct(f.versus.ratio if f.versus else None)  # the ratio of the sweeps' means
            if paired is not None:  # the pairs or rounds, which the verdict reads, do not say win
                tried = (
                    f" The best candidate, {cand.name}, measured {unpaired} "
                    f"by the sweeps' means, but against the baseline {design(paired)} it is "
                    f"{paired.stated}: not established ({paired.needs})."
                )
            elif rec.drift:  # the means span a drift of the baseline that no pair cancels
                tried = (
                    f" The best candidate, {cand.name}, measured {unpaired} by the sweeps' means, "
                    f"but the baseline's own sweeps moved {rec.drift.change:+.1%} during the run "
                    "(beyond the noise floor, and as much as the gain) and no launch pair measured "
                    "it against the baseline: not established (launch pairs - the baseline and it "
                    "alternately, so a drift common to both cancels - would decide)."
                )
        out.append(Para(f"**Keep the baseline.** {opening}{tried}"))
        out.append(Code(f.m.command_of(base)))
    else:
        assert f.versus is not None
        servers = policy_servers(f)
        if servers:
            out += deploy_policy(f, servers)
        else:
            out.append(Para(f"**Deploy {win.name}** ({flags_change(win.flags, f.m.base_flags)}):"))
            out.append(Code((rec.command if rec is not None else "") or f.m.command_of(win)))
        measured = ""
        if rec is not None and rec.value is not None and rec.baseline_value is not None:
            measured = f" ({rec.value:,.1f} vs {rec.baseline_value:,.1f})"
        if paired is not None:  # the claim is the pairs', never larger
            gain = (
                f"{paired.stated} on {objective_text(f)} - the figure the verdict reads "
                f"({design(paired, how=False)}); the "
                f"sweeps' means: {pct(f.versus.ratio)} geometric-mean ratio{measured}"
            )
        else:
            gain = f"{pct(f.versus.ratio)} geometric-mean ratio{measured} on {objective_text(f)}"
        out.append(Para(f"**Gain over the baseline:** {gain}; noise floor {floor}."))
    where = where_text(f, win if win is not base else cand)
    if where:
        out.append(Para(f"**Where the gain is:** {where}"))
    if not policy_servers(f):  # a policy's servers and its rule are said above
        out.append(Para("**Concurrency policy:** " + policy_text(f)))
    return out


@dataclass
class PolicyServer:
    """One server of a concurrency policy: the range of requests in flight it serves."""

    span: str  # "C=1", "C=2-10", "C>=30"
    low: int
    high: int | None  # None: and above
    flags: dict[str, Any]
    config: Configuration | None  # as measured (None: not found among the results)
    command: str
    name: str


NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five"}


def policy_servers(f: Figures) -> list[PolicyServer]:
    """The servers to deploy when the recommendation is a policy of several ranges (else []):
    each with its launch command - recommendation.json's, else its configuration's launch."""
    policy = f.m.recommendation.policy if f.m.recommendation is not None else []
    if len(policy) < 2 or f.winner is None or f.winner is f.baseline:
        return []
    out = []
    for p in policy:
        lo, hi = p.from_concurrency, p.to_concurrency
        span = f"C>={lo}" if not hi else f"C={lo}" if hi == lo else f"C={lo}-{hi}"
        c = f.m.config_for(p.config)
        command = p.command or (f.m.command_of(c) if c else "")
        name = c.name if c else flags_change(p.config, f.m.base_flags)
        out.append(PolicyServer(span, lo, hi, dict(p.config or {}), c, command, name))
    return out


def routing_rule(servers: list[PolicyServer]) -> str:
    """How the servers of a policy share the traffic, in a sentence (tools/recommend.py
    ROUTING_RULE, with the ranges of this policy)."""
    spans = "; ".join(f"{s.span}: {s.name}" for s in servers)
    return f"{ROUTING_RULE} ({spans}); a request in flight stays where it is."


def deploy_policy(f: Figures, servers: list[PolicyServer]) -> list[Block]:
    crossover = f.m.recommendation.crossover if f.m.recommendation is not None else []
    n = NUMBER_WORDS.get(len(servers), str(len(servers)))
    at = f" (crossover at C={', '.join(map(str, crossover))})" if crossover else ""
    out: list[Block] = [
        Para(
            f"**Deploy {n} servers and route by concurrency**{at}: each configuration was "
            "fastest in its range of concurrency, none in all of them."
        )
    ]
    for s in servers:
        change = flags_change(s.flags, f.m.base_flags)
        out.append(Para(f"Server for **{s.span}**: **{s.name}** ({change}):"))
        out.append(Code(s.command or "(no launch command recorded)"))
    out.append(Para("**Routing:** " + routing_rule(servers)))
    return out


def span_text(levels: list[int], among: list[int]) -> str:
    """Levels as a reader says them: "C <= 10", "C >= 30", "C = 5" or "C = 1, 5, 70"."""
    if len(levels) == 1:
        return f"C = {levels[0]}"
    if levels == among[: len(levels)]:
        return f"C <= {levels[-1]}"
    if levels == among[-len(levels) :]:
        return f"C >= {levels[0]}"
    return "C = " + ", ".join(map(str, levels))


def ratio_range(ratios: list[float]) -> str:
    lo, hi = f"{min(ratios):.2f}", f"{max(ratios):.2f}"
    return f"{lo}x" if lo == hi else f"{lo}-{hi}x"


def where_text(f: Figures, c: Configuration | None) -> str:
    """Which levels carry the gain (beyond each level's noise floor), and what the rest are."""
    if c is None or c is f.baseline:
        return ""
    verdicts = f.level_verdicts(c)
    levels = sorted(verdicts)
    gain = [lv for lv in levels if verdicts[lv][1] == "win"]
    rest = [lv for lv in levels if lv not in gain]
    if not gain:
        return ""
    said = ratio_range([verdicts[lv][0] for lv in gain])
    if not rest:
        return f"at every level measured ({said} the baseline)."
    others = ratio_range([verdicts[lv][0] for lv in rest])
    within = all(verdicts[lv][1] == "within noise" for lv in rest)
    return (
        f"all of the gain is at {span_text(gain, levels)} ({said} the baseline); at "
        f"{span_text(rest, levels)} it is {others} the baseline"
        + (", within the noise floor." if within else ".")
    )


def policy_text(f: Figures) -> str:
    rec = f.m.recommendation
    policy = rec.policy if rec is not None else []
    crossover = rec.crossover if rec is not None else []
    if len(policy) > 1:
        parts = []
        for p in policy:
            lo, hi = p.from_concurrency, p.to_concurrency
            span = f"C>={lo}" if not hi else f"C={lo}" if hi == lo else f"C={lo}-{hi}"
            c = f.m.config_for(p.config)
            change = flags_change(p.config, f.m.base_flags)
            parts.append(f"{span}: **{c.name}** ({change})" if c else f"{span}: {change}")
        text = "; ".join(parts)
        return text + (f" (crossover at C={', '.join(map(str, crossover))})." if crossover else ".")
    assert f.winner is not None and f.baseline is not None
    pairs = crossing_pairs(f.winner.sweep, f.baseline.sweep) if f.winner is not f.baseline else []
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


def legend(f: Figures, c: Configuration, prefix: str = "") -> str:
    change = "" if c is f.baseline else f" ({flags_change(c.flags, f.m.base_flags)})"
    change = wrap_flags(change, 56)
    if prefix and c.name.startswith(prefix.rstrip(": ")):  # "baseline", not "baseline: baseline"
        prefix = ""
    return f"{prefix}{c.name}{change}"


def wrap_flags(text: str, width: int) -> str:
    """`text` on lines of about `width`, broken only after a flag's comma: a legend says every
    flag whole (cut, two configurations that differ late in their flags read the same)."""
    lines = [""]
    for part in text.split(", "):
        if lines[-1] and len(lines[-1]) + len(part) + 2 > width:
            lines[-1] += ","
            lines.append("  " + part)
        else:
            lines[-1] += (", " if lines[-1] else "") + part
    return "\n".join(lines)


def short_text(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def in_policy(f: Figures, c: Configuration) -> bool:
    policy = f.m.recommendation.policy if f.m.recommendation is not None else []
    return any(f.m.config_for(p.config) is c for p in policy)


def chart_curves(f: Figures) -> list[tuple[str, Configuration, str]]:
    base, win = f.baseline, f.winner
    chosen: list[tuple[str, Configuration, str]] = []
    if base is not None:
        chosen.append((legend(f, base, "baseline: "), base, "baseline"))
    if win is not None and win is not base:
        chosen.append((legend(f, win, "winner: "), win, "winner"))
    seen = {id(c) for _, c, _ in chosen}
    for c in f.m.configs:
        if id(c) not in seen and in_policy(f, c):
            chosen.append((legend(f, c, "policy: "), c, "other"))
            seen.add(id(c))
    if base is not None:
        others = [c for c in f.ranked() if id(c) not in seen and len(c.levels) >= 3]
        for c in [c for c in others if f.ratio(c)][:MAX_OTHERS]:
            role = "screened" if f.screened(c) else "other"
            prefix = "screened: " if role == "screened" and "screened" not in c.name else ""
            chosen.append((legend(f, c, prefix), c, role))
    return chosen


def crossover_marks(f: Figures) -> list[float]:
    marks = [float(x) for x in (f.m.recommendation.crossover if f.m.recommendation else [])]
    if not marks and f.winner is not None and f.baseline is not None and f.winner is not f.baseline:
        marks = crossing_points(f.winner.sweep, f.baseline.sweep)
    return marks


def curves(f: Figures) -> list[Block]:
    if f.winner is None:  # nothing measured, or no baseline to draw the others against
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
        c for _, c, role in chart_curves(f) if role in ("baseline", "winner") or in_policy(f, c)
    ]
    levels = sorted({c for k in shown for c in k.levels})
    energy = any(c.energy(level) is not None for c in shown for level in c.levels)
    floor = any(c.floor_share(level) is not None for c in shown for level in c.levels)
    bound = any(c.floor_bound(level) is not None for c in shown for level in c.levels)
    for level in levels:
        here = [c for c in shown if level in c.levels]
        top = max(here, key=lambda c: c.sweep[level])
        for c in here:
            vs = f.level_ratios(c).get(level)
            name = f"**{c.name}**" if c is top and len(here) > 1 else c.name
            row = [str(level), name, num(c.sweep[level])]
            row += [joules(c.energy(level))] if energy else []
            row += [percent(c.floor_share(level))] if floor else []
            row += [c.floor_bound(level) or "-"] if floor and bound else []
            row += ["-" if vs is None else f"{vs:.3f}x"]
            row += [num(c.latency(level, k)) for k in LATENCIES]
            rows.append(row)
    headers = ["C", "configuration", "tok/s"] + (["J/token"] if energy else [])
    headers += (["of floor"] if floor else []) + (["bound"] if floor and bound else [])
    headers += ["vs baseline"]
    headers += ["TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "TPOT p99 ms"]
    out.append(Table(headers, rows, right={0} | set(range(2, len(headers)))))
    if len(shown) > 1:
        out.append(Para("The fastest configuration at each level is in bold."))
    said = energy_words(shown, energy)
    if said:
        out.append(Para(said))
    if floor:
        out.append(Para(floor_words(shown)))
        out += headroom_blocks(f)
    return out


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def floor_words(shown: list[Configuration]) -> str:
    """What "of floor" is, and the box it was computed for (the results' `floor:` note)."""
    box = next((n for c in shown for n in c.notes if n.startswith(FLOOR_NOTE)), "")
    text = (
        "of floor: the level's output tok/s over its floor - C sequences decoding together, "
        "each step no shorter than reading the weights and their KV cache once (its memory-"
        "bandwidth floor), nor, where the box's figures are known, than its peak compute or its "
        "tensor-parallel all-reduce allows; bound says which of these the floor is "
        "(docs/physics.md). Far below 100 % the hardware allows more, near it only speculation "
        "(which may pass it) or fewer bytes (quantization) can."
    )
    return text + (f" Computed for {box.removeprefix(FLOOR_NOTE)}." if box else "")


def headroom_blocks(f: Figures) -> list[Block]:
    """What is left to gain against physics at each level (tools/domain/physics.py
    headroom_of): the best share any configuration measured, and per lever family what its
    ceiling leaves - and whether tuning flags is done (what they could still add is under the
    noise floor)."""
    best: dict[int, tuple[float, str]] = {}
    names: dict[int, str] = {}
    for level in sorted({lv for c in f.m.configs for lv in c.levels}):
        shares = [(s, c) for c in f.m.configs if (s := c.floor_share(level)) is not None]
        if shares:
            share, top = max(shares, key=lambda sc: sc[0])
            best[level] = (share, top.floor_bound(level) or "memory")
            names[level] = top.name
    if not best:
        return []
    room = headroom_of(best, f.floor)
    rows = [
        [str(h.level), h.bound, f"{percent(h.best_share)} ({names[h.level]})"]
        + ([gain_words(h.flags), gain_words(h.kernels)] if h.flags is not None else ["-", "-"])
        + ["no ceiling"]
        for h in room.levels
    ]
    ceiling = CEILINGS["flags"] or 0.0
    headers = ["C", "bound", "best of floor", "flags left", "kernels left", "speculation"]
    words = (
        f"**Headroom against physics:** at each level the best share of the floor measured, and "
        f"what each lever family can still add to it: flags about {ceiling:.0%} of a memory-bound "
        "floor at most (where well-built stacks stop), kernels up to the floor, speculation past "
        "it (docs/physics.md)."
    )
    return [Para(words), Table(headers, rows, right={0}), Para(done_words(room)), *stop_blocks(f)]


def stop_blocks(f: Figures) -> list[Block]:
    """Where the autopilot stopped exploring flags against physics: the first launch it planned
    with the stop signal on (its `planned` event's `physics`, agent/brains/autopilot/
    physics_stop.py)."""
    stops = [p for p in f.m.state.plans.values() if p.get("physics")]
    if not stops:
        return []
    first, n = stops[0], len(stops)
    after = f"{n} launch{'es' if n > 1 else ''} planned after that, the first a"
    what = f"{after} {first.get('purpose', 'launch')}"
    return [Para(f"**The autopilot stopped exploring flags** ({what}): {first['physics']}.")]


def gain_words(left: float | None) -> str:
    if left is None:
        return "no ceiling"
    return "reached" if left <= 0 else f"+{left:.0%}"


def done_words(room: Headroom) -> str:
    """Whether tuning flags is done: the most they could still add at a memory-bound level,
    beside the objective's noise floor (Headroom.flags_done)."""
    most = room.most
    if most is None:
        return "No level is memory-bound: the families' ceilings say nothing here."
    left, level = most.flags or 0.0, most.level
    if room.noise is None:
        return f"Flags could still add up to {left:.0%} (C={level}); the noise floor is unknown."
    if room.flags_done:
        return (
            f"Tuning flags is done: the most they could still add is {left:.0%} (C={level}), "
            f"under the objective's noise floor ({stats.percent(room.noise)}); only kernels, "
            "fewer bytes or speculation can gain more."
        )
    return (
        f"Tuning flags can still pay: up to {left:.0%} at C={level}, beyond the objective's "
        f"noise floor ({stats.percent(room.noise)})."
    )


def joules(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def energy_words(shown: list[Configuration], figures: bool) -> str:
    """What J/token is, and why it is missing where it is (the results' notes: the host
    reported no power); "" where no result says anything of power (results from before)."""
    why = list(dict.fromkeys(n for c in shown for n in c.notes if n.startswith(NO_POWER)))
    reasons = "; ".join(n.removeprefix(NO_POWER + ": ").removesuffix(NO_POWER_TAIL) for n in why)
    if figures:
        text = (
            "J/token: joules per output token, the level's mean GPU power (nvidia-smi on the "
            "server's host, or the simulator's modelled power) x its duration / its output "
            'tokens (docs/benchmark.md, "Energy").'
        )
        return text + (f" - where the host reported no power: {reasons}." if why else "")
    return f"No joules per output token: {reasons}." if why else ""


def all_configs(f: Figures) -> list[Block]:
    if f.baseline is None or not f.measured:  # the failed ones are in "Failed and crashed"
        return []
    rows = []
    for c in f.ranked():
        ratios = f.level_ratios(c)
        best = max(ratios.items(), key=lambda kv: kv[1], default=None)
        mark = " (winner)" if c is f.winner else ""
        mark += " (baseline)" if c is f.baseline and c.name != "baseline" else ""
        label = f" `{c.label}`" if c.label and c.label != c.name else ""
        rows.append(
            [
                c.name + mark + label,
                flags_change(c.flags, f.m.base_flags) if c.flags else c.command,
                ",".join(map(str, c.levels)) or "-",
                str(len(c.sweeps)),
                pct(f.ratio(c)),
                f"{best[1]:.3f}x at C={best[0]}" if best else "-",
            ]
        )
    headers = ["configuration", "change from the baseline", "levels", "sweeps"]
    headers += ["geomean vs baseline", "best level"]
    note = (
        "Best first: the configurations swept at most levels, then those screened at a few "
        "(their ratio covers only those levels); `label` is the results' label. A sweep is one "
        "configuration measured on one launch under one label, however many benchmark calls "
        "it took."
    )
    return [
        Heading(2, "All configurations measured"),
        Para(note),
        Table(headers, rows, right={3, 4}),
    ]
