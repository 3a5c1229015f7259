"""compare: two or more benchmark results side by side - winner and ratio per level, crossovers,
geometric-mean ratio, and warnings (different workloads, unfair launches, within the noise)."""

from __future__ import annotations

from pydantic import Field

from state.ledger import Ledger
from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult
from tools.bench import results
from tools.bench.comparison import compare, render_comparison
from tools.bench.schema import BenchResult


class CompareInput(ToolInput):
    results: list[str] = Field(
        min_length=2,
        description="Result ids from run_benchmark (e.g. 'b001', 'b003-eagle3') or JSON file paths",
    )
    baseline: str | None = Field(
        default=None, description="The id (or path) the others are divided by; default: the first"
    )


class Compare(Tool):
    name = "compare"
    Input = CompareInput

    async def run(self, ctx: ToolContext, inp: CompareInput) -> ToolResult:
        results_dir = ctx.run.path / "results"
        try:
            loaded = [results.load(ref, results_dir) for ref in inp.results]
        except results.ResultError as err:
            raise ToolError(str(err)) from None
        ids = [r.id for r in loaded]
        if len(set(ids)) < len(ids):
            raise ToolError(f"the same result is given twice: {ids}")
        baseline = None
        if inp.baseline is not None:
            try:
                baseline = results.load(inp.baseline, results_dir).id
            except results.ResultError as err:
                raise ToolError(str(err)) from None
            if baseline not in ids:
                raise ToolError(
                    f"baseline {inp.baseline!r} is not one of the results compared: {ids}"
                )
        cmp = compare(loaded, baseline, repeats=ledger_repeats(ctx, loaded))
        return ToolResult(text=render_comparison(cmp), data=cmp.data())


def ledger_repeats(ctx: ToolContext, loaded: list[BenchResult]) -> list[dict[str, list[float]]]:
    """Every measurement the ledger knows of the compared configurations, each result once."""
    ledger = Ledger.in_runs_dir(ctx.run.path.parent)
    given = {(r.run_id, r.id) for r in loaded}
    out = []
    for config in {r.config_hash for r in loaded}:
        per_level: dict[str, list[float]] = {}
        for entry in ledger.lookup(config):
            if (entry.get("run_id"), entry.get("id")) in given:
                continue  # the result itself is counted among the results compared
            failed = {str(x) for x in entry.get("failed_levels", [])}
            for level, value in (entry.get("summary") or {}).items():
                if level not in failed:
                    per_level.setdefault(level, []).append(float(value))
        for r in loaded:
            if r.config_hash == config:
                for p in r.points:
                    if not p.level_failed:
                        per_level.setdefault(str(p.max_concurrency), []).append(p.output_throughput)
        out.append(per_level)
    return out
