"""Comparing benchmark results: winner and ratio per level, crossovers, geometric-mean ratio,
and the warnings that keep a comparison honest.

Fairness (docs/benchmark.md): the two server commands are normalized (confighash) and diffed.
- a different program, positional arguments, model (--model, --model-path), parallelism (--tp,
  ...) or engine: an UNFAIR comparison - the difference is not a tuning flag;
- a differing flag that is not among either result's flags under test (start_server's `flags`):
  UNFAIR as well - something else changed between the launches;
- more than one flag under test differs: "not a one-factor comparison" (a note, not an error:
  the gain is real but cannot be attributed to one flag).
Noise (tools/domain/stats.py, docs/statistics.md): from every configuration swept more than once
(`repeats`, as tools.bench.results.repeats builds it), the per-level floors mark a ratio "~ within
noise"; the summary states each configuration's geometric-mean ratio to the baseline with the
noise floor of that geometric mean, and the winner is the best configuration that beats it.
Results of one configuration compared together are that configuration's mean, as everywhere.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tools.bench.confighash import TRAFFIC_DEFAULTS, flag_name, normalize_command, workload_key
from tools.bench.results import by_rate, sweep_of
from tools.bench.results import repeats as repeats_of
from tools.bench.schema import BenchResult
from tools.bench.table import render
from tools.domain import engines, stats
from tools.domain.decision import Decision, at_level, decide

# not tuning flags: the model, and every flag of a GPU count (the engine profiles' [parallelism],
# spelled as normalize_command spells them)
HARD_FLAGS = {
    "--model",
    "--model-path",
    "--quantization",
    "--dtype",
    "--served-model-name",
    *(flag_name(f) for f in engines.parallelism().counted()),
}


@dataclass
class Comparison:
    ids: list[str]
    baseline: str
    levels: list[int]
    values: dict[int, dict[str, float | None]]  # level -> id -> output tok/s (None: not measured)
    ratios: dict[str, dict[int, float]]  # contender -> level -> contender / baseline
    winners: dict[int, str]
    geomean: dict[str, float | None]  # result -> its configuration's geomean ratio
    crossovers: dict[str, list[str]]
    noise: dict[int, float]  # level -> per-level noise floor; missing level: unknown
    within_noise: dict[str, list[int]]
    versus: dict[str, stats.Versus]  # result -> its configuration against the baseline's
    winner: str  # the baseline, or the result whose configuration beats it the most
    config_of: dict[str, str]  # result -> its configuration (config hash and workload)
    names: dict[int, str] = field(default_factory=dict)  # level -> "C=10" | "rate 5/s"
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def name(self, level: int) -> str:
        return self.names.get(level, f"C={level}")

    @property
    def decisions(self) -> dict[str, Decision]:
        """Each result's configuration against the baseline's, decided by the sweeps' means (a
        comparison has no paired evidence: recommend reads that)."""
        return {i: decide(v.ratio, v.floor) for i, v in self.versus.items()}

    def data(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "results": self.ids,
            "levels": self.levels,
            "level_names": {str(k): self.name(k) for k in self.levels},
            "output_throughput": {str(k): v for k, v in self.values.items()},
            "ratios": {i: {str(k): v for k, v in r.items()} for i, r in self.ratios.items()},
            "winners": {str(k): v for k, v in self.winners.items()},
            "geomean_ratio": self.geomean,
            "crossovers": self.crossovers,
            "level_noise_floor": {str(k): v for k, v in self.noise.items()},
            "noise_floor": {i: v.floor for i, v in self.versus.items()},
            "verdict": {i: d.verdict for i, d in self.decisions.items()},
            "winner": self.winner,
            "within_noise": self.within_noise,
            "warnings": self.warnings,
            "notes": self.notes,
        }


def compare(
    results: list[BenchResult],
    baseline: str | None = None,
    repeats: Sequence[Sequence[stats.Sweep]] | None = None,
) -> Comparison:
    """`repeats`: every configuration's sweeps known (tools.bench.results.repeats, of results keyed
    by_rate); default: those among the results compared. Open levels pair by their rate."""
    results = [by_rate(r) for r in results]
    repeats = repeats_of(results) if repeats is None else repeats
    ids = [r.id for r in results]
    base = next((r for r in results if r.id == baseline), results[0]) if baseline else results[0]
    others = [r for r in results if r is not base]
    levels = sorted({p.max_concurrency for r in results for p in r.points})
    values: dict[int, dict[str, float | None]] = {}
    for level in levels:
        row: dict[str, float | None] = {}
        for r in results:
            p = r.point(level)
            row[r.id] = None if p is None or p.level_failed else p.output_throughput
        values[level] = row
    winners = {}
    for level, row in values.items():
        measured = {k: v for k, v in row.items() if v is not None}
        if measured:
            winners[level] = max(measured, key=lambda k: measured[k])
    sweeps = {r.id: sweep_of(r) for r in results}
    ratios = {r.id: stats.level_ratios(sweeps[r.id], sweeps[base.id]) for r in others}
    noise = {c: v for c, v in stats.level_floors(repeats).items() if c in levels}
    within = {
        rid: [c for c, x in rr.items() if at_level(x, noise.get(c)) == "within noise"]
        for rid, rr in ratios.items()
    }
    config_of = {r.id: _config_key(r) for r in results}
    means = {
        key: stats.mean_sweep(sweeps[r.id] for r in results if config_of[r.id] == key)
        for key in set(config_of.values())
    }
    versus = {
        r.id: stats.versus(means[config_of[r.id]], means[config_of[base.id]], repeats)
        for r in others
        if config_of[r.id] != config_of[base.id]
    }
    names = {p.max_concurrency: p.name for r in results for p in r.points}
    crossovers = {r.id: _crossovers(r.id, base.id, ratios[r.id], noise, names) for r in others}
    geomean = {rid: v.ratio for rid, v in versus.items()}
    wins = [rid for rid, v in versus.items() if decide(v.ratio, v.floor).verdict == "win"]
    winner = max(wins, key=lambda rid: versus[rid].ratio or 0.0, default=base.id)
    cmp = Comparison(
        ids, base.id, levels, values, ratios, winners, geomean, crossovers, noise, within, versus,
        winner, config_of, names,
    )  # fmt: skip
    for r in others:
        _check_workload(cmp, base, r)
        _check_commands(cmp, base, r)
    _check_points(cmp, results)
    if not noise:
        cmp.notes.append(
            "noise floor unknown: no configuration was measured twice (repeat the baseline, an "
            "A/A run, to know which differences are real)"
        )
    else:
        for rid, lvls in within.items():
            if lvls:
                cmp.warnings.append(
                    f"{rid} vs {base.id}: difference within the noise floor at "
                    + _listed([cmp.name(c) for c in lvls])
                    + " - not a real win or loss there"
                )
    return cmp


def _config_key(r: BenchResult) -> str:
    return f"{r.config_hash} {sorted(workload_key(r.workload.model_dump()).items())}"


# a crossover's side is established only past this margin: the floor is one launch's (an A/A pair
# within it), blind to the variance between launches, and a policy is a claim (stats.MIN_GAIN)
MARGIN = 2.0  # x the level's one-sweep floor


def _crossovers(
    rid: str, bid: str, ratios: dict[int, float], noise: dict[int, float], names: dict[int, str]
) -> list[str]:
    """Where the ratio crosses 1 between consecutive levels; a crossover whose edge on either
    side does not clear the margin is said to be not established, and why."""
    out = []
    pts = sorted(ratios.items())
    for (l1, r1), (l2, r2) in itertools.pairwise(pts):
        if (r1 - 1) * (r2 - 1) < 0:
            ahead, behind = (rid, bid) if r1 > 1 else (bid, rid)
            n1, n2 = names.get(l1, f"C={l1}"), names.get(l2, f"C={l2}")
            at1, at2 = _at(n1, "<="), _at(n2, ">=")
            line = f"between {n1} and {n2}: {ahead} ahead at {at1}, {behind} at {at2}"
            short = [w for w in (_short(n1, r1, noise.get(l1)), _short(n2, r2, noise.get(l2))) if w]
            if short:
                line += f" ({short[0]}: not established)"
            out.append(line)
    return out


def _short(name: str, ratio: float, floor: float | None) -> str | None:
    """Why one side's edge does not establish a crossover; None when it clears the margin."""
    mark = at_level(ratio, floor)
    if floor is None or mark == "noise unknown":
        return f"noise floor unknown at {name}"
    if mark == "within noise":
        return "within the noise floor"
    edge, need = abs(ratio - 1), max(MARGIN * floor, stats.MIN_GAIN)
    if edge <= need:
        return (
            f"an edge of {100 * edge:.1f} % at {name} against a one-sweep floor of "
            f"{stats.percent(floor)}: a crossover needs {MARGIN:g}x the floor and at least "
            f"{100 * stats.MIN_GAIN:g} %"
        )
    return None


