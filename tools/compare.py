"""compare: two or more benchmark results side by side - winner and ratio per level, crossovers,
geometric-mean ratio, and warnings (unfair launches, within the noise). Results of different
workloads (tools/bench/confighash.workload_key) are refused with one line.

The noise floor comes from every configuration this run swept more than once (and the results
compared), as recommend and the report take it, so the three state the same number. Earlier runs
in the ledger do not count: another day or host is another noise."""

from __future__ import annotations

from pydantic import Field

from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult
from tools.bench import results
from tools.bench.comparison import compare, render_comparison, workload_mismatch
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
        mismatch = workload_mismatch(loaded)
        if mismatch is not None:  # a ratio between two workloads measures the workloads
            raise ToolError(f"{mismatch}: compare results of one workload")
        cmp = compare(loaded, baseline, repeats=run_repeats(ctx, loaded))
        return ToolResult(text=render_comparison(cmp), data=cmp.data())


def run_repeats(ctx: ToolContext, loaded: list[BenchResult]) -> list[list[dict[int, float]]]:
    """The sweeps of every configuration of this run, and of the results compared."""
    measured = [results.of_event(e, ctx.run.path) for e in ctx.run.state.results]
    known = {(r.id, r.config_hash) for r in measured}
    measured += [r for r in loaded if (r.id, r.config_hash) not in known]
    return results.repeats([results.by_rate(r) for r in measured])  # keyed as compare pairs
