"""recommend: the campaign's conclusion, computed from the run's own measurements.

The caller (Claude or the autopilot) states the configuration and, where configurations cross,
the concurrency policy; the tool looks up every benchmark of those configurations in the run,
computes the objective for them and for the baseline on the same workload and levels (per level
the mean of a configuration's sweeps), and writes recommendation.json in the run folder - one
typed record, tools/bench/schema.Recommendation, that the report and the views parse once:

    {"objective", "config", "command", "verdict", "value", "baseline_value", "gain",
     "geomean_ratio", "noise_floor", "candidate": {"config", "command", "policy", "crossover"},
     "policy": [{"from_concurrency", "to_concurrency", "config", "command"}],
     "crossover": [levels], ...}

With a [cost] price in agent.toml, also "usd_per_hour" and "usd_per_mtok" ({level: $ per million
output tokens}, tools/domain/cost.py) of the configuration deployed over its levels, and in each
policy range of the levels of its range; without one, neither key. Where the results carry
the bandwidth floor (tools/bench/floor.py), "floor_share" and "baseline_floor_share" ({level: the
share of the floor}) of the deployed configuration and of the baseline, "headroom" ({level:
{"bound", "best_share", "flags", "kernels"}}: what each lever family could still add over the best
share any configuration of the workload measured, tools/domain/physics.py headroom_of) and
"flags_done" (what flags could still add is under the noise floor). And "drift" when the
baseline's own sweeps moved more than the noise floor (results.drift: how much, between which
sweeps, and that only paired comparisons should count). And "paired" when the configuration was
measured against the baseline in launch pairs (results.pairs: `pair-` labels, baseline then
candidate): the pairs' ratio, its 95 % interval, the per-pair ratios and their verdict
(stats.Paired). The verdict is tools/domain/decision.decide's, the one every reader calls: a win
by the sweeps' means that the pairs do not establish is "not established" (the baseline is
deployed) with what it would take, and so is a win by the means with no pair at all when the
baseline drifted enough to make it by itself.

A policy is deployed as one server per range, each launched with its range's `command` (the
configured port, then the next ones, so that they can share a host), behind a
router that sends each request to the server whose range holds the requests in flight
(ROUTING_RULE; docs/report.md "Deploying a concurrency policy").

A configuration is deployed only when its objective ratio to the baseline beats the noise floor
(tools/domain/stats.py); otherwise `config` and `command` keep the baseline, `verdict` says why
("within noise", "noise floor unknown", "below the baseline") and `candidate` holds what was
asked. value, gain and geomean_ratio are always the asked configuration's.
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Literal

from pydantic import Field

from state.atomic import write_json_atomic
from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult
from tools.bench import results as result_files
from tools.bench.schema import (
    BenchResult,
    Deployment,
    PairedRecord,
    PolicyServerRecord,
    Recommendation,
    RecommendedObjective,
    RecommendedVerdict,
)
from tools.domain import cost, stats
from tools.domain.config import Config
from tools.domain.cost import CostConfig
from tools.domain.decision import decide, decide_paired
from tools.domain.engines import Parallelism
from tools.domain.objective import by_level, describe_objective, objective_value
from tools.domain.physics import headroom_of
from tools.domain.space import SearchError, SearchSpace, render_flags
from tools.servers.profiles import ProfileError, engine_for

Value = bool | int | float | str
FILE = "recommendation.json"
SAME_WORKLOAD = ("endpoint", "input_len", "max_tokens", "ignore_eos", "temperature", "dataset")


class PolicyRange(ToolInput):
    from_concurrency: int = Field(ge=1, description="First concurrency level of this range")
    to_concurrency: int | None = Field(
        default=None, ge=1, description="Last level of this range; null for 'and above'"
    )
    config: dict[str, Value] = Field(description="The configuration for this range (its flags)")


class ObjectiveChoice(ToolInput):
    kind: Literal["geomean", "level", "peak", "slo", "max_load"] = Field(
        description="geomean | level | peak | slo | max_load (the SLO limits come from the config)"
    )
    level: int | None = Field(default=None, ge=1, description="The level, for kind 'level'")


class RecommendInput(ToolInput):
    config: dict[str, Value] = Field(
        description="The configuration to deploy, flags as on the command line, e.g. "
        '{"--attention-backend": "fa3", "--cuda-graph-max-bs": 256} (switches true/false)'
    )
    policy: list[PolicyRange] = Field(
        default=[],
        description="When configurations cross: the ranges in ascending order, e.g. A from 1 "
        "to 2, B from 5 (to null). Omit for one configuration everywhere",
    )
    reason: str = Field(default="", max_length=600, description="One or two sentences: why")
    objective: ObjectiveChoice | None = Field(
        default=None,
        description="Only when the supervisor changed the goal (e.g. focus on C=10); default: "
        "the configured objective",
    )


class Recommend(Tool):
    name = "recommend"
    Input = RecommendInput

    async def run(self, ctx: ToolContext, inp: RecommendInput) -> ToolResult:
        config = ctx.config
        space = _space(config)
        results = [result_files.of_event(e, ctx.run.path) for e in ctx.run.state.results]
        if not results:
            raise ToolError(
                "no benchmark in this run yet: measure the baseline and the "
                "candidates with run_benchmark before you recommend"
            )
        want = _norm(inp.config, space)
        mine = _matching(results, want, space)
        if not mine:
            raise ToolError(
                f"no benchmark of {_show(want)} in this run; measured: {_measured(results, space)}"
            )
        workload = _workload(mine[-1])
        mine = [r for r in mine if _workload(r) == workload]
        base = _baseline_results(results, space, workload)
        if not base:
            raise ToolError(
                "no benchmark of the baseline on the same workload in this run: "
                "sweep the baseline first"
            )
        ours, theirs = _per_level(mine), _per_level(base)
        common = sorted(set(ours) & set(theirs))
        if not common:
            raise ToolError("the configuration and the baseline share no concurrency level")
        objective = config.objective
        if inp.objective is not None:
            objective = objective.model_copy(update=inp.objective.model_dump())
        value = _value(mine, ours, common, objective)
        base_value = _value(base, theirs, common, objective)
        vs = stats.versus(
            ours, theirs, result_files.repeats(results), objective.kind, objective.level
        )
        is_base = {r.id for r in mine} == {r.id for r in base}
        paired = None if is_base else paired_evidence(base, mine, common, objective)
        # the baseline's own sweeps as a drift series: said only when they moved beyond the floor
        seen = result_files.drift(base, objective.kind, objective.level)
        ratio = value / base_value if base_value > 0 else None
        decision = decide(ratio, vs.floor, paired, seen.drift if seen else None, is_base)
        verdict: RecommendedVerdict = decision.verdict
        drifted = seen if seen is not None and seen.drift.beyond(vs.floor) else None
        ranges, crossover, notes = _policy(inp.policy, results, space, workload)
        gpus_by = _parallelism(config)  # how a command's GPUs count, for its $ per hour
        policy = []  # one server per range, each its command and port; with a price, its cost
        for i, r in enumerate(ranges):
            command = _command(config, r["config"], config.server.port + i)
            cost_of = (
                {}
                if config.cost is None
                else _range_serving(config.cost, r, results, space, workload, gpus_by)
            )
            policy.append(PolicyServerRecord(**r, command=command, **cost_of))
        full = space.complete(want) if space else want
        asked = Deployment(
            config=full, command=_command(config, full), policy=policy, crossover=crossover
        )
        deploy = asked if verdict in ("win", "baseline") else _keep_baseline(config, space, base)
        more: dict[str, Any] = {}  # the keys written only when there is something to say
        if config.cost is not None:  # what the deployed configuration costs to serve, per level
            served = (mine, ours) if verdict in ("win", "baseline") else (base, theirs)
            more |= _serving(config.cost, served[0], served[1], common, gpus_by)
        served_results = mine if verdict in ("win", "baseline") else base
        more |= _floor_shares(served_results, base, common)
        more |= _headroom([r for r in results if _workload(r) == workload], vs.floor)
        if paired is not None:
            more["paired"] = paired_record(paired)
        if drifted is not None:
            more["drift"] = drifted.record(vs.floor)
        rec = Recommendation(
            objective=RecommendedObjective.model_validate(objective.model_dump()),
            config=deploy.config,
            command=deploy.command,
            policy=deploy.policy,
            crossover=deploy.crossover,
            verdict=verdict,
            candidate=asked,
            value=round(value, 3),
            baseline_value=round(base_value, 3),
            gain=round(value / base_value - 1, 5) if base_value > 0 else None,
            geomean_ratio=None if vs.ratio is None else round(vs.ratio, 5),
            noise_floor=None if vs.floor is None else round(vs.floor, 5),
            levels=common,
            per_level={str(c): round(ours[c], 2) for c in common},
            baseline_per_level={str(c): round(theirs[c], 2) for c in common},
            results=[r.id for r in mine],
            baseline_results=[r.id for r in base],
            reason=inp.reason,
            notes=notes,
            **more,
        )
        write_json_atomic(ctx.run.path / FILE, rec.dump())
        return ToolResult(text=_text(rec, objective), data={"recommendation": rec.dump()})


def _keep_baseline(
    config: Config, space: SearchSpace | None, base: list[BenchResult]
) -> Deployment:
    flags = _norm(base[-1].server.flags, space)
    full = space.complete(flags) if space else flags
    return Deployment(config=full, command=_command(config, full), policy=[], crossover=[])


# --- what was measured ----------------------------------------------------------------------------
def _space(config: Config) -> SearchSpace | None:
    try:
        return SearchSpace.parse(config.search) if config.search else None
    except SearchError:
        return None


def _norm(flags: dict[str, Any], space: SearchSpace | None) -> dict[str, Any]:
    """A flag dict's identity: omitted flags and false are the same."""
    full = space.complete(flags) if space else dict(flags)
    return {k: v for k, v in sorted(full.items()) if v is not False and v is not None}


