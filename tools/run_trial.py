"""run_trial: one configuration measured on a box of the fleet (a run with `--fleet`): the server
started there with the engine profile, waited for, benchmarked from the same box, killed with
everything it spawned (tools/fleet/trial.py). Several calls of one turn run at once, each on a
box of its own (agent/tool_batch.py), results in call order.

Recorded as the autopilot's fleet controller records its trials: `trial_started`, `trial_ended`
and a result file, ledger line and `benchmark` event (tools/trial_outcome.py). A trial lost with
its node or worker runs again once on another node (`trial_retried`, `<trial>-try2`).
"""

from __future__ import annotations

import asyncio
import itertools
import re
from typing import Any

from pydantic import Field

from state.fleet import first_name, try_name
from state.secrets import UnresolvedSecret
from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult
from tools.bench.random_prompts import sweep_seed
from tools.fleet.trial import TrialOutcome, TrialSpec, launchable
from tools.log_paths import check_name
from tools.run_benchmark import MAX_LEVEL, RunBenchmarkInput, trial_deadlines, workload_of
from tools.servers.command import build_command, refuse_public_bind
from tools.servers.profiles import ProfileError, engine_for
from tools.trial_outcome import ended_fields, one_line, record_outcome, runs_again

LOG_LINES = 8  # of a failed trial's server log, in the answer
CANCELLED = "cancelled with the fleet at the run's end (RayFleet.close)"


class RunTrialInput(ToolInput):
    flags: dict[str, Any] = Field(
        default={},
        description='Flags added to the configured command, as start_server takes them: {"--flag": '
        "value}; true = the switch alone, false = omitted",
    )
    concurrency: list[int] | None = Field(
        default=None,
        min_length=1,
        description="Concurrency levels, e.g. [1, 100]; default: the config's sweep",
    )
    requests_per_level: int | None = Field(
        default=None, ge=1, description="Requests per level; default from the config"
    )
    label: str | None = Field(
        default=None, max_length=40, description="Short name for the trial and its result"
    )


class RunTrial(Tool):
    name = "run_trial"
    Input = RunTrialInput

    async def run(self, ctx: ToolContext, inp: RunTrialInput) -> ToolResult:
        fleet = ctx.fleet
        if fleet is None:
            raise ToolError("run_trial needs a fleet: this run has none (agent run --fleet ray)")
        levels = inp.concurrency or list(ctx.config.bench.concurrency)
        bad = [c for c in levels if c < 1 or c > MAX_LEVEL]
        if bad:
            raise ToolError(f"concurrency levels must be 1..{MAX_LEVEL}, got {bad}")
        try:  # a bad flag or a public --host is the caller's error: said before a box is taken
            config = launchable(ctx.config)  # a resumed run's secrets, from the environment
            command = build_command(config.server.command, inp.flags, engine_for(config), 1)
        except (ProfileError, UnresolvedSecret) as err:
            raise ToolError(str(err)) from None
        refuse_public_bind(command, ctx.config.server.allow_public_bind)
        label = check_name("trial", inp.label) if inp.label else "trial"
        first = f"{label}-T{next(_counter(ctx)):02d}"
        bench = RunBenchmarkInput(concurrency=levels, requests_per_level=inp.requests_per_level)
        groups = [(levels, workload_of(ctx, bench, None))]
        flags = dict(inp.flags)
        attempt, avoid = 1, None
        lost: list[str] = []  # the tries a lost node cost
        while True:
            trial = try_name(first, attempt)
            ctx.run.append(
                "trial_started",
                trial=trial,
                purpose="run_trial",
                why=inp.label or "",
                flags=flags,
                levels=list(levels),
                attempt=attempt,
            )
            seed = sweep_seed(ctx.config.bench.seed, ctx.run.id, trial)
            spec = TrialSpec(trial, config, flags, groups, seed)
            spec.deadlines = trial_deadlines(ctx, flags, groups)  # learned where served
            fleet.submit(spec, avoid, attempt)
            try:
                sub, out = await fleet.wait(trial)
            except asyncio.CancelledError:  # a stop or a budget: its server goes with the fleet
                ctx.run.append(
                    "trial_ended",
                    trial=trial,
                    ok=False,
                    end="interrupted",
                    reason="interrupted: the run stopped while it ran",
                    interrupted=True,
                    cleanup=CANCELLED,
                    attempt=attempt,
                )
                raise
            retry = runs_again(out.end, attempt, fleet.config.retries)
            # the benchmark events before trial_ended (its commit), as the controller writes them
            done = [] if retry else record_outcome(ctx, out, flags, groups, inp.label or first)
            ctx.run.append("trial_ended", **ended_fields(out, sub.attempt))
            if not retry:
                return answer(out, lost, done)
            ctx.run.append("trial_retried", trial=trial, reason=out.reason, avoid=out.node)
            lost.append(f"{one_line(out)}; ran again on another box")
            avoid, attempt = out.node or sub.node, attempt + 1


NUMBERED = re.compile(r"-T(\d+)$")  # <label>-T07: the run's seventh trial


def _counter(ctx: ToolContext) -> Any:
    """The run's trial numbers (the context's extras are shared by the calls of a run), going on
    from the trials the log has: a resumed run's first trial is not named as an earlier one."""
    if "run_trial" not in ctx.extras:
        fleet = ctx.run.state.fleet
        trials: list[str] = []
        if fleet is not None:
            trials = [*fleet.running, *(t.name for t in fleet.lost), *fleet.reaped]
            trials += [e.trial.name for e in fleet.ended]
        numbers = [int(m.group(1)) for t in trials if (m := NUMBERED.search(first_name(t)))]
        ctx.extras["run_trial"] = itertools.count(max(numbers, default=0) + 1)
    return ctx.extras["run_trial"]


def answer(
    out: TrialOutcome, lost: list[str], done: list[tuple[str, dict[str, Any]]]
) -> ToolResult:
    """The trial's line (box, seconds, verdict), then each result's table as run_benchmark's."""
    head = one_line(out) + (f" (ready in {out.ready_s:.1f} s)" if out.ready_s else "")
    lines = [*lost, head, *(text for text, _ in done)]
    if not out.ok and out.log_tail:
        lines += ["server log, last lines:", *out.log_tail.splitlines()[-LOG_LINES:]]
    data = {"trial": out.trial_id, "box": out.box, "ok": out.ok, "results": [d for _, d in done]}
    failed = not done or all(len(d["failed_levels"]) == len(d["summary"]) for _, d in done)
    return ToolResult(text="\n".join(lines), is_error=not out.ok or failed, data=data)