def _at(name: str, op: str) -> str:
    """'C=10' -> 'C<=10', 'rate 5/s' -> 'rate<=5/s'."""
    kind, _, value = name.replace("=", " ").partition(" ")
    return f"{kind}{op}{value}"


def _listed(names: list[str]) -> str:
    """'C=1,10' for closed levels (as ever), 'rate 5/s, rate 20/s' for open ones."""
    if all(n.startswith("C=") for n in names):
        return "C=" + ",".join(n.removeprefix("C=") for n in names)
    return ", ".join(names)


def workload_mismatch(results: list[BenchResult]) -> str | None:
    """The one line that says two of the results ran different workloads, or None."""
    for other in results[1:]:
        line = _workload_diff(results[0], other)
        if line is not None:
            return line
    return None


def _workload_diff(a: BenchResult, b: BenchResult) -> str | None:
    ka, kb = workload_key(a.workload.model_dump()), workload_key(b.workload.model_dump())
    for key in (ka, kb):  # a traffic key is in a key only where it is not at its default
        key.update({k: v for k, v in TRAFFIC_DEFAULTS.items() if k not in key})
    diffs = [f"{k} {ka[k]} vs {kb[k]}" for k in ka if ka[k] != kb[k]]
    if not diffs:
        return None
    return f"workloads differ ({'; '.join(diffs)}): {a.id} and {b.id} are not comparable"


