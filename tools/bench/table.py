"""Compact fixed-width tables: what the model reads in a tool result and a person in a terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tools.bench.schema import BenchResult, Point


def render(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != v:
            return "nan"
        return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
    return str(v)


SWEEP_HEADERS = (
    "C",
    "ok/fail",
    "out tok/s",
    "req/s",
    "TTFT p50",
    "TTFT p99",
    "TPOT p50",
    "TPOT p99",
    "ITL p99",
    "achieved C",
    "client CPU%",
    "notes",
)


def point_row(p: dict[str, Any]) -> list[Any]:
    notes = []
    if p.get("level_failed"):
        notes.append("FAILED")
    if p.get("interrupted"):
        notes.append("interrupted")
    if p.get("early_eos"):
        notes.append(f"early EOS x{p['early_eos']}")
    for kind, count in (p.get("errors") or {}).items():
        notes.append(f"{kind} x{count}")
    return [
        p["max_concurrency"],
        f"{p.get('completed', 0)}/{p.get('failed', 0)}",
        p.get("output_throughput"),
        p.get("request_throughput"),
        p.get("median_ttft_ms"),
        p.get("p99_ttft_ms"),
        p.get("median_tpot_ms"),
        p.get("p99_tpot_ms"),
        p.get("p99_itl_ms"),
        p.get("achieved_concurrency"),
        p.get("client_cpu_percent"),
        ", ".join(notes),
    ]


def speculation(point: Point) -> dict[str, Any] | None:
    """The level's speculation as its server's /metrics showed it (server_metrics.speculation_of,
    stored in the point's `server_metrics`), or None."""
    series = (point.model_extra or {}).get("server_metrics")
    spec = series.get("speculation") if isinstance(series, dict) else None
    return spec if isinstance(spec, dict) else None


def sweep_table(result: BenchResult) -> str:
    wl = result.workload
    headers, rows = list(SWEEP_HEADERS), [point_row(p.model_dump()) for p in result.points]
    if wl.traffic == "rate":  # the level is the rate asked for; beside it the rate achieved
        headers[0:1] = ["rate/s", "sent/s"]
        for row, p in zip(rows, result.points, strict=True):
            extra = p.model_extra or {}
            row[0:1] = [extra.get("request_rate"), extra.get("achieved_request_rate")]
    if any(p.j_per_token is not None for p in result.points):  # a power reading: energy too
        headers[3:3] = ["J/token"]
        for row, p in zip(rows, result.points, strict=True):
            row[3:3] = [p.j_per_token]
    if any(p.floor_tok_s is not None for p in result.points):  # against physics: the floor
        at = headers.index("out tok/s") + 1
        headers[at:at] = ["floor tok/s", "of floor"]
        for row, p in zip(rows, result.points, strict=True):
            share = None if p.floor_share is None else f"{p.floor_share:.0%}"
            row[at:at] = [p.floor_tok_s, share]
        if any(p.floor_bound not in (None, "memory") for p in result.points):
            headers[at + 2 : at + 2] = ["bound"]  # where compute or the all-reduce binds
            for row, p in zip(rows, result.points, strict=True):
                row[at + 2 : at + 2] = [p.floor_bound]
    specs = [speculation(p) for p in result.points]
    if any(specs):  # speculation against the floor (docs/physics.md)
        at = headers.index("notes")
        columns = ["accept len", "spec tokens"]
        floored = any(p.floor_share is not None for p in result.points)
        columns += ["of floor a step"] if floored else []
        headers[at:at] = columns
        for row, p, sp in zip(rows, result.points, specs, strict=True):
            length = sp.get("accept_length") if sp else None
            share = sp.get("token_share") if sp else None
            cells = [length, None if share is None else f"{share:.0%}"]
            if floored:
                per_step = p.floor_share / length if p.floor_share and length else None
                cells.append(None if per_step is None else f"{per_step:.0%}")
            row[at:at] = cells
    if wl.slo_ms:
        headers[-1:-1] = ["goodput", "SLO met"]
        for row, p in zip(rows, result.points, strict=True):
            extra = p.model_extra or {}
            met = extra.get("slo_attainment")
            row[-1:-1] = [extra.get("request_goodput"), None if met is None else f"{met:.0%}"]
    lengths = "data" if wl.lengths == "data" else wl.max_tokens
    inputs = f"input {wl.input_len}" if wl.dataset == "random" else f"dataset {wl.dataset}"
    head = f"{result.id}  {wl.endpoint} {inputs} max_tokens {lengths} model {wl.model}"
    if wl.traffic == "rate":
        head += f"  burstiness {wl.burstiness}"
    if wl.duration_s is not None:
        head += f"  {wl.duration_s:g} s per level"
    elif wl.min_level_s and wl.traffic == "concurrency":
        head += f"  at least {wl.min_level_s:g} s per level"
    if wl.slo_ms:
        head += "  SLO " + ",".join(f"{k}_ms={v:g}" for k, v in wl.slo_ms.items())
    text = head + "  (latencies in ms)\n" + render(headers, rows)
    if result.notes:
        text += "\n" + "\n".join(f"note: {n}" for n in result.notes)
    if result.interrupted:
        done = len([p for p in result.points if not p.interrupted])
        text += f"\ninterrupted after {done} of {len(result.levels)} levels"
    return text
