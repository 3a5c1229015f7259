"""A campaign across a fleet: the autopilot plans in batches (agent/brains/autopilot/batch.py),
each experiment runs as a trial on the box Ray places it on (tools/fleet/), and this controller
keeps the run's one event log, the ledger and the todo list.

Each trial's events: `trial_started {trial, purpose, flags, levels, attempt}`, then, when it comes
back, `trial_ended {trial, node, box, ok, reason, started, ended, seconds, log_tail, cleanup}`
and one `benchmark` event per group of levels (the result files, the ledger - as run_benchmark
writes them, the server named after the trial, its host the box). A trial lost with its node or
worker is retried once on another node (`trial_retried`). The conclusion is the autopilot's:
compare and recommend are called as tools, then the report.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import Any

from agent.brains.autopilot.batch import plan_batch, reused_launch
from agent.brains.autopilot.brain import (
    FLOOR_SCREEN,
    FLOOR_SWEEP,
    WAVES_SCREEN,
    WAVES_SWEEP,
    Campaign,
    groups,
)
from agent.brains.autopilot.history import History, Launch, Measurement
from agent.brains.autopilot.narrate import tag
from agent.brains.autopilot.observe import slo_of, slo_ok_of
from agent.brains.autopilot.planner import Experiment, Finish
from agent.brains.autopilot.todo_plan import stage_of, todos
from agent.report import write_report
from agent.session import AUTOPILOT, Limits, start
from state.run import Run
from tools.base import ToolBox, ToolContext
from tools.bench import results
from tools.bench.random_prompts import sweep_seed
from tools.bench.schema import ClientInfo, ServerRef
from tools.benchmark_outcome import record
from tools.domain.config import Config, UsageError
from tools.domain.fleet_config import FleetConfig
from tools.fleet.ray_backend import FleetError, RayFleet
from tools.fleet.trial import TrialOutcome, TrialSpec
from tools.registry import all_tools
from tools.run_benchmark import RunBenchmarkInput, _workload
from tools.servers.profiles import engine_for

LOST = "lost on its node"  # the prefix of a trial Ray lost (tools/fleet/ray_backend._lost)


class FleetCampaign:
    def __init__(self, run: Run, config: Config, fleet: RayFleet) -> None:
        self.run, self.config, self.fleet = run, config, fleet
        self.ctx = ToolContext(run=run, config=config)
        self.tools = ToolBox(all_tools())
        self.campaign = Campaign(run.state, config, run.path)
        self.planner = self.campaign.planner
        self.h = History(self.campaign.space)
        self.in_flight: dict[str, Experiment] = {}
        self.trials = 0

    async def drive(self) -> int:
        """Plan, place, collect until the planner concludes; the exit code."""
        nodes = self.fleet.nodes()
        slots = self.fleet.slots()
        self.run.append("fleet_started", engine="ray", nodes=nodes, slots=slots)
        while True:
            free = slots - len(self.in_flight)
            steps = plan_batch(self.planner, self.h, list(self.in_flight.values()), free)
            if steps and isinstance(steps[0], Finish):
                return await self.conclude(steps[0])
            for step in steps:
                assert isinstance(step, Experiment)
                await self.start(step)
            if not self.in_flight:  # nothing to wait for and nothing to start: conclude
                return await self.conclude(self.planner.finish(self.h))
            await self.collect()

    async def start(
        self, step: Experiment, attempt: int = 1, avoid: str | None = None, first: str = ""
    ) -> None:
        """Place one trial; a retry (`attempt` > 1) keeps the first try's name with -tryN."""
        if attempt == 1:
            self.trials += 1
            await self.write_todos(stage_of(step, self.h))
            words = tag(self.campaign.space, step.config)
            first = f"{step.purpose}-L{self.trials:02d}"
            first += "" if words == "baseline" else f"-{words}"
        trial = first if attempt == 1 else f"{first}-try{attempt}"
        self.in_flight[trial] = step
        spec = TrialSpec(trial, self.config, dict(step.config), self.groups(step), self.seed(trial))
        self.run.append(
            "trial_started",
            trial=trial,
            purpose=step.purpose,
            why=step.why,
            flags=dict(step.config),
            levels=list(step.levels),
            attempt=attempt,
        )
        self.fleet.submit(spec, avoid=avoid, attempt=attempt)

    def groups(self, step: Experiment) -> list[tuple[list[int], Any]]:
        """The levels grouped as the autopilot groups its run_benchmark calls."""
        waves, floor = (WAVES_SWEEP, FLOOR_SWEEP) if step.full else (WAVES_SCREEN, FLOOR_SCREEN)
        out = []
        for levels, requests in groups(
            step.levels, waves, floor, self.config.bench.requests_per_level
        ):
            inp = RunBenchmarkInput(concurrency=list(levels), requests_per_level=requests)
            out.append((list(levels), _workload(self.ctx, inp, None)))
        return out

    def seed(self, trial: str) -> int:
        return sweep_seed(self.config.bench.seed, self.run.id, trial)

    async def collect(self) -> None:
        """The next trial to come back: recorded, learned from, retried once if its node was
        lost."""
        sub, out = await self.fleet.next_done()
        trial = sub.spec.trial_id
        step = self.in_flight.pop(trial)
        self.run.append(
            "trial_ended",
            trial=trial,
            node=out.node,
            box=out.box,
            ok=out.ok,
            reason=out.reason,
            started=out.started,
            ended=out.ended,
            seconds=round(out.ended - out.started, 3) if out.ended else None,
            ready_s=round(out.ready_s, 3),
            command=out.command,
            log_tail=out.log_tail,
            cleanup=out.cleanup,
            attempt=sub.attempt,
        )
        took = f"{out.ended - out.started:.1f} s" if out.ended else "-"
        verdict = "ok" if out.ok else out.reason.splitlines()[0][:120]
        print(f"fleet: {trial} on {out.box or '?'}: {took}, {verdict}", file=sys.stderr)
        if not out.ok and out.reason.startswith(LOST) and sub.attempt <= self.fleet.config.retries:
            self.run.append("trial_retried", trial=trial, reason=out.reason, avoid=out.node)
            print(f"fleet: {trial} {out.reason}; retrying on another box", file=sys.stderr)
            first = trial.rsplit("-try", 1)[0]
            await self.start(step, sub.attempt + 1, out.node or sub.node, first)
            return
        self.learn(step, out)

    def learn(self, step: Experiment, out: TrialOutcome) -> None:
        h = self.h
        if not out.ok and not out.points:
            started = not out.reason.startswith("the server did not start")
            h.launches.append(Launch(step.config, ok=started, reason="" if started else out.reason))
            if started:  # it started but could not be measured (or was lost twice)
                h.broken[len(h.launches) - 1] = out.reason
            return
        launch = reused_launch(h, step)
        if launch is None:
            h.launches.append(Launch(step.config))
            launch = len(h.launches) - 1
        mine: Measurement | None = None  # this trial's sweep, one event per group of levels
        slo = slo_of(self.config)
        for event in self.record(step, out):
            per = {int(c): float(v or 0.0) for c, v in (event.get("summary") or {}).items()}
            ok = slo_ok_of(event, self.run.path, slo) if slo is not None else None
            if mine is None:
                label = str(event.get("label") or "")
                mine = Measurement(step.config, launch, per, label, ok, (str(event["id"]),))
                h.measurements.append(mine)
                continue
            both = dict(sorted({**mine.per_level, **per}.items()))
            slo_both = {**(mine.slo_ok or {}), **(ok or {})} if ok is not None else None
            ids = (*mine.ids, str(event["id"]))
            mine = Measurement(mine.config, launch, both, mine.label, slo_both, ids)
            h.measurements[-1] = mine

    def record(self, step: Experiment, out: TrialOutcome) -> list[dict[str, Any]]:
        """One result file, ledger line and `benchmark` event per group of levels."""
        events = []
        engine = engine_for(self.config)
        server = ServerRef(
            name=out.trial_id,
            host=out.box or out.node[:8],
            engine=engine.name,
            command=out.command,
            flags=dict(step.config),
            port=out.port,
            url=f"http://127.0.0.1:{out.port}",
        )
        by_level = {int(p["max_concurrency"]): p for p in out.points}
        for levels, workload in self.groups(step):
            points = [by_level[c] for c in levels if c in by_level]
            if not points:
                continue
            results_dir = self.run.path / "results"
            result_id = results.new_id(results_dir, out.trial_id)
            result = results.build_result(
                result_id=result_id,
                server=server,
                workload=workload.model_copy(update={"model": out.model}),
                client=ClientInfo(where="controller", host=out.box),
                levels=levels,
                points=points,
                label=out.trial_id.rsplit("-try", 1)[0],
                run_id=self.run.id,
                notes=out.notes,
            )
            record(self.ctx, result, results_dir)
            events.append(self.run.state.results[-1])
        return events

    async def write_todos(self, stage: str, done: bool = False) -> None:
        items = todos(self.planner, self.h, stage, done=done)
        if items != self.run.state.todos:
            await self.tools.call(self.ctx, "todowrite", {"todos": items})

    async def conclude(self, step: Finish) -> int:
        """The autopilot's conclusion: its compare and recommend calls, as tools; the report."""
        campaign = self.campaign
        campaign.h, campaign.blocks = self.h, []
        campaign.finish(step)
        text = [b for b in campaign.blocks if b["type"] == "text"]
        if text:
            self.run.append("message", role="assistant", content=text)
        for block in campaign.blocks:
            if block["type"] == "tool_use" and block["name"] in (
                "todowrite",
                "compare",
                "recommend",
            ):
                result, _ = await self.tools.call(self.ctx, block["name"], block["input"])
                if result.is_error:
                    print(f"fleet: {block['name']}: {result.text.splitlines()[0]}", file=sys.stderr)
        await self.write_todos("report", done=True)
        return 0