def _key(flags: dict[str, Any], space: SearchSpace | None) -> str:
    return json.dumps(_norm(flags, space), sort_keys=True)


def _matching(
    results: list[BenchResult], want: dict[str, Any], space: SearchSpace | None
) -> list[BenchResult]:
    key = json.dumps(want, sort_keys=True)
    return [r for r in results if _key(r.server.flags, space) == key]


def _workload(result: BenchResult) -> tuple[Any, ...]:
    w = result.workload.model_dump()
    return tuple(w.get(k) for k in SAME_WORKLOAD)


def _baseline_results(
    results: list[BenchResult], space: SearchSpace | None, workload: tuple[Any, ...]
) -> list[BenchResult]:
    """The baseline of the search space; without one, the run's first benchmark's config."""
    base = space.baseline if space else results[0].server.flags
    found = _matching(results, _norm(base, space), space)
    return [r for r in found if _workload(r) == workload]


def _headroom(measured: list[BenchResult], noise: float | None) -> dict[str, Any]:
    """headroom and flags_done (tools/domain/physics.py headroom_of) from the best share of the
    floor any of `measured` reached at each level; {} where none carries one."""
    best: dict[int, tuple[float, str]] = {}
    for r in measured:
        for p in r.points:
            share = p.floor_share
            if share is None or p.level_failed or share <= best.get(p.max_concurrency, (0, ""))[0]:
                continue
            best[p.max_concurrency] = (share, p.floor_bound or "memory")
    if not best:
        return {}
    room = headroom_of(best, noise)
    levels = {
        str(h.level): {
            "bound": h.bound,
            "best_share": round(h.best_share, 4),
            "flags": None if h.flags is None else round(h.flags, 4),
            "kernels": None if h.kernels is None else round(h.kernels, 4),
        }
        for h in room.levels
    }
    return {"headroom": levels, "flags_done": room.flags_done}