def _check_workload(cmp: Comparison, a: BenchResult, b: BenchResult) -> None:
    line = _workload_diff(a, b)
    if line is not None:
        cmp.warnings.append(line)


def _check_commands(cmp: Comparison, a: BenchResult, b: BenchResult) -> None:
    if not a.server.command or not b.server.command:
        missing = a.id if not a.server.command else b.id
        cmp.notes.append(f"server command of {missing} unknown: fairness not checked")
        return
    na, nb = normalize_command(a.server.command), normalize_command(b.server.command)
    unfair = []
    for part in ("env", "program", "args"):
        if na[part] != nb[part]:
            unfair.append(f"{part} {na[part]} vs {nb[part]}")
    if a.server.engine and b.server.engine and a.server.engine != b.server.engine:
        unfair.append(f"engine {a.server.engine} vs {b.server.engine}")
    under_test = set(_flag_names(a.server.flags)) | set(_flag_names(b.server.flags))
    factors = []
    fa, fb = na["flags"], nb["flags"]
    for flag in sorted(set(fa) | set(fb)):
        va, vb = fa.get(flag), fb.get(flag)
        if va == vb:
            continue
        shown = f"{flag} {_show(va)} vs {_show(vb)}"
        if flag in HARD_FLAGS:
            unfair.append(shown)
        elif under_test and flag not in under_test:
            unfair.append(shown + " (not a flag under test)")
        else:
            factors.append(shown)
    if unfair:
        cmp.warnings.append(
            f"UNFAIR comparison {a.id} vs {b.id}: the launches differ beyond the flags under "
            f"test: {'; '.join(unfair)}"
        )
    if len(factors) > 1:
        cmp.notes.append(
            f"{b.id} vs {a.id}: not a one-factor comparison - {len(factors)} flags differ: "
            + "; ".join(factors)
        )
    if a.server.host and b.server.host and a.server.host != b.server.host:
        cmp.warnings.append(f"{a.id} ran on host {a.server.host}, {b.id} on {b.server.host}")


