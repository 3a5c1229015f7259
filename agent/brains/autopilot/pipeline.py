"""The pipeline before the campaign ([pipeline] of agent.toml): each stage a long job, in order.

A pure function of the run's fold, like the rest of the autopilot: the jobs of the events
(`job_started`/`job_ended`, which compaction does not touch) say where the pipeline stands, so a
resumed run finds a job that kept running while the agent was dead and polls it, never starting it
again. A stage's attempts are jobs named STAGE, STAGE-2, ...; an attempt counts when it started
after the attempt of every earlier stage it used (a stage rerun after a fix makes the stages after
it run again). Polls are spaced by the job's own ETA: half the time it says is left.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agent.brains.autopilot.observe import tool_exchanges
from agent.brains.base import Turn
from state.fold import RunState
from tools.domain.config import Config
from tools.domain.pipeline import PipelineConfig, StageConfig

TOOLS = ("start_job", "job_status", "put_file", "bash")  # the pipeline's calls, not the campaign's
FIRST_WAIT_S, MIN_WAIT_S, MAX_WAIT_S = 1.0, 1.0, 300.0
RETRIES = 1  # a killed job (no exit status, or 137) is started once more; a fix is tried once


@dataclass(frozen=True)
class Attempt:
    name: str
    seq: int
    ended: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        return self.ended is not None and self.ended.get("exit_code") == 0

    @property
    def killed(self) -> bool:
        return self.ended is not None and self.ended.get("exit_code") in (None, 137, -9)


def attempts(state: RunState, stage: str) -> list[Attempt]:
    pattern = re.compile(rf"^{re.escape(stage)}(-\d+)?$")
    found = [
        Attempt(name, int(run["started"].get("seq", 0)), run.get("ended"))
        for name, run in state.job_runs.items()
        if pattern.match(name)
    ]
    return sorted(found, key=lambda a: a.seq)


# what the pipeline does next: start a stage, poll its job, apply its fix, start a killed job
# again (retry), give up (failed), or hand over to the campaign (done)
Action = Literal["start", "poll", "fix", "retry", "failed", "done"]


@dataclass(frozen=True)
class Where:
    """Where the pipeline stands: the next `action` on stage `index`."""

    action: Action
    index: int = 0
    attempt: Attempt | None = None
    tries: int = 0


def where(state: RunState, p: PipelineConfig) -> Where:
    inputs = 0  # start seq of the latest good attempt of the stages before
    for i, stage in enumerate(p.stages):
        tries = attempts(state, stage.name)
        fresh = [a for a in tries if a.seq > inputs]
        if not fresh:
            return Where("start", i, None, len(tries))
        last = fresh[-1]
        if last.ended is None:
            return Where("poll", i, last, len(tries))
        if last.ok:
            inputs = last.seq
            continue
        failed = [a for a in tries if a.ended is not None and not a.ok]
        if last.killed and len(failed) <= RETRIES:
            return Where("retry", i, last, len(tries))
        fix = stage.fix
        if fix is not None and len(failed) <= RETRIES and re.search(fix.when, log_of(state, last)):
            return Where("fix", i, last, len(tries))
        return Where("failed", i, last, len(tries))
    return Where("done", len(p.stages))


def log_of(state: RunState, attempt: Attempt) -> str:
    """A job's log's last lines, as its last job_status read them (its typed `tail`)."""
    for name, inp, block in reversed(list(tool_exchanges(state))):
        if name == "job_status" and inp.get("name") == attempt.name:
            return "\n".join(map(str, block["data"].get("tail") or []))
    return ""


def own_tools(config: Config) -> tuple[str, ...]:
    """The calls the campaign does not count as its own (its first turn comes after them)."""
    return (*TOOLS, "todowrite") if config.pipeline is not None else ()


def turn(state: RunState, config: Config) -> Turn | None:
    """The pipeline's next turn, or None when it is done (the campaign goes on)."""
    p = config.pipeline
    if p is None:
        return None
    at = where(state, p)
    if at.action == "done":
        return None
    t = Builder(state)
    stage = p.stages[at.index]
    t.todos(todo_list(state, p, at))
    if at.action in ("start", "retry"):
        name = stage.name if at.tries == 0 else f"{stage.name}-{at.tries + 1}"
        why = (
            f"{at.attempt.name} was killed (no exit status); starting it again as {name}"
            if at.action == "retry" and at.attempt
            else f"Stage {at.index + 1}/{len(p.stages)}: {stage.what or stage.name}"
        )
        t.say(f"{why} - a long job; I poll it by its ETA.")
        t.call("start_job", job(stage, name, p))
    elif at.action == "poll":
        assert at.attempt is not None
        last = [r for r in state.last_results if r.get("name") == "job_status"]
        if last and not last[-1].get("is_error"):  # looked just now: wait by its ETA
            status = last[-1].get("data") or {}
            wait = wait_s(status, p.time_scale)
            why = "half its ETA" if "eta_s" in status else "no ETA in its log yet"
            t.say(f"{at.attempt.name} is running; next look in {wait:g} s ({why}).")
            t.call("bash", {"command": f"sleep {wait:g}", "timeout_s": wait + 30})
        else:
            t.call("job_status", {"name": at.attempt.name})
    elif at.action == "fix":
        assert stage.fix is not None and at.attempt is not None
        copied = [r for r in state.last_results if r.get("name") == "put_file"]
        if copied and copied[-1].get("is_error"):
            first = (str(copied[-1].get("text") or "").splitlines() or [""])[0]
            t.say(f"Conclusion: no recommendation - the fixed script was not copied: {first}.")
            return t.turn("end_turn")
        if not copied:  # first the fix, alone: the rerun only starts once it is in place
            t.say(
                f"The {stage.name} stage refused the data ({stage.fix.when!r} in its log). "
                f"Copying the fixed script to {stage.fix.dest}, then {stage.fix.rerun} runs "
                f"again, then {stage.name} again - before the expensive stages."
            )
            inp: dict[str, Any] = {"local_path": stage.fix.source, "remote_path": stage.fix.dest}
            if p.host:
                inp["host"] = p.host
            t.call("put_file", inp)
            return t.turn("tool_use")
        rerun = next(s for s in p.stages if s.name == stage.fix.rerun)
        name = f"{rerun.name}-{len(attempts(state, rerun.name)) + 1}"
        t.say(f"The fixed script is in place: {rerun.name} again as {name}.")
        t.call("start_job", job(rerun, name, p))
    else:
        assert at.attempt is not None
        ended = at.attempt.ended or {}
        tail = [line for line in log_of(state, at.attempt).splitlines() if line.strip()]
        t.say(
            f"Conclusion: no recommendation - the pipeline failed at {stage.name} "
            f"(job {at.attempt.name}, exit {ended.get('exit_code')}): "
            f"{tail[-1] if tail else 'see its log'}. Fix it and resume."
        )
        return t.turn("end_turn")
    return t.turn("tool_use")