def _floor_shares(
    deployed: list[BenchResult], base: list[BenchResult], levels: list[int]
) -> dict[str, Any]:
    """floor_share and baseline_floor_share ({level: the mean of its points' share of the
    bandwidth floor}), where every level of both carries one; {} otherwise."""
    out: dict[str, Any] = {}
    for key, measured in (("floor_share", deployed), ("baseline_floor_share", base)):
        shares: dict[str, float] = {}
        for c in levels:
            got = [
                p.floor_share
                for r in measured
                if (p := r.point(c)) is not None and p.floor_share is not None
            ]
            if got:
                shares[str(c)] = round(sum(got) / len(got), 4)
        if len(shares) < len(levels):
            return {}
        out[key] = shares
    return out


def _per_level(results: list[BenchResult]) -> dict[int, float]:
    """The configuration's figure per level: the mean of its sweeps (tools/domain/stats.py)."""
    return stats.mean_sweep(result_files.sweep_of(r) for r in results)


def _value(
    results: list[BenchResult], per_level: dict[int, float], common: list[int], objective: Any
) -> float:
    subset = {c: per_level[c] for c in common}
    slo_ok = _slo_ok(results, objective) if objective.kind in ("slo", "max_load") else None
    one = stats.read_level(objective.kind, objective.level)
    if one is not None and one not in subset:
        raise ToolError(
            f"the objective is the throughput at C={objective.level}, which was not "
            f"measured for both the configuration and the baseline (common: {common})"
        )
    return objective_value(subset, objective.kind, objective.level, slo_ok)


