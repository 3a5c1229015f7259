"""duet: is server B faster than server A? Both up at once, measured in blocks alternated at each
level in a random order, round after round, until the rounds' anytime-valid interval decides
(tools/bench/duet.py; docs/statistics.md "Duets").

Each round's blocks are saved as one result per server (results/<id>.json, a `benchmark` event
each, a ledger line), labelled `duet-<id>-rNN` and carrying `duet` {id, round, side, rounds,
a, b}: the one record every reader takes the rounds from - recommend pairs them round by round
as the evidence of its verdict (the `paired` of recommendation.json, unit "duet round").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import Field

from state.fold import RunState, sweep_seconds
from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult
from tools.bench import results
from tools.bench.duet import AFTER_S, DuetOutcome, Side, decision_text, round_lines, run_duet
from tools.bench.random_prompts import sweep_seed
from tools.bench.schema import ClientInfo, ServerRef, Workload
from tools.bench.sweep import BenchError, SweepSpec
from tools.benchmark_outcome import record
from tools.domain import stats
from tools.domain.objective import SLO_KINDS, by_level, objective_value
from tools.run_benchmark import (
    MAX_LEVEL,
    RunBenchmarkInput,
    deadlines_for,
    engine_of,
    locate_server,
    min_level_s,
    reach_server,
    workload_of,
)

MAX_ROUNDS = 30  # past this a duet has not decided because the gain is under the noise


class DuetInput(ToolInput):
    a: str = Field(description="The reference server (the baseline), started with start_server")
    b: str = Field(description="The challenger server, started with start_server, up at once")
    concurrency: list[int] | None = Field(
        default=None, min_length=1, description="Levels; default: the config's sweep"
    )
    max_rounds: int = Field(
        default=stats.MAX_PAIRS,
        ge=2,
        le=MAX_ROUNDS,
        description="The most rounds (the interval is valid over that many looks); it stops "
        "as soon as it decides",
    )
    requests_per_level: int | None = Field(
        default=None, ge=1, description="Requests per block; default the config's"
    )
    label: str | None = Field(default=None, max_length=40, description="A short name")


class Duet(Tool):
    name = "duet"
    Input = DuetInput

    async def run(self, ctx: ToolContext, inp: DuetInput) -> ToolResult:
        if inp.a == inp.b:
            raise ToolError("a duet compares two servers: `a` and `b` name the same one")
        objective = ctx.config.objective
        if objective.kind in SLO_KINDS:
            raise ToolError(
                f"a duet compares throughput; the objective {objective.kind!r} reads whether "
                "each level met the SLO, which full sweeps (run_benchmark) measure"
            )
        levels = inp.concurrency or list(ctx.config.bench.concurrency)
        bad = [c for c in levels if c < 1 or c > MAX_LEVEL]
        if bad:
            raise ToolError(f"concurrency levels must be 1..{MAX_LEVEL}, got {bad}")
        bench_inp = RunBenchmarkInput(requests_per_level=inp.requests_per_level)
        workload = workload_of(ctx, bench_inp, None)
        if workload.multi_turn or workload.duration_s:
            raise ToolError("a duet alternates closed-loop blocks: no multi_turn or duration_s")
        refs = {"a": locate_server(ctx, inp.a), "b": locate_server(ctx, inp.b)}
        done = {str(e["duet"]["id"]) for e in ctx.run.state.results if e.get("duet")}
        duet_id = f"d{len(done) + 1:02d}" + (f"-{results.slug(inp.label)}" if inp.label else "")
        seed = sweep_seed(ctx.config.bench.seed, ctx.run.id, ctx.run.state.last_seq, duet_id)
        specs = {
            side: await self._spec(ctx, ref, host, workload, levels, seed)
            for side, (ref, host) in refs.items()
        }

        def value(per_level: Mapping[int, float]) -> float:
            return objective_value(per_level, objective.kind, objective.level)

        pooled = by_level(objective.kind)  # then the blocks are the rounds' evidence

        ids: list[str] = []

        def save(outcome: DuetOutcome) -> None:  # each round as it ends: a crash loses none
            ids.extend(self._save(ctx, outcome, duet_id, refs, workload, levels))

        left = seconds_left(ctx)
        rounds = declared_rounds(ctx.run.state, levels, left(), inp.max_rounds)
        try:
            outcome = await run_duet(
                specs["a"],
                specs["b"],
                rounds,
                seed,
                None if pooled else value,
                seconds_left=left,
                on_round=save,
            )
        except BenchError as err:
            raise ToolError(str(err)) from None
        lines = [*round_lines(outcome), decision_text(outcome)]
        if rounds < inp.max_rounds:
            lines.append(
                f"declared {rounds} rounds, not {inp.max_rounds}: the minutes left held no more"
            )
        saved = f"saved {len(ids)} results, {ids[0]} to {ids[-1]}" if ids else "nothing saved"
        lines.append(saved)
        if outcome.stopped == "interrupted":
            raise asyncio.CancelledError  # saved; now let the interruption go on
        p = outcome.paired
        found = p.interval()
        data = {
            "duet": duet_id,
            "results": ids,
            "stopped": outcome.stopped,
            "ratio": p.ratio,
            "interval": list(found) if found else None,
            "verdict": outcome.verdict,
        }
        return ToolResult(text="\n".join(lines), is_error=outcome.stopped == "failed", data=data)

    async def _spec(
        self,
        ctx: ToolContext,
        server: ServerRef,
        host: str,
        workload: Workload,
        levels: list[int],
        seed: int,
    ) -> SweepSpec:
        server.url = await reach_server(ctx, server, host)
        engine = engine_of(ctx, server)
        mine = workload.model_copy()
        mine.cache_reset = engine.cache_reset_path if engine else None
        mine.min_level_s = min_level_s(ctx.config.bench.min_level_s, engine)
        return SweepSpec(
            url=server.url,
            levels=levels,
            workload=mine,
            prompt_seed=seed,  # the same prompts to both in a round
            extra_body=engine.extra_body if engine else None,
            tokenize_path=engine.tokenize_path if engine else "/tokenize",
            metrics_path=engine.metrics_path if engine else "/metrics",
            metrics=engine.profile.metrics if engine else None,
            deadlines=deadlines_for(ctx, server, mine, levels, None),  # learned where served
            no_power="a duet reads no power",
        )

    def _save(
        self,
        ctx: ToolContext,
        outcome: DuetOutcome,
        duet_id: str,
        refs: dict[str, tuple[ServerRef, str]],
        workload: Workload,
        levels: list[int],
    ) -> list[str]:
        """The latest round's blocks of each server as one result each, through run_benchmark's
        record; their ids."""
        results_dir = ctx.run.path / "results"
        names = {"a": refs["a"][0].name, "b": refs["b"][0].name}
        ids: list[str] = []
        sides: tuple[Side, Side] = ("a", "b")
        k, done = len(outcome.rounds), outcome.rounds[-1]
        for side in sides:
            sweep = outcome.a if side == "a" else outcome.b
            mine = workload.model_copy(
                update={"model": sweep.model, "dataset_digest": sweep.dataset_digest}
            )
            label = f"duet-{duet_id}-r{k:02d}"
            result = results.build_result(
                result_id=results.new_id(results_dir, f"{label}-{side}"),
                server=refs[side][0],
                workload=mine,
                client=ClientInfo(where="controller", processes=sweep.processes),
                levels=levels,
                points=done.rows[side],
                label=label,
                run_id=ctx.run.id,
            )
            result.prompts = sweep.prompts
            part: dict[str, Any] = {"id": duet_id, "round": k, "side": side}
            part |= {"rounds": outcome.max_rounds, **names}
            assert result.__pydantic_extra__ is not None
            result.__pydantic_extra__["duet"] = part
            record(ctx, result, results_dir)
            ids.append(result.id)
        return ids


def declared_rounds(state: RunState, levels: list[int], seconds: float | None, most: int) -> int:
    """The rounds a duet declares, the looks its interval is valid over: `most`, or fewer where
    the `seconds` of budget left hold fewer at the run's pace - a round is both servers' blocks
    at each level, a sweep of them each on the wall clock (state.fold.sweep_seconds). Fixed
    before the first block from no duet figure, so the interval stays valid; and fewer looks
    give a tighter one (at 7 rounds, t spent over 6 looks is 3.86 against 4.40 over the 11 of
    12 rounds, a seventh narrower in log). One round more than the pace holds: a look left
    unused widens the interval by about 3.5 %, a round the budget had room for and the
    declaration did not, about 10 % (7 rounds against 8). At least 2; `most` where the run has
    no budget or no pace."""
    sweep = sweep_seconds(state, levels)
    if seconds is None or sweep is None:
        return most
    return max(2, min(most, int((seconds - AFTER_S) // (2 * sweep)) + 1))


def seconds_left(ctx: ToolContext) -> Callable[[], float | None]:
    """The run's minutes budget left, in seconds (None: no such budget)."""

    def left() -> float | None:
        minutes = ctx.minutes_left()
        return None if minutes is None else minutes * 60

    return left
