"""Comparing benchmark results: winner and ratio per level, crossovers, geometric-mean ratio,
and the warnings that keep a comparison honest.

Fairness (docs/benchmark.md): the two server commands are normalized (confighash) and diffed.
- a different program, positional arguments, model (--model, --model-path), parallelism (--tp,
  ...) or engine: an UNFAIR comparison - the difference is not a tuning flag;
- a differing flag that is not among either result's flags under test (start_server's `flags`):
  UNFAIR as well - something else changed between the launches;
- more than one flag under test differs: "not a one-factor comparison" (a note, not an error:
  the gain is real but cannot be attributed to one flag).
Noise floor: for every configuration measured at least twice (same config hash, in the ledger or
among the results given), the spread (max - min) / mean of its throughputs at a level; the floor
of a level is the largest such spread. A ratio within 1 +- floor is "within noise"; without any
repeat the floor is unknown, and the output says so.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from tools.bench.confighash import normalize_command, workload_key
from tools.bench.schema import BenchResult
from tools.bench.table import render

HARD_FLAGS = {
    "--model",
    "--model-path",
    "--tp",
    "--tp-size",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--pp",
    "--pp-size",
    "--dp",
    "--dp-size",
    "--data-parallel-size",
    "--quantization",
    "--dtype",
    "--served-model-name",
}


@dataclass
class Comparison:
    ids: list[str]
    baseline: str
    levels: list[int]
    values: dict[int, dict[str, float | None]]  # level -> id -> output tok/s (None: not measured)
    ratios: dict[str, dict[int, float]]  # contender -> level -> contender / baseline
    winners: dict[int, str]
    geomean: dict[str, float | None]
    crossovers: dict[str, list[str]]
    noise: dict[int, float]  # level -> relative spread; missing level: unknown
    within_noise: dict[str, list[int]]
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def data(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "results": self.ids,
            "levels": self.levels,
            "output_throughput": {str(k): v for k, v in self.values.items()},
            "ratios": {i: {str(k): v for k, v in r.items()} for i, r in self.ratios.items()},
            "winners": {str(k): v for k, v in self.winners.items()},
            "geomean_ratio": self.geomean,
            "crossovers": self.crossovers,
            "noise_floor": {str(k): v for k, v in self.noise.items()},
            "within_noise": self.within_noise,
            "warnings": self.warnings,
            "notes": self.notes,
        }


def noise_floor(samples: list[dict[str, list[float]]]) -> dict[int, float]:
    """Per level, the largest relative spread among configurations measured at least twice."""
    floor: dict[int, float] = {}
    for per_level in samples:
        for level, values in per_level.items():
            good = [v for v in values if v > 0]
            if len(good) < 2:
                continue
            spread = (max(good) - min(good)) / (sum(good) / len(good))
            floor[int(level)] = max(floor.get(int(level), 0.0), spread)
    return floor


def compare(
    results: list[BenchResult],
    baseline: str | None = None,
    repeats: list[dict[str, list[float]]] | None = None,
) -> Comparison:
    """`repeats`: per config hash, {"<level>": [throughputs]} of every measurement known."""
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
    ratios: dict[str, dict[int, float]] = {}
    geomean: dict[str, float | None] = {}
    crossovers: dict[str, list[str]] = {}
    for r in others:
        rr = {
            lv: row[r.id] / row[base.id]  # type: ignore[operator]
            for lv, row in values.items()
            if row.get(r.id) and row.get(base.id)
        }
        ratios[r.id] = rr
        geomean[r.id] = math.exp(sum(math.log(x) for x in rr.values()) / len(rr)) if rr else None
    noise = noise_floor(list(repeats or []) + _repeats_among(results))
    noise = {lv: v for lv, v in noise.items() if lv in levels}
    within = {
        rid: [lv for lv, x in rr.items() if lv in noise and abs(x - 1) <= noise[lv]]
        for rid, rr in ratios.items()
    }
    for r in others:
        crossovers[r.id] = _crossovers(r.id, base.id, ratios[r.id], within[r.id])
    cmp = Comparison(
        ids, base.id, levels, values, ratios, winners, geomean, crossovers, noise, within
    )
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
                    f"{rid} vs {base.id}: difference within the noise floor at C="
                    + ",".join(map(str, lvls))
                    + " - not a real win or loss there"
                )
    return cmp


def _crossovers(rid: str, bid: str, ratios: dict[int, float], noisy: list[int]) -> list[str]:
    """Where the ratio crosses 1 between consecutive levels; one inside the noise on either side
    is said to be not established."""
    out = []
    pts = sorted(ratios.items())
    for (l1, r1), (l2, r2) in itertools.pairwise(pts):
        if (r1 - 1) * (r2 - 1) < 0:
            ahead, behind = (rid, bid) if r1 > 1 else (bid, rid)
            line = f"between C={l1} and C={l2}: {ahead} ahead at C<={l1}, {behind} at C>={l2}"
            if l1 in noisy or l2 in noisy:
                line += " (within the noise floor: not established)"
            out.append(line)
    return out


def _repeats_among(results: list[BenchResult]) -> list[dict[str, list[float]]]:
    by_hash: dict[str, dict[str, list[float]]] = {}
    for r in results:
        per = by_hash.setdefault(r.config_hash, {})
        for p in r.points:
            if not p.level_failed:
                per.setdefault(str(p.max_concurrency), []).append(p.output_throughput)
    return list(by_hash.values())


def _check_workload(cmp: Comparison, a: BenchResult, b: BenchResult) -> None:
    ka, kb = workload_key(a.workload.model_dump()), workload_key(b.workload.model_dump())
    diffs = [f"{k} {ka[k]} vs {kb[k]}" for k in ka if ka[k] != kb[k]]
    if diffs:
        cmp.warnings.append(
            f"workloads differ ({'; '.join(diffs)}): {a.id} and {b.id} are not comparable"
        )


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
        bad = [p.max_concurrency for p in r.points if p.level_failed]
        if bad:
            cmp.warnings.append(f"{r.id}: every request failed at C={','.join(map(str, bad))}")
        partial = [
            f"C={p.max_concurrency} ({p.failed} failed)"
            for p in r.points
            if p.failed and not p.level_failed
        ]
        if partial:
            cmp.warnings.append(f"{r.id}: failed requests at {', '.join(partial)}")
        eos = [p.max_concurrency for p in r.points if p.early_eos]
        if eos:
            cmp.warnings.append(
                f"{r.id}: early EOS at C={','.join(map(str, eos))} (fewer tokens than asked)"
            )
        if r.interrupted:
            cmp.warnings.append(f"{r.id} was interrupted: some levels are missing or partial")


def _flag_names(flags: dict[str, Any]) -> list[str]:
    return ["--" + k.lstrip("-").replace("_", "-") for k in flags]


def _show(v: Any) -> str:
    return "(absent)" if v is None else "on" if v is True else str(v)


def render_comparison(cmp: Comparison) -> str:
    others = [i for i in cmp.ids if i != cmp.baseline]
    headers = ["C", *cmp.ids, *(f"ratio {i.split('-')[0]}" for i in others), "winner"]
    rows = []
    for level in cmp.levels:
        row: list[Any] = [level]
        row += [cmp.values[level].get(i) for i in cmp.ids]
        for i in others:
            x = cmp.ratios[i].get(level)
            mark = "~" if level in cmp.within_noise.get(i, []) else ""
            row.append(f"{x:.3f}{mark}" if x is not None else None)
        row.append(cmp.winners.get(level))
        rows.append(row)
    lines = [
        f"output tok/s per level; ratio = result / {cmp.baseline} (~ within noise)",
        render(headers, rows),
    ]
    for i in others:
        g = cmp.geomean[i]
        lines.append(
            f"geomean ratio {i} / {cmp.baseline}: {g:.3f}"
            if g
            else f"geomean ratio {i} / {cmp.baseline}: no common level"
        )
        cross = cmp.crossovers[i]
        lines.append(f"crossover {i} vs {cmp.baseline}: " + ("; ".join(cross) if cross else "none"))
    if cmp.noise:
        lines.append(
            "noise floor: "
            + ", ".join(f"C={k} {100 * v:.1f}%" for k, v in sorted(cmp.noise.items()))
        )
    lines += [f"WARNING: {w}" for w in cmp.warnings]
    lines += [f"note: {n}" for n in cmp.notes]
    return "\n".join(lines)