def paired_evidence(
    base: list[BenchResult],
    mine: list[BenchResult],
    common: list[int],
    objective: Any,
) -> stats.Paired | None:
    """The configuration against the baseline measured so that a drift cancels: its crossovers
    on a fleet (results.crossover_periods: both at once on two boxes, then swapped; two periods
    a comparison, stats.crossovers), else its latest duet (results.duet_rounds: both up at
    once, a round each comparison), else its launch pairs (results.pairs); each round's, pair's
    or period's objective ratio over the common levels. None: none measured."""
    periods = result_files.crossover_periods(base, mine)
    periods = periods if len(periods) >= 2 else []  # one period alone is no crossover yet
    rounds, looks = ([], 0) if periods else result_files.duet_rounds(base, mine)
    found = periods or rounds or result_files.pairs(base, mine)
    ratios, blocks = [], []
    for b, w in found:
        sb = stats.mean_sweep(result_files.sweep_of(r) for r in b)
        sw = stats.mean_sweep(result_files.sweep_of(r) for r in w)
        levels = [c for c in common if c in sb and c in sw]
        one = stats.read_level(objective.kind, objective.level)
        if not levels or (one is not None and one not in levels):
            continue
        bv = _value(b, sb, levels, objective)
        ratios.append(_value(w, sw, levels, objective) / bv if bv > 0 else 0.0)
        blocks.append(stats.level_blocks(sb, sw, levels))
    if not ratios:
        return None
    same_levels = len({len(row) for row in blocks}) == 1
    if periods:
        rows = stats.crossover_blocks(blocks) if by_level(objective.kind) and same_levels else ()
        return stats.Paired(stats.crossovers(ratios), unit="crossover", blocks=rows)
    if rounds:
        pooled = by_level(objective.kind) and same_levels
        return stats.Paired(
            tuple(ratios), looks=looks, unit="duet round", blocks=tuple(blocks) if pooled else ()
        )
    return stats.Paired(tuple(ratios))


def paired_record(p: stats.Paired) -> PairedRecord:
    """The paired comparisons as recommendation.json states them, their verdict decide()'s."""
    found = p.interval()
    won = decide_paired(p) == "win"
    return PairedRecord(
        ratio=round(p.ratio, 5),
        interval=None if found is None else [round(found[0], 5), round(found[1], 5)],
        pairs=p.n,
        ratios=[round(x, 5) for x in p.ratios],
        verdict="win" if won else "not established",
        stated=p.stated(),
        unit=p.unit,
        **({} if won else {"needs": p.unestablished()}),
    )


def _parallelism(config: Config) -> Parallelism | None:
    """The run engine's [parallelism], a user's profile file's too (None where the profile
    cannot be read: then by the engine each result names)."""
    try:
        return engine_for(config).profile.parallelism
    except ProfileError:
        return None


def _serving(
    price: CostConfig,
    measured: list[BenchResult],
    per_level: dict[int, float],
    levels: list[int],
    parallelism: Parallelism | None = None,
) -> dict[str, Any]:
    """usd_per_hour (of the GPUs its command asks for, counted by the run engine's profile, or
    of the box) and usd_per_mtok per level (tools/domain/cost.py, the report's formula)."""
    gpus = result_files.gpus_used(measured[-1], parallelism)
    priced = cost.per_level(price, gpus, {c: per_level[c] for c in levels})
    return {
        "usd_per_hour": round(price.hourly_usd(gpus), 4),
        "usd_per_mtok": {str(c): round(v, 4) for c, v in priced.items()},
    }


def _range_serving(
    price: CostConfig,
    r: dict[str, Any],
    results: list[BenchResult],
    space: SearchSpace | None,
    workload: tuple[Any, ...],
    parallelism: Parallelism | None = None,
) -> dict[str, Any]:
    """What a policy range's server costs over the levels of its range (_serving)."""
    measured = [
        x for x in _matching(results, _norm(r["config"], space), space) if _workload(x) == workload
    ]
    levels = _per_level(measured)
    hi = r["to_concurrency"] or max(levels)
    span = [c for c in sorted(levels) if r["from_concurrency"] <= c <= hi]
    return _serving(price, measured, levels, span, parallelism)


