"""A campaign across a fleet: the autopilot plans in batches (agent/brains/autopilot/batch.py),
each experiment runs as a trial on the box Ray places it on (tools/fleet/), and this controller
keeps the run's one event log, the ledger and the todo list.

Each trial's events: `trial_started {trial, purpose, why, flags, levels, fresh, attempt}`, then,
when it comes back, one `benchmark` event per group of levels (the result files, the ledger - as
run_benchmark writes them, the server named after the trial, its host the box) and `trial_ended
{trial, node, box, ok, reason, started, ended, seconds, log_tail, cleanup}` - last: a trial that
has its trial_ended has all its measurements in the log. A trial lost with its node or worker is
retried once on another node (`trial_retried`). With two boxes or more the winner is proven in
crossovers (agent/brains/autopilot/conclude.cross): a period's two halves - the baseline and the
winner, `trial_started {..., period, base}` - run at once on two boxes, and the crossover's second
period on the same two boxes swapped (`pin`), so a box effect cancels; the box a half ended on is
held until its other half ends. The conclusion is the autopilot's: compare and
recommend are called as tools (run_planner.conclusion_calls, from the planner's Finish: its
verdict is tools/domain/decision.decide's), then the report. The planner is asked and told through
AskTell only; the one-box brain (Campaign) is not built here.

The supervisor, as on one box (agent/loop.py's own machinery): before each planning round the
inbox is delivered and the budgets checked (Agent.check_limits); while trials run, a stop or the
minutes budget is watched for (agent/interrupts.py). `agent say` changes the planner's
directives as the one-box autopilot reads them (run_planner); `agent stop` or a budget cancels the
trials in flight (`trial_ended {interrupted: true}`, their servers killed with the fleet), keeps
what came back and concludes from it. `agent resume` rebuilds the History from the log with the
same `learn` as the live path and places the trials left unfinished again, after killing what
they left (agent/fleet/resume.py; docs/fleet.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import replace
from typing import Any, Protocol

from agent.brains.autopilot import directives, narrate
from agent.brains.autopilot.ask_tell import AskTell, Broken, Measured, NotStarted, Sweep
from agent.brains.autopilot.narrate import tag
from agent.brains.autopilot.observe import slo_of, slo_ok_of
from agent.brains.autopilot.planner import Experiment, Finish, Planner
from agent.brains.autopilot.run_planner import conclusion_calls, run_planner
from agent.brains.autopilot.steps import request_groups
from agent.brains.autopilot.todo_plan import stage_of, todos
from agent.ends import RunEnded
from agent.fleet.resume import RESUMED, experiment_of, reap_left, replay
from agent.interrupts import Interrupts, reason_now
from agent.supervision import Supervision
from state.fleet import first_name, try_name
from state.run import Run
from state.sweeps import per_level_of
from tools.base import ToolBox, ToolContext
from tools.bench.random_prompts import sweep_seed
from tools.domain.config import Config
from tools.domain.fleet_config import FleetConfig
from tools.fleet.ray_backend import Submitted
from tools.fleet.trial import (
    TrialEnd,
    TrialOutcome,
    TrialSpec,
    launchable,
)
from tools.registry import all_tools
from tools.run_benchmark import RunBenchmarkInput, trial_deadlines, workload_of
from tools.trial_outcome import end_of, ended_fields, record_outcome, runs_again

CANCELLED = "cancelled with the fleet (RayFleet.close)"


class FleetBackend(Protocol):
    """What the controller needs of a backend: tools/fleet/ray_backend.RayFleet (a fake in
    tests/test_fleet_controller.py)."""

    config: FleetConfig

    def connect(self, boxes: int | None = None) -> None: ...

    def nodes(self) -> dict[str, str]: ...

    def slots(self) -> int: ...

    def submit(
        self, spec: TrialSpec, avoid: str | None = None, attempt: int = 1, pin: str | None = None
    ) -> None: ...

    async def next_done(self) -> tuple[Submitted, TrialOutcome]: ...

    async def close(self) -> dict[str, str] | None: ...


class FleetCampaign:
    """One session of the controller. `events`: the run's log so far, on `agent resume` (the
    History is rebuilt from it, the trials it left unfinished are placed again)."""

    def __init__(
        self,
        run: Run,
        config: Config,
        fleet: FleetBackend,
        events: list[dict[str, Any]] | None = None,
    ) -> None:
        self.run, self.config, self.fleet = run, config, fleet
        self.ctx = ToolContext(run=run, config=config)
        self.tools = ToolBox(all_tools())
        self.supervision = Supervision(run)  # the inbox and the budgets, as one box checks them
        self.interrupts = Interrupts()
        self.planned = run_planner(run.state, config)
        self.search = AskTell(self.planned.planner)  # the planner asked, the History told
        self.h = self.search.history
        self.answer()
        self.placed: dict[str, Experiment] = {}  # trial -> its experiment, not come back yet
        self.attempts: dict[str, int] = {}  # trial in flight -> its attempt
        self.trials = 0
        self.pair_node: str | None = None  # where the launch pairs run: all on one box
        # crossover period -> (its candidate's key, {the baseline's half?: the node it ran on})
        self.periods: dict[int, tuple[str, dict[bool, str]]] = {}
        self.unfinished: list[tuple[str, Experiment, int]] = []  # (trial, step, attempt)
        self.status, self.reason = "finished", "the campaign concluded across the fleet"
        if events:
            self.rebuild(events)

    async def drive(self) -> int:
        """Plan, place, collect until the planner concludes - or the supervisor stops the run, or
        a budget ends it: then the trials in flight are cancelled and the conclusion is drawn
        from what was measured. The exit code; `status` and `reason` say how it ended."""
        nodes = self.fleet.nodes()
        slots = self.fleet.slots()
        self.search.planner = crossing(self.planned.planner, slots)  # two boxes: crossovers
        auth = secured(self.run, self.fleet)
        self.run.append("fleet_started", engine="ray", nodes=nodes, slots=slots, auth=auth)
        try:
            self.supervise()
            await self.place_unfinished()
            while True:
                self.supervise()
                free = slots - len(self.placed) - self.held()
                steps = self.search.suggest_batch(free)  # beside the History's in flight
                if steps and isinstance(steps[0], Finish):
                    return await self.conclude(steps[0])
                started = [await self.start(s) for s in steps if isinstance(s, Experiment)]
                self.narrate(started)
                if not self.placed:  # nothing to wait for and nothing to start: conclude
                    return await self.conclude(self.search.conclusion())
                await self.collect()
        except RunEnded as end:  # `agent stop`, a budget: the status and exit code of one box
            await self.interrupt(str(end))
            await self.conclude(self.search.conclusion())
            self.status, self.reason = end.status, str(end)
            return end.exit_code

    def supervise(self) -> None:
        """Before each planning round, as before each one-box step: the supervisor's messages
        delivered and the budgets checked (Stopped or BudgetExhausted raised; at 80 % a
        budget_warning, which wraps the campaign up); new directives re-plan."""
        state = self.run.state
        before = (len(state.supervisor), state.warned_budget)
        self.supervision.deliver()
        self.supervision.check()  # its wrap-up words are for a model: the warning event is ours
        if (len(state.supervisor), state.warned_budget) != before:
            self.refresh()

    def refresh(self) -> None:
        """The planner under the directives in force and the budget warning, built as the
        one-box autopilot builds it each turn (run_planner), asked from now on."""
        self.planned = run_planner(self.run.state, self.config)
        self.search.planner = crossing(self.planned.planner, self.fleet.slots())  # as drive's
        self.answer()

    @property
    def planner(self) -> Planner:
        return self.search.planner

    def answer(self) -> None:
        """New supervisor messages answered as the one-box narration answers them
        ("Supervisor #N: ...")."""
        answered = directives.acknowledged(self.run.state.messages)
        said = [
            {"type": "text", "text": f"Supervisor #{seq}: {reply}."}
            for seq, reply in sorted(self.planned.replies.items())
            if seq not in answered
        ]
        if said:
            self.run.append("message", role="assistant", content=said)

    def narrate(self, started: list[str]) -> None:
        """A planning round that placed trials is one assistant message naming them: a step of
        the run, as a one-box autopilot turn is (max_steps counts them)."""
        if started:
            text = "Placed on the fleet: " + "; ".join(started)
            self.run.append("message", role="assistant", content=[{"type": "text", "text": text}])

    async def start(
        self, step: Experiment, attempt: int = 1, avoid: str | None = None, first: str = ""
    ) -> str:
        """Place one trial; a retry (`attempt` > 1) keeps the first try's name with -tryN. The
        trial's name and why."""
        if attempt == 1:
            self.trials += 1
            await self.write_todos(stage_of(step, self.h))
            words = tag(self.planner.space, step.config)
            first = f"{step.label}-L{self.trials:02d}"  # a crossover half: cross-P03-L21
            first += "" if words == "baseline" else f"-{words}"
        trial = try_name(first, attempt)
        self.placed[trial], self.attempts[trial] = step, attempt
        self.search.placed(step)  # in flight in the History the planner reads, until told
        config = launchable(self.config)  # checked before the cluster started (agent/fleet/run.py)
        groups = self.groups(step)
        spec = TrialSpec(trial, config, dict(step.config), groups, self.seed(trial))
        spec.deadlines = trial_deadlines(self.ctx, spec.flags, groups)  # learned where served
        self.run.append(
            "trial_started",
            trial=trial,
            purpose=step.purpose,
            why=step.why,
            flags=dict(step.config),
            levels=list(step.levels),
            fresh=step.fresh,
            attempt=attempt,
            **({"period": step.period, "base": dict(step.base or {})} if step.period else {}),
        )
        # a launch pair compares two launches on one box: the pairs after the first trial of
        # one go to its node (a retry of a lost one goes elsewhere, and the pairs follow it)
        pin = self.pair_node if step.purpose == "pair" and avoid is None else None
        if step.period and avoid is None:
            pin = self.swapped(step)
        self.fleet.submit(spec, avoid=avoid, attempt=attempt, pin=pin)
        return f"{trial} ({step.why})"

    def groups(self, step: Experiment) -> list[tuple[list[int], Any]]:
        """The levels grouped as the autopilot groups its run_benchmark calls."""
        out = []
        fixed = self.config.bench.requests_per_level
        for levels, requests in request_groups(step, self.planner.settings.levels, fixed):
            inp = RunBenchmarkInput(concurrency=list(levels), requests_per_level=requests)
            out.append((list(levels), workload_of(self.ctx, inp, None)))
        return out

    def seed(self, trial: str) -> int:
        return sweep_seed(self.config.bench.seed, self.run.id, trial)

    async def collect(self) -> None:
        """The next trial to come back: recorded, learned from, retried once if its node was
        lost. A stop or the minutes budget found while waiting ends the run (supervise)."""
        done = asyncio.ensure_future(self.fleet.next_done())
        watch = asyncio.ensure_future(
            self.interrupts.watch(lambda: reason_now(self.run, self.supervision.minutes()))
        )
        try:
            came, _ = await asyncio.wait((done, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not done.done():
                done.cancel()
        if done not in came:  # the trials stay placed: the fleet still has them
            with contextlib.suppress(asyncio.CancelledError):
                await done
            self.supervise()  # raises Stopped or BudgetExhausted, with the one-box reason
            return
        sub, out = done.result()
        record_cleanups(self.run, self.fleet)  # owed clean-ups a wedged node ran meanwhile
        trial = sub.spec.trial_id
        step = self.placed.pop(trial)
        if step.purpose == "pair" and out.node and out.end == "measured":
            self.pair_node = out.node
        if step.period and out.node and out.end == "measured":
            _, nodes = self.periods.setdefault(step.period, (self.candidate(step), {}))
            nodes[self.based(step)] = out.node
        self.attempts.pop(trial, None)
        retry = self.retries(out.end, sub.attempt)
        events = [] if retry else self.record(step, out)  # before trial_ended: its commit
        self.run.append("trial_ended", **ended_fields(out, sub.attempt))
        if retry:
            self.run.append("trial_retried", trial=trial, reason=out.reason, avoid=out.node)
            self.search.cancelled(step)  # placed again below: in flight after the others
            await self.start(step, sub.attempt + 1, out.node or sub.node, first_name(trial))
            return
        self.learn(step, out.end, out.reason, events)

    def based(self, step: Experiment) -> bool:
        """Whether `step` is the baseline's half of a crossover period."""
        return self.h.key(step.config) == self.h.key(self.planner.space.baseline)

    def candidate(self, step: Experiment) -> str:
        """The key of the configuration a crossover period's half proves against the baseline."""
        return self.h.key(step.base if self.based(step) and step.base else step.config)

    def swapped(self, step: Experiment) -> str | None:
        """Where a crossover's half runs: in a crossover's second period, on the box its other
        side had in the first (that candidate's latest whole period, when an odd number of
        them is whole - as conclude.cross_periods pairs them); else where Ray places it."""
        mine = self.candidate(step)
        whole = [nodes for key, nodes in self.periods.values() if key == mine and len(nodes) == 2]
        return whole[-1][not self.based(step)] if len(whole) % 2 else None

    def held(self) -> int:
        """The boxes held for a crossover period half ended: its other half still runs, and the
        next period's swap needs both boxes."""
        return sum(
            1
            for step in self.placed.values()
            if step.period and len(self.periods.get(step.period, ("", {}))[1]) == 1
        )

    def retries(self, end: TrialEnd, attempt: int) -> bool:
        """Whether a trial that ended so runs again: lost with its node, tries left."""
        return runs_again(end, attempt, self.fleet.config.retries)

    def learn(
        self, step: Experiment, end: TrialEnd, reason: str, events: list[dict[str, Any]]
    ) -> None:
        """A trial that came back, into the History: from its outcome and the `benchmark`
        events recorded for it - live, and on a resume from the log (rebuild)."""
        if end != "measured" and not events:  # it did not start, or started and was not measured
            failed = NotStarted(reason) if end == "not_started" else Broken(reason)
            self.search.tell(step, failed)
            return
        slo = slo_of(self.config)
        sweeps = []
        for event in events:  # this trial's sweep, one event per group of levels
            per = per_level_of(event)
            ok_at = slo_ok_of(event, self.run.path, slo) if slo is not None else None
            sweeps.append(Sweep(per, ok_at, (str(event["id"]),)))
        label = str(events[0].get("label") or "") if events else ""
        self.search.tell(step, Measured(tuple(sweeps), label))

    def rebuild(self, events: list[dict[str, Any]]) -> None:
        """A resumed run's History from its log (agent/fleet/resume.replay, with this session's
        `learn` and `retries`); the trials it left unfinished kept to place again."""
        self.trials, self.unfinished = replay(events, self.learn, self.retries)
        self.crossed(events)

    def crossed(self, events: list[dict[str, Any]]) -> None:
        """The boxes a resumed run's crossover halves were measured on (`periods`), from its
        log: a crossover's second period placed after the resume is swapped as it would have
        been."""
        started = {str(e["trial"]): e for e in events if e.get("type") == "trial_started"}
        for e in events:
            first = started.get(str(e.get("trial")))
            if e.get("type") != "trial_ended" or first is None or not first.get("period"):
                continue
            if e.get("node") and end_of(e) == "measured":
                step = experiment_of(first)
                _, nodes = self.periods.setdefault(step.period, (self.candidate(step), {}))
                nodes[self.based(step)] = str(e["node"])

    async def place_unfinished(self) -> None:
        """On resume: each trial that never came back placed again as its next attempt
        (`trial_retried`, then `trial_started <first>-tryN`), after killing what it left
        (reap_left)."""
        for trial, step, attempt in self.unfinished:
            cleanup = await self.reap_left(trial)
            self.run.append(
                "trial_retried", trial=trial, reason=RESUMED, avoid=None, cleanup=cleanup
            )
            print(f"fleet: {trial}: {RESUMED}; {cleanup}", file=sys.stderr)
            await self.start(step, attempt + 1, None, first_name(trial))
        self.unfinished = []

    async def reap_left(self, trial: str) -> str:
        """The server a trial of an earlier session left, killed (`reap_left`)."""
        return await reap_left(self.run, self.fleet, trial)

    async def interrupt(self, reason: str) -> None:
        """A stop or a budget: the trials in flight cancelled and their servers killed (the
        fleet closed: RayFleet.close), each recorded as ended with the reason and what its
        clean-up did - not learned from: a resume places them again."""
        if not self.placed:
            return
        done = await self.fleet.close() or {}
        for trial, step in self.placed.items():
            self.search.cancelled(step)
            self.run.append(
                "trial_ended",
                trial=trial,
                ok=False,
                end="interrupted",
                reason=reason,
                interrupted=True,
                cleanup=done.get(trial) or CANCELLED,
                attempt=self.attempts.get(trial, 1),
            )
        self.placed.clear()
        self.attempts.clear()

    def record(self, step: Experiment, out: TrialOutcome) -> list[dict[str, Any]]:
        """One result file, ledger line and `benchmark` event per group of levels (as run_trial
        records its trials: tools/trial_outcome.py); the `benchmark` events."""
        label = first_name(out.trial_id)
        done = record_outcome(self.ctx, out, dict(step.config), self.groups(step), label)
        ids = {data["id"] for _, data in done}
        return [e for e in self.run.state.results if e["id"] in ids]

    async def write_todos(self, stage: str, done: bool = False) -> None:
        items = todos(self.planner, self.h, stage, done=done)
        if items != self.run.state.todos:
            await self.tools.call(self.ctx, "todowrite", {"todos": items})

    async def conclude(self, step: Finish) -> int:
        """The autopilot's conclusion, as on one box: its narration, then compare and recommend
        called as tools (run_planner.conclusion_calls); the report follows (agent/fleet/run.py)."""
        text = narrate.conclusion(self.planner.space, step, self.h, self.planner)
        self.run.append("message", role="assistant", content=[{"type": "text", "text": text}])
        await self.write_todos("report")
        for name, inp in conclusion_calls(self.planned, self.h, step, self.run.state):
            result, _ = await self.tools.call(self.ctx, name, inp)
            if result.is_error:
                print(f"fleet: {name}: {result.text.splitlines()[0]}", file=sys.stderr)
        await self.write_todos("report", done=True)
        return 0


def crossing(planner: Planner, slots: int) -> Planner:
    """The planner a fleet asks: with two boxes or more its winner is proven in crossovers."""
    return replace(planner, settings=replace(planner.settings, crossover=slots >= 2))


def record_cleanups(run: Run, fleet: Any, logged: bool = True) -> None:
    """The owed clean-ups the backend settled (RayFleet.settled: a wedged node's, done when it
    answered again, or LEFT at the run's end), each recorded once: `trial_cleaned {trial, node,
    box, cleanup}`, `trial_left {trial, node, box, reason, pgid, port, kill}` - a LEFT one said
    on the terminal too, with the command that kills it by hand. `logged` False: said only (a
    model's run, whose log is closed when its fleet is)."""
    settled = getattr(fleet, "settled", None)
    for cleaned in settled() if settled is not None else []:
        if cleaned.left:
            line = f"fleet: {cleaned.trial}: {cleaned.text}; kill it: {cleaned.kill}"
            print(line, file=sys.stderr)
        elif not logged:
            print(f"fleet: {cleaned.trial}: {cleaned.text}", file=sys.stderr)
        if logged:
            kind = "trial_left" if cleaned.left else "trial_cleaned"
            run.append(kind, **cleaned.event())


def secured(run: Run, fleet: Any) -> str:
    """Once the fleet is connected: the token of a cluster it started is scrubbed from all the
    run writes (it is never written, and stays so), and the line on the cluster's
    authentication is said on the terminal (and in fleet_started); that line. The processes of
    dead controllers' lab clusters killed as this one started are said too (reap_cluster)."""
    token = getattr(fleet, "token", None)
    if token:
        run.scrub.values = [*run.scrub.values, token]
    reaped = getattr(getattr(fleet, "local", None), "reaped", None)
    if reaped:
        words = f"killed {len(reaped)} processes of a dead controller's cluster"
        print(f"fleet: {words}", file=sys.stderr)
    auth = str(getattr(fleet, "auth", "") or "")
    if auth:
        print(f"fleet: {auth}", file=sys.stderr)
    return auth