async def run_fleet(run: Run, config: Config, fleet: RayFleet, boxes: int | None) -> int:
    """Start (or join) the cluster, run the campaign, stop what was started; the exit code."""
    start = time.monotonic()
    status, code, reason = "error", 1, "internal error"
    task = asyncio.current_task()
    try:
        fleet.connect(boxes)
        if task is not None:  # a SIGTERM: the cluster and the servers still go. After
            # ray.init, whose own handler would abort the process
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        code = await FleetCampaign(run, config, fleet).drive()
        status, reason = "finished", "the campaign concluded across the fleet"
    except (KeyboardInterrupt, asyncio.CancelledError):
        status, code, reason = "stopped", 130, "stopped by a signal"
    finally:
        await fleet.close()
        write_report(run, status)
        run.append(
            "run_finished",
            status=status,
            exit_code=code,
            reason=reason,
            session_minutes=round((time.monotonic() - start) / 60, 4),
        )
    return code


def fleet_workdir(run: Run) -> Path:
    """Where the trials keep their server logs and pid files (each box's own on a real fleet)."""
    return run.path / "fleet"


def run_fleet_campaign(
    goal: str,
    config: Config,
    model: str,
    runs_dir: Path,
    run_id: str | None,
    limits: Limits,
    boxes: int | None,
) -> int:
    """`agent run --fleet ray [--boxes N]`: the fleet from [fleet] (joined), or a local cluster
    of N simulated boxes; the autopilot plans (a model cannot drive a fleet yet)."""
    if model != AUTOPILOT:
        raise UsageError(
            "--fleet runs the autopilot for now: add --model autopilot (or unset ANTHROPIC_API_KEY)"
        )
    fleet_config = config.fleet or FleetConfig()
    if boxes is None and config.fleet is None and config.source == "built-in lab":
        boxes = fleet_config.boxes  # the lab without [fleet]: its own simulated boxes
    if boxes is not None:
        fleet_config = fleet_config.model_copy(update={"boxes": boxes, "address": "local"})
        fleet_config = fleet_config.model_copy(update={"max_trials": max(boxes, 1)})
    config = config.model_copy(update={"fleet": fleet_config})
    run = start(goal, config, model, runs_dir, run_id, limits, fleet="ray")
    print(f"run {run.id}: {run.path}", file=sys.stderr)
    fleet = RayFleet(fleet_config, fleet_workdir(run))
    try:
        return asyncio.run(run_fleet(run, config, fleet, boxes))
    except FleetError as err:
        raise UsageError(str(err)) from None
    finally:
        run.close()