def _slo_ok(results: list[BenchResult], objective: Any) -> dict[int, bool]:
    """A level meets the SLO when every measurement of it did (stats.slo_met: a latency the
    result does not carry is not met)."""
    ok: dict[int, bool] = {}
    for r in results:
        for p in r.points:
            met = stats.slo_met(p.model_dump(exclude_unset=True), objective)
            ok[p.max_concurrency] = ok.get(p.max_concurrency, True) and met
    return ok


# --- the policy -----------------------------------------------------------------------------------
def _policy(
    ranges: list[PolicyRange],
    results: list[BenchResult],
    space: SearchSpace | None,
    workload: tuple[Any, ...],
) -> tuple[list[dict[str, Any]], list[int], list[str]]:
    if not ranges:
        return [], [], []
    out, crossover, notes = [], [], []
    for i, r in enumerate(ranges):
        if r.to_concurrency is not None and r.to_concurrency < r.from_concurrency:
            raise ToolError(
                f"policy range {i + 1}: to_concurrency {r.to_concurrency} is below "
                f"from_concurrency {r.from_concurrency}"
            )
        end = ranges[i - 1].to_concurrency if i else 0
        if end is None or end >= r.from_concurrency:
            raise ToolError(
                f"policy range {i + 1} overlaps range {i}: give ascending, "
                "non-overlapping ranges (only the last may end with null)"
            )
        want = _norm(r.config, space)
        measured = [x for x in _matching(results, want, space) if _workload(x) == workload]
        if not measured:
            raise ToolError(
                f"policy range {i + 1}: no benchmark of {_show(want)} on this workload in the run"
            )
        if i:
            crossover.append(r.from_concurrency)
            notes += _check_switch(ranges[i - 1], r, results, space, workload)
        full = space.complete(want) if space else want
        out.append(
            {
                "from_concurrency": r.from_concurrency,
                "to_concurrency": r.to_concurrency,
                "config": full,
            }
        )
    return out, crossover, notes


def _check_switch(
    a: PolicyRange,
    b: PolicyRange,
    results: list[BenchResult],
    space: SearchSpace | None,
    workload: tuple[Any, ...],
) -> list[str]:
    """Say so when the measurements do not support the switch where the policy puts it."""
    pa = _per_level(
        [x for x in _matching(results, _norm(a.config, space), space) if _workload(x) == workload]
    )
    pb = _per_level(
        [x for x in _matching(results, _norm(b.config, space), space) if _workload(x) == workload]
    )
    notes = []
    for c in sorted(set(pa) & set(pb)):
        in_a = c <= (a.to_concurrency or c) and c >= a.from_concurrency
        in_b = c >= b.from_concurrency and (b.to_concurrency is None or c <= b.to_concurrency)
        if in_a and pb[c] > pa[c]:
            notes.append(
                f"at C={c} the later range's config measured higher ({pb[c]:.1f} vs "
                f"{pa[c]:.1f} tok/s)"
            )
        if in_b and pa[c] > pb[c]:
            notes.append(
                f"at C={c} the earlier range's config measured higher ({pa[c]:.1f} vs "
                f"{pb[c]:.1f} tok/s)"
            )
    return notes


# --- output ---------------------------------------------------------------------------------------
def _command(config: Config, flags: dict[str, Any], port: int | None = None) -> str:
    """The launch command of a configuration; a policy's servers take consecutive ports from the
    configured one, so that they can run side by side on one host."""
    words = [*render_flags(flags), "--port", str(config.server.port if port is None else port)]
    return config.server.command + " " + shlex.join(words)


def _names(ids: list[str]) -> str:
    """Result ids as results.TimedSweep.names says them."""
    return result_files.TimedSweep({}, tuple(ids), "").names


def _show(flags: dict[str, Any]) -> str:
    return json.dumps(flags) if flags else "{} (no flags)"


def _measured(results: list[BenchResult], space: SearchSpace | None) -> str:
    seen = dict.fromkeys(_key(r.server.flags, space) for r in results)
    listed = list(seen)[:6]
    more = f" and {len(seen) - 6} more" if len(seen) > 6 else ""
    return "; ".join(listed) + more


# how the servers of a policy share the traffic: by the concurrency each range was measured at
ROUTING_RULE = (
    "one server per range; a router in front of them counts the requests in flight (the new "
    "one included) and sends each request to the server whose range holds that count"
)

