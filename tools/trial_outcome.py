"""What a fleet trial leaves behind once it is back (tools/fleet/trial.py's TrialOutcome): per
group of levels a result file, a ledger line and a `benchmark` event, as run_benchmark writes
them - the server named after the trial, its host the box; and the fields of its `trial_ended`
event. One implementation for the autopilot's controller (agent/fleet/controller.py) and the
run_trial tool."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tools.base import ToolContext
from tools.bench import results
from tools.bench.deadlines import Deadlines
from tools.bench.schema import ClientInfo, ServerRef, Workload
from tools.benchmark_outcome import record
from tools.servers.profiles import engine_for

if TYPE_CHECKING:
    from tools.fleet.trial import TrialEnd, TrialOutcome

ENDS: tuple[TrialEnd, ...] = ("measured", "not_started", "failed", "lost", "interrupted")


def runs_again(end: TrialEnd, attempt: int, retries: int) -> bool:
    """Whether a trial that ended so is placed again: lost with its node or worker, and its
    `attempt` within the fleet's `retries`."""
    return end == "lost" and attempt <= retries


def end_of(event: dict[str, Any]) -> TrialEnd:
    """A `trial_ended` event's end. A log written before the field existed says only ok or not:
    read as measured or failed (a lost trial of such a log is not placed again on resume)."""
    end = event.get("end")
    for known in ENDS:
        if end == known:
            return known
    if event.get("interrupted"):
        return "interrupted"
    return "measured" if event.get("ok") else "failed"


def record_outcome(
    ctx: ToolContext,
    out: TrialOutcome,
    flags: dict[str, Any],
    groups: list[tuple[list[int], Workload]],
    label: str,
) -> list[tuple[str, dict[str, Any]]]:
    """One result file, ledger line and `benchmark` event per group of levels that measured
    something; each group's text and data, as run_benchmark answers them."""
    done = []
    engine = engine_for(ctx.config)
    server = ServerRef(
        name=out.trial_id,
        host=out.box or out.node[:8],
        engine=engine.name,
        command=out.command,
        flags=dict(flags),
        port=out.port,
        url=f"http://127.0.0.1:{out.port}",
    )
    by_level = {int(p["max_concurrency"]): p for p in out.points}
    results_dir = ctx.run.path / "results"
    static = Deadlines.from_job(ctx.config.bench.deadlines.given()).to_job()
    for group, (levels, workload) in enumerate(groups):
        # the deadlines the trial swept this group with (a log before they came back: the config's)
        deadlines = out.deadlines[group] if group < len(out.deadlines) else static
        points = [by_level[c] for c in levels if c in by_level]
        if not points:
            continue
        result = results.build_result(
            result_id=results.new_id(results_dir, out.trial_id),
            server=server,
            workload=workload.model_copy(update={"model": out.model}),
            client=ClientInfo(where="controller", host=out.box, deadlines=deadlines),
            levels=levels,
            points=points,
            label=label,
            run_id=ctx.run.id,
            notes=out.notes,
        )
        done.append(record(ctx, result, results_dir))
    return done


def ended_fields(out: TrialOutcome, attempt: int) -> dict[str, Any]:
    """The `trial_ended` event's fields."""
    return {
        "trial": out.trial_id,
        "node": out.node,
        "box": out.box,
        "ok": out.ok,
        "end": out.end,
        "reason": out.reason,
        "started": out.started,
        "ended": out.ended,
        "seconds": round(out.ended - out.started, 3) if out.ended else None,
        "ready_s": round(out.ready_s, 3),
        "command": out.command,
        "log_tail": out.log_tail,
        "cleanup": out.cleanup,
        "attempt": attempt,
    }


def one_line(out: TrialOutcome) -> str:
    """`<trial> on <box>: 9.0 s, ok` (the terminal's line, and the start of run_trial's text)."""
    took = f"{out.ended - out.started:.1f} s" if out.ended else "-"
    verdict = "ok" if out.ok else out.reason.splitlines()[0][:120]
    return f"{out.trial_id} on {out.box or '?'}: {took}, {verdict}"