def _check_points(cmp: Comparison, results: list[BenchResult]) -> None:
    for r in results:
        bad = [p.name for p in r.points if p.level_failed]
        if bad:
            cmp.warnings.append(f"{r.id}: every request failed at {_listed(bad)}")
        partial = [
            f"{p.name} ({p.failed} failed)" for p in r.points if p.failed and not p.level_failed
        ]
        if partial:
            cmp.warnings.append(f"{r.id}: failed requests at {', '.join(partial)}")
        eos = [p.name for p in r.points if p.early_eos]
        if eos:
            cmp.warnings.append(f"{r.id}: early EOS at {_listed(eos)} (fewer tokens than asked)")
        if r.interrupted:
            cmp.warnings.append(f"{r.id} was interrupted: some levels are missing or partial")


def _flag_names(flags: dict[str, Any]) -> list[str]:
    return ["--" + k.lstrip("-").replace("_", "-") for k in flags]


def _show(v: Any) -> str:
    return "(absent)" if v is None else "on" if v is True else str(v)


def _one_per_config(cmp: Comparison, ids: list[str]) -> list[str]:
    """The first of `ids` of each configuration."""
    seen: dict[str, str] = {}
    for i in ids:
        seen.setdefault(cmp.config_of[i], i)
    return list(seen.values())


def render_comparison(cmp: Comparison) -> str:
    others = [i for i in cmp.ids if i != cmp.baseline]
    rate = any(n.startswith("rate") for n in cmp.names.values())
    headers = [
        "rate/s" if rate else "C",
        *cmp.ids,
        *(f"ratio {i.split('-')[0]}" for i in others),
        "winner",
    ]
    rows = []
    for level in cmp.levels:
        name = cmp.name(level)  # the level's rate where it has one, not its request count
        row: list[Any] = [level if name.startswith("C=") else name[len("rate ") : -len("/s")]]
        row += [cmp.values[level].get(i) for i in cmp.ids]
        for i in others:
            x = cmp.ratios[i].get(level)
            mark = "~" if level in cmp.within_noise.get(i, []) else ""
            row.append(f"{x:.3f}{mark}" if x is not None else None)
        row.append(cmp.winners.get(level))
        rows.append(row)
    lines = [
        f"output tok/s per level; ratio = result / {cmp.baseline} (~ within noise); "
        "a+b: the mean of results of one configuration",
        render(headers, rows),
    ]
    for i in others:
        cross = cmp.crossovers[i]
        lines.append(f"crossover {i} vs {cmp.baseline}: " + ("; ".join(cross) if cross else "none"))
    for i in _one_per_config(cmp, list(cmp.versus)):
        v = cmp.versus[i]
        same = [j for j in cmp.ids if cmp.config_of[j] == cmp.config_of[i]]
        base = [j for j in cmp.ids if cmp.config_of[j] == cmp.config_of[cmp.baseline]]
        ratio = "no common level" if v.ratio is None else f"{v.ratio:.3f}"
        lines.append(
            f"geomean ratio {'+'.join(same)} / {'+'.join(base)}: {ratio} (noise floor "
            f"{stats.percent(v.floor)}: {cmp.decisions[i].verdict})"
        )
    if cmp.noise:
        lines.append(
            "noise floor per level: "
            + ", ".join(f"{cmp.name(k)} {stats.percent(v)}" for k, v in sorted(cmp.noise.items()))
        )
    is_base = cmp.winner == cmp.baseline
    lines.append(f"winner: {cmp.winner}" + (" (the baseline: nothing beat it)" if is_base else ""))
    lines += [f"WARNING: {w}" for w in cmp.warnings]
    lines += [f"note: {n}" for n in cmp.notes]
    return "\n".join(lines)
