"""What run_benchmark leaves behind: the result file, the ledger line, the `benchmark` event,
the model's text; and its progress reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from state.ledger import Ledger
from tools.base import ToolContext
from tools.bench import results
from tools.bench.schema import BenchResult
from tools.bench.sweep import Observer
from tools.bench.table import sweep_table


def record(ctx: ToolContext, result: BenchResult, results_dir: Path) -> tuple[str, dict[str, Any]]:
    """Save the result, append the ledger line and the `benchmark` event; the model's text."""
    ledger = Ledger.in_runs_dir(ctx.run.path.parent)
    before = [
        e
        for e in ledger.lookup(result.config_hash)
        if e.get("id") != result.id or e.get("run_id") != ctx.run.id
    ]
    path = results.save(result, results_dir, scrub=ctx.run.scrub)
    failed = [p.max_concurrency for p in result.points if p.level_failed]
    entry = ledger_entry(result, path)
    ledger.append(entry, scrub=ctx.run.scrub)
    ctx.run.append(
        "benchmark",
        id=result.id,
        path=str(path),
        config_hash=result.config_hash,
        server=result.server.name,
        command=result.server.command,
        flags=result.server.flags,
        label=result.label,
        workload=result.workload.model_dump(),
        summary=result.summary(),
        points=compact_points(result),
        url=result.server.url,
        failed_levels=failed,
        interrupted=result.interrupted,
        **_duet_part(result),
    )
    text = sweep_table(result) + f"\nsaved {path} (id {result.id}, config {result.config_hash})"
    earlier = earlier_at_levels(before, result.summary())
    if earlier:
        text += "\nthis configuration was measured before at these levels (tok/s): " + "; ".join(
            earlier[-3:]
        )
    if result.interrupted:
        text += "\ninterrupted: the levels measured so far are saved"
    data = {
        "id": result.id,
        "path": str(path),
        "config_hash": result.config_hash,
        "summary": result.summary(),
        "failed_levels": failed,
        "previous": [str(e.get("id")) for e in before],
    }
    return text, data


def _duet_part(result: BenchResult) -> dict[str, Any]:
    """A duet round's place (tools/duet.py) for the event: {} for every other result."""
    part = (result.__pydantic_extra__ or {}).get("duet")
    return {"duet": part} if part else {}


COMPACT = (
    "output_throughput",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "completed",
    "failed",
    "level_failed",
    "duration",  # what a level costs: the autopilot's wrap-up sizes what fits by it
    # against physics (docs/physics.md): the autopilot's stop signal reads the floor per level,
    # and a report from the events alone shows the share
    "floor_tok_s",
    "floor_share",
    "floor_bound",
)


def compact_points(result: BenchResult) -> dict[str, dict[str, Any]]:
    """The per-level figures a report needs, in the event itself: a recorded session replayed
    elsewhere has the events but not the result files."""
    return {
        str(p.max_concurrency): {
            k: round(v, 3) if isinstance(v, float) else v
            for k in COMPACT
            if (v := getattr(p, k)) is not None
        }
        for p in result.points
    }


def earlier_at_levels(before: list[dict[str, Any]], summary: dict[str, float]) -> list[str]:
    """Earlier results of the configuration that share a level with this one, one line each."""
    lines = []
    for e in before:
        failed = {str(x) for x in e.get("failed_levels") or []}
        shared = [
            f"C={lv} {'FAILED' if lv in failed else f'{v:.1f}'}"
            for lv, v in (e.get("summary") or {}).items()
            if lv in summary
        ]
        if shared:
            lines.append(f"{e.get('id')} (run {e.get('run_id')}): {', '.join(shared)}")
    return lines


def ledger_entry(result: BenchResult, path: Path) -> dict[str, Any]:
    return {
        "config_hash": result.config_hash,
        "id": result.id,
        "run_id": result.run_id,
        "path": str(path.resolve()),
        "label": result.label,
        "server": result.server.model_dump(exclude={"url"}),
        "url": result.server.url,
        "workload": result.workload.model_dump(),
        "summary": result.summary(),
        "failed_levels": [p.max_concurrency for p in result.points if p.level_failed],
        "interrupted": result.interrupted,
    }


class BenchProgress(Observer):
    """Sweep progress as ctx.progress("benchmark", ...) (agent/view/bars.py draws it)."""

    def __init__(self, ctx: ToolContext, result_id: str, name: str, levels: int) -> None:
        self.ctx, self.id, self.name, self.levels = ctx, result_id, name, levels
        self.total, self.finished = 0, 0

    def level_start(self, level: int, requests: int) -> None:
        self.total = requests
        self._emit(level=level, done=0)

    def progress(self, level: int, done: int) -> None:
        self._emit(level=level, done=done)

    def level_end(self, level: int, point: dict[str, Any]) -> None:
        self.finished += 1
        self._emit(level=level, done=self.total, output_throughput=point.get("output_throughput"))

    def _emit(self, **info: Any) -> None:
        if self.ctx.progress is not None:
            self.ctx.progress(
                "benchmark",
                id=self.id,
                name=self.name,
                total=self.total,
                levels_done=self.finished,
                levels_total=self.levels,
                **info,
            )