VERDICT = {
    "within noise": "within the noise floor: not a win",
    "noise floor unknown": "the noise floor is unknown (no configuration measured twice): "
    "sweep the baseline again (A/A), then recommend again",
    "below the baseline": "below the baseline",
    "not established": "not established by its {unit}s",
    "not established, unpaired": "not established: the baseline's own sweeps moved beyond the "
    "noise floor, by as much as this gain, and no launch pair measured this configuration "
    "against it - launch pairs (the baseline and it alternately) would decide",
    "not comparable": "no level to compare with the baseline",
}


def _headroom_words(rec: Recommendation) -> str:
    """What flags could still add against physics, and whether tuning them is done."""
    left = {c: h["flags"] for c, h in (rec.headroom or {}).items() if h.get("flags") is not None}
    if not left:
        return "against physics: no level is memory-bound (the families' ceilings say nothing)"
    level = max(left, key=lambda c: left[c])
    text = f"against physics: flags could still add up to {left[level]:.0%} (C={level})"
    if rec.flags_done:
        return text + ", under the noise floor: tuning flags is done (docs/physics.md)"
    return text + ("" if rec.flags_done is None else ", beyond the noise floor")


def _verdict_key(rec: Recommendation) -> str:
    """Which VERDICT text: "not established" by the pairs, or for want of them under drift."""
    unpaired = rec.verdict == "not established" and rec.paired is None
    return "not established, unpaired" if unpaired else str(rec.verdict)


def verdict_words(rec: Recommendation) -> str:
    """The VERDICT text, naming what the paired comparisons were (a duet's rounds, crossovers)."""
    unit = rec.paired.unit if rec.paired is not None else "launch pair"
    return VERDICT.get(_verdict_key(rec), str(rec.verdict)).format(unit=unit)


def _text(rec: Recommendation, objective: Any) -> str:
    what = describe_objective(
        objective.kind, objective.level, objective.ttft_p99_ms, objective.tpot_p99_ms
    )
    gain, verdict = rec.gain, rec.verdict
    ratio = rec.geomean_ratio
    measured = (
        f"value {rec.value:.1f} vs baseline {rec.baseline_value:.1f}"
        + (f" ({gain:+.1%})" if gain is not None else "")
        + f" over C={','.join(map(str, rec.levels))}"
        + ("" if ratio is None else f"; geomean ratio {ratio:.3f}")
        + f"; noise floor {stats.percent(rec.noise_floor)}"
    )
    if rec.floor_share:  # against physics: how far the deployed one is from the hardware
        shares = ", ".join(f"C={c} {v:.0%}" for c, v in rec.floor_share.items())
        measured += f"\n  of the bandwidth floor: {shares}"
    if rec.headroom:
        measured += f"\n  {_headroom_words(rec)}"
    paired = rec.paired
    if paired is not None:  # the figure the verdict reads
        measured += f"\n  paired: {paired.stated}" + (
            f"; not established: {paired.needs}" if paired.needs is not None else ""
        )
    drift = rec.drift
    drifted = []
    if drift is not None:
        drifted = [
            f"  drift: the baseline moved {drift.change:+.1%} between its own sweeps "
            f"({_names(drift.earlier.results)} -> {_names(drift.later.results)}; "
            f"the faster {drift.size:.1%} above the slower, beyond the noise floor): "
            f"{result_files.DRIFTED}"
        ]
    if verdict not in ("win", "baseline"):
        asked = rec.candidate.command if rec.candidate is not None else ""
        return "\n".join(
            [
                f"Keep the baseline ({what}): the configuration asked for is {verdict_words(rec)}.",
                f"  asked: {asked}",
                f"  {measured}",
                f"  deploy: {rec.command}",
                *drifted,
                *(f"  note: {n}" for n in rec.notes),
                f"Written to {FILE} (verdict {verdict!r}; what was asked is under 'candidate').",
            ]
        )
    lines = [f"Recommendation ({what}):", f"  deploy: {rec.command}", f"  {measured}"]
    if len(rec.policy) > 1:
        lines.append(f"  policy: {len(rec.policy)} servers, {ROUTING_RULE}:")
    for p in rec.policy:
        hi = p.to_concurrency
        lo = p.from_concurrency
        span = f"C>={lo}" if hi is None else f"C={lo}" if hi == lo else f"C={lo}-{hi}"
        lines.append(f"  policy {span}: {' '.join(render_flags(p.config or {})) or '(no flags)'}")
    if rec.crossover:
        lines.append(f"  crossover at C={', '.join(map(str, rec.crossover))}")
    lines += drifted
    lines += [f"  note: {n}" for n in rec.notes]
    lines.append(f"Written to {FILE}.")
    return "\n".join(lines)