def job(stage: StageConfig, name: str, p: PipelineConfig) -> dict[str, Any]:
    inp: dict[str, Any] = {"name": name, "command": stage.command}
    if p.host:
        inp["host"] = p.host
    return inp


def wait_s(status: Mapping[str, Any], time_scale: float) -> float:
    """Half the time a job_status says is left (its typed `eta_s`: the log's own ETA is in the
    job's clock, which the stage's time scale speeds up), within bounds."""
    left = status.get("eta_s")
    if not isinstance(left, int | float):
        return FIRST_WAIT_S
    if status.get("eta_clock") == "job":
        left /= time_scale
    return round(min(MAX_WAIT_S, max(MIN_WAIT_S, left / 2)), 1)


def todo_list(state: RunState, p: PipelineConfig, at: Where) -> list[dict[str, Any]]:
    """One todo per stage (the todo list is the pipeline's state), a fix where one was applied,
    then the campaign."""
    out = []
    for i, stage in enumerate(p.stages):
        status = "completed" if i < at.index else "in_progress" if i == at.index else "pending"
        fixing = at.action == "fix" and i == at.index
        content = f"pipeline {stage.name}: {stage.what or stage.command}"
        out.append(
            {
                "id": f"pipeline-{stage.name}",
                "content": content,
                "status": "pending" if fixing else status,
            }
        )
        fix = stage.fix
        if fix is not None and (fixing or len(attempts(state, fix.rerun)) > 1):
            out.append(
                {
                    "id": f"pipeline-fix-{stage.name}",
                    "content": f"fix: copy {fix.source} to {fix.dest}, rerun {fix.rerun}",
                    "status": "in_progress" if fixing else "completed",
                }
            )
    serving = "in_progress" if at.action == "done" else "pending"
    out.append(
        {
            "id": "pipeline-serve",
            "content": "serve the trained drafter against the baseline (the campaign)",
            "status": serving,
        }
    )
    return [{**t, "priority": "high"} for t in out]


def finished_todos(state: RunState, config: Config) -> list[dict[str, Any]]:
    """The pipeline's todos once it is done, kept ahead of the campaign's own."""
    if config.pipeline is None:
        return []
    items = todo_list(state, config.pipeline, Where("done", len(config.pipeline.stages)))
    return [t for t in items if t["id"] != "pipeline-serve"]


class Builder:
    def __init__(self, state: RunState) -> None:
        self.state = state
        self.blocks: list[dict[str, Any]] = []

    def say(self, text: str) -> None:
        self.blocks.append({"type": "text", "text": text})

    def call(self, name: str, inp: dict[str, Any]) -> None:
        n = sum(1 for b in self.blocks if b["type"] == "tool_use") + 1
        block_id = f"toolu_ap_{self.state.steps + 1:03d}_{n}"
        self.blocks.append({"type": "tool_use", "id": block_id, "name": name, "input": inp})

    def todos(self, items: list[dict[str, Any]]) -> None:
        if items != self.state.todos:
            self.call("todowrite", {"todos": items})

    def turn(self, stop: str) -> Turn:
        return Turn(content=self.blocks, stop_reason=stop, model="autopilot")
