"""The planner a run asks: its space, levels and objective from the config, under the supervisor's
directives (`agent say`) and the budget's wrap-up - one box (brain.Campaign) and the fleet
(agent/fleet/controller.py) build it here, so both plan under the same settings; and the
conclusion's tool calls (compare, recommend) both make from the planner's Finish."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

from agent.brains.autopilot import directives, pipeline_verdict
from agent.brains.autopilot.engine_limits import space_of
from agent.brains.autopilot.history import History, Objective
from agent.brains.autopilot.planner import Finish, Planner, Settings
from state.fold import RunState, measured_pace
from tools.domain.config import Config
from tools.servers.profiles import engine_for
from tools.servers.speculation import speculative_flags


@dataclass(frozen=True)
class RunPlanner:
    """The planner under the directives in force; `replies`: one line per supervisor message,
    by its seq (answered as "Supervisor #N: ..."); `objective`: the one it plans for (a `focus`
    directive changes the config's)."""

    planner: Planner
    replies: dict[int, str]
    objective: Objective
    config: Config

    @property
    def configured(self) -> bool:
        """The objective is the config's (no `focus` directive changed it)."""
        obj = self.config.objective
        return self.objective == Objective(obj.kind, obj.level)


def run_planner(state: RunState, config: Config) -> RunPlanner:
    """The planner for the run as its events stand: the supervisor's messages read as
    directives, the wrap-up on a budget warning, the launches the minutes left still pay for.
    Raises SearchError when the space is not usable."""
    space = space_of(config)
    levels = tuple(config.bench.concurrency)
    engine = engine_for(config)
    speculative = speculative_flags(engine, space.flags, space.requires)
    said, replies = directives.read(state.supervisor, speculative, levels)
    obj = config.objective
    objective = Objective(obj.kind, obj.level)
    if said.focus is not None:
        objective = Objective("level", said.focus)
    settings = Settings(
        levels=levels,
        objective=objective,
        excluded=said.skip,
        speculative=speculative,
        wrap_up=said.wrap_up or state.warned_budget,
        launches_fit=launches_that_fit(state, levels),
        target_noise=obj.precision,
        requests_per_level=config.bench.requests_per_level,
        min_level_s=engine.level_minimum(config.bench.min_level_s),
        max_tokens=config.bench.max_tokens,
        side_by_side=config.server.side_by_side,
        parallelism=engine.profile.parallelism,
    )
    return RunPlanner(Planner(space, settings), replies, objective, config)


def launches_that_fit(state: RunState, levels: Sequence[int]) -> int | None:
    """After the warning on the minutes budget: the launches the minutes it left can pay for,
    less those started since; None without such a warning. A wrap-up launch is one start and one
    sweep of `levels` (a re-validation, half a launch pair): the run's pace per launch up to the
    warning, scaled by what such a launch measured against the run's average one. The pace alone
    counts exploring's repeated sweeps in every launch: a 45-minute real-vLLM campaign sized its
    wrap-up at 91 s a launch, its launches took 49 s, and it ended with one launch pair and five
    minutes unused (docs/engines.md). A wrap-up that starts a launch it cannot end runs the budget
    out (exit 3, the re-validation cut mid-sweep) where concluding at once would have finished.
    A duet's blocks since the warning take their measured seconds off what is left: they need no
    launch, and a real-vLLM campaign's 3 rounds (2.2 minutes) went uncounted, so it started a
    launch with a minute left."""
    w = state.minutes_warning
    if w is None or w.launches == 0 or w.used <= 0:
        return None
    pace = w.used * 60 / w.launches * wrap_up_share(state, levels)
    duets_s = sum(
        float(point.get("duration") or 0.0)
        for result in state.results[w.results :]
        if result.get("duet")
        for point in (result.get("points") or {}).values()
    )
    left_s = (w.of - w.used) * 60 - duets_s
    return max(0, int(left_s // pace)) - (state.launches_started - w.launches)


def wrap_up_share(state: RunState, levels: Sequence[int]) -> float:
    """A wrap-up launch's measured seconds (the median start, and the median duration at each of
    `levels`) over the average launch's up to the warning (its starts and benchmarks); 1 where the
    run's events do not carry them (recorded before they carried the durations)."""
    w = state.minutes_warning
    assert w is not None
    starts, durations = measured_pace(state, w.results, w.readies)
    if not starts or any(level not in durations for level in levels):
        return 1.0
    measured = sum(starts) + sum(sum(d) for d in durations.values())
    one = median(starts) + sum(median(durations[level]) for level in levels)
    return one / (measured / w.launches)


# --- the conclusion's calls ----------------------------------------------------------------------
def conclusion_calls(
    planned: RunPlanner, h: History, step: Finish, state: RunState
) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls that state a conclusion with a winner: `compare` per group of levels
    (compare_sets), then `recommend` with the winner, the concurrency policy, the objective a
    directive set and why - the planner's Finish, whose verdict is decide()'s
    (conclude.finish); recommend decides again from the result files with the same decide().
    No call for a Finish without a best: nothing to recommend."""
    if step.best is None:
        return []
    planner = planned.planner
    calls: list[tuple[str, dict[str, Any]]] = [
        ("compare", {"results": ids, "baseline": ids[0]}) for ids in compare_sets(h, planner, step)
    ]
    floor = planner.read(h).floors[0]
    why = pipeline_verdict.with_drafter(step.why, state, planned.config, h, floor)
    inp: dict[str, Any] = {"config": dict(step.best), "reason": why}
    if len(step.policy) > 1:
        inp["policy"] = [
            {
                "from_concurrency": r.from_concurrency,
                "to_concurrency": r.to_concurrency,
                "config": dict(r.config),
            }
            for r in step.policy
        ]
    if not planned.configured:
        inp["objective"] = {"kind": planned.objective.kind, "level": planned.objective.level}
    calls.append(("recommend", inp))
    return calls


def compare_sets(h: History, planner: Planner, step: Finish) -> list[list[str]]:
    """Per group of levels: the baseline's first result, then the winner's and the policy's."""
    levels = planner.settings.levels
    who = [
        planner.space.baseline,
        *([step.best] if step.best else []),
        *[r.config for r in step.policy],
    ]
    seen: list[str] = []
    picked = []
    for config in who:
        if h.key(config) not in seen:
            seen.append(h.key(config))
            sweeps = h.sweeps(config, levels)
            if sweeps:
                picked.append(sweeps[0] if config == planner.space.baseline else sweeps[-1])
    if len(picked) < 2:
        return []
    by_group: dict[int, list[str]] = {}
    for m in picked:
        for i, result_id in enumerate(m.ids):
            by_group.setdefault(i, []).append(result_id)
    return [ids for _, ids in sorted(by_group.items()) if len(ids) == len(picked)]
