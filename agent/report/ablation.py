"""The report's ablation: which flag of the winner did what, from the configurations measured."""

from __future__ import annotations

from typing import Any

from agent.report.figures import Figures
from agent.report.measured import Configuration, norm_flags
from agent.report.render import Block, Heading, Para, Table
from tools.domain import stats

OMITTED = "(omitted)"


def _ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.3f}x"


def _text(value: Any) -> str:
    return "on" if value is True else str(value)


def _with(flags: dict[str, Any], flag: str, value: Any) -> dict[str, Any]:
    out = dict(flags)
    if value == OMITTED:
        out.pop(flag, None)
    else:
        out[flag] = value
    return out


def ablation(f: Figures) -> list[Block]:
    base, win = f.baseline, f.winner
    if base is None or win is None or not base.flags:
        return []
    b, w = norm_flags(base.flags), norm_flags(win.flags)
    changed: set[str] = set()
    for c in f.m.configs:
        nf = norm_flags(c.flags)
        changed |= {k for k in nf.keys() | b.keys() if nf.get(k) != b.get(k)}
    if not changed:
        return []
    rows = []
    for flag in sorted(changed, key=lambda k: (w.get(k) == b.get(k), k)):
        bv, wv = b.get(flag, OMITTED), w.get(flag, OMITTED)
        alone = without = None
        if wv != bv:
            one = f.m.config_for(_with(b, flag, wv))
            alone = f.ratio(one) if one else None
            rest = f.m.config_for(_with(w, flag, bv))
            without = stats.geomean_ratio(win.sweep, rest.sweep) if rest else None
        tried = _tried(f, flag, b, w)
        rows.append([f"`{flag}`", _text(bv), _text(wv), _ratio(alone), _ratio(without), tried])
    headers = ["flag", "baseline", "winner", "alone on the baseline", "winner vs winner without it"]
    headers.append("other values (not the baseline's or the winner's): the best with each")
    return [
        Heading(2, "Ablation"),
        Para(
            "Geometric-mean throughput ratios over the levels both sides measured; "
            "`-` where that configuration was not measured."
        ),
        Table(headers, rows, right={3, 4}),
    ]


def _tried(f: Figures, flag: str, b: dict[str, Any], w: dict[str, Any]) -> str:
    """For each value of `flag` other than the baseline's and the winner's (those have their own
    columns), the best measured configuration with it (its ratio to the baseline); "alone" when
    that configuration changes nothing else."""
    best: dict[str, tuple[float, Configuration]] = {}
    own = {_text(b.get(flag, OMITTED)), _text(w.get(flag, OMITTED))}
    for c in f.m.configs:
        nf = norm_flags(c.flags) if c.flags else b
        value = _text(nf.get(flag, OMITTED))
        ratio = f.ratio(c)
        if value in own or ratio is None:
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
