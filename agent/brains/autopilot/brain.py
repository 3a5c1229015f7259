"""The autopilot brain: the planner's next step as the tool calls a model would make.

A pure function of (the run's fold, the config): every turn it rebuilds the History from the
events, asks the planner, and emits todowrite / start_server / run_benchmark / compare / recommend
/ kill_server blocks with a short narration - so a resumed or replayed run continues exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.brains.autopilot import directives, narrate, physics_stop, pipeline, pipeline_verdict
from agent.brains.autopilot.ask_tell import AskTell
from agent.brains.autopilot.conclude import DUET_ROUNDS
from agent.brains.autopilot.history import History
from agent.brains.autopilot.launch_plan import plan_record
from agent.brains.autopilot.observe import (
    SIDE,
    busy_port,
    history_of_run,
    interrupted,
    observe,
    run_config,
    slo_of,
    tool_exchanges,
)
from agent.brains.autopilot.planner import Experiment, Finish
from agent.brains.autopilot.reading import Reading
from agent.brains.autopilot.run_planner import conclusion_calls, run_planner
from agent.brains.autopilot.steps import request_groups
from agent.brains.autopilot.todo_plan import stage_of, todos
from agent.brains.base import Turn, TurnRequest
from state.fold import RunState
from state.run import read_state
from tools.domain.config import Config
from tools.domain.space import SearchError

MAX_PORT_MOVES = 20


class AutopilotBrain:
    name = "autopilot"

    def __init__(self, config: Config | None = None) -> None:
        self.config = config

    async def next_turn(self, request: TurnRequest) -> Turn:
        config = request.config if request.config is not None else self.config
        try:
            campaign = Campaign(request.state, config)
        except SearchError as err:
            text = f"The search space is not usable: {err}. Fix [search] in the config."
            return Turn(
                content=[{"type": "text", "text": text}], stop_reason="end_turn", model="autopilot"
            )
        if request.purpose == "summary":
            return Turn(
                content=[{"type": "text", "text": campaign.summary()}],
                stop_reason="end_turn",
                model="autopilot",
            )
        # [pipeline]: its long jobs come first (pipeline.py), then the campaign
        return pipeline.turn(request.state, config) or campaign.turn()


class Campaign:
    """One turn's view of the campaign. `run_path`: the run folder, where the result files are
    found by id (None: at the paths the tools wrote)."""

    def __init__(self, state: RunState, config: Config, run_path: Path | None = None) -> None:
        self.state, self.config = state, config
        self.server = config.server.name
        self.levels = tuple(config.bench.concurrency)
        self.planned = run_planner(state, config)  # under the directives in force
        self.planner, self.replies = self.planned.planner, self.planned.replies
        self.space, self.objective = self.planner.space, self.planned.objective
        self.h: History = observe(state, self.space, self.server, run_path, slo_of(config))
        self.search = AskTell(self.planner, self.h)  # told through the run's events (observe)
        self.search.resume(self.launch_plan())  # why the server up was started, still in flight
        self.blocks: list[dict[str, Any]] = []
        self.plans: dict[str, dict[str, Any]] = {}  # a start_server call's experiment, by its id
        self.calls = 0

    def launch_plan(self) -> dict[str, Any] | None:
        """The `planned` event of the start_server call that launched the run's server last, as
        the run's launches record it (None: not recorded - a log from before those events, or a
        start made by hand)."""
        mine = self.state.launches.record().of(self.server)
        return mine[-1].plan if mine else None

    # --- building the turn ---------------------------------------------------------------------
    def say(self, text: str) -> None:
        self.blocks.append({"type": "text", "text": text})

    def call(self, name: str, inp: dict[str, Any]) -> str:
        self.calls += 1
        block_id = f"toolu_ap_{self.state.steps + 1:03d}_{self.calls}"
        self.blocks.append({"type": "tool_use", "id": block_id, "name": name, "input": inp})
        return block_id

    def write_todos(self, items: list[dict[str, Any]]) -> None:
        items = pipeline.finished_todos(self.state, self.config) + items
        if items != self.state.todos:
            self.call("todowrite", {"todos": items})

    def turn(self) -> Turn:
        for seq, reply in sorted(self.replies.items()):
            if seq not in directives.acknowledged(self.state.messages):
                self.say(f"Supervisor #{seq}: {reply}.")
        exchanges = [
            (name, block)
            for name, _, block in tool_exchanges(self.state)
            if name not in pipeline.own_tools(self.config)  # the jobs before the campaign
        ]
        recommended = any(n == "recommend" and not b.get("is_error") for n, b in exchanges)
        cut = any(n == "recommend" and interrupted(b) for n, b in exchanges)
        if not exchanges:
            self.start()
        elif narrate.concluded(self.state) and (recommended or not cut):
            final = todos(self.planner, self.h, None, done=True)
            if self.state.todos == pipeline.finished_todos(self.state, self.config) + final:
                self.say(narrate.closing(self.search, recommended))
                return self.done("end_turn")
            self.write_todos(final)
        else:
            step = self.search.suggest()
            if isinstance(step, Finish):
                self.finish(step)
            else:
                self.experiment(step)
        return self.done("tool_use")

    def done(self, stop: str) -> Turn:
        if not self.blocks:
            self.say("...")
        return Turn(content=self.blocks, stop_reason=stop, model="autopilot", plans=self.plans)

    # --- the stages ------------------------------------------------------------------------------
    def start(self) -> None:
        self.say(narrate.opening(self.planner, self.config))
        self.write_todos(todos(self.planner, self.h, "cleanup"))
        self.call("kill_server", {})

    def experiment(self, step: Experiment) -> None:
        h = self.h
        self.write_todos(todos(self.planner, h, stage_of(step, h)))
        last = self.state.last_results
        crash = next(
            (r for r in last if r.get("name") == "start_server" and r.get("is_error")), None
        )
        if crash is not None and not busy_port({"data": crash.get("data") or {}}):
            self.say(narrate.crash(crash))
        failed = next(
            (r for r in last if r.get("name") == "run_benchmark" and r.get("is_error")), None
        )
        if failed is not None:
            self.say(
                f"The benchmark failed: {(str(failed.get('text', '')).splitlines() or [''])[0]} - "
                "measuring again (a second failure on this server relaunches it)."
            )
        launch = self.search.needs_launch(step)
        if launch:
            self.say(narrate.launch(self.space, step, len(h.launches) + 1))
            start: dict[str, Any] = {"name": self.server, "flags": dict(step.config)}
            busy, port = self.busy_ports(), self.config.server.port
            if busy >= MAX_PORT_MOVES:
                self.say(
                    f"{narrate.CONCLUSION} no recommendation - {busy} ports from {port} up "
                    "are all taken by processes that are not ours; free one and resume."
                )
                self.call("kill_server", {})
                return
            if busy:
                self.say(
                    f"Port {port + busy - 1} is taken by a process that is not ours: this "
                    f"server goes to {port + busy}."
                )
                start["port"] = port + busy
            call = self.call("start_server", start)
            self.plans[call] = plan_record(step, self.planner.settings)  # why, in the record
            stop = physics_stop.spent(self.planner.read(h))  # and the stop signal, when on
            if stop is not None:
                self.plans[call]["physics"] = stop
                if not any(p.get("physics") for p in self.state.plans.values()):
                    self.say(f"Exploring stops but for speculation: {stop}.")
            return
        if step.purpose == "duet":
            self.duet(step)
            return
        self.say(narrate.measure(self.space, step, h))
        number = h.running + 1 if h.running is not None else 0
        words = narrate.tag(self.space, step.config)
        label = f"{step.purpose}-L{number:02d}" + ("" if words == "baseline" else f"-{words}")
        fixed = self.config.bench.requests_per_level
        for levels, requests in request_groups(step, self.levels, fixed):
            inp: dict[str, Any] = {
                "server": self.server,
                "concurrency": list(levels),
                "label": label,
            }
            if requests is not None:
                inp["requests_per_level"] = requests
            self.call("run_benchmark", inp)

    def duet(self, step: Experiment) -> None:
        """The winner is up on a fresh launch: start the baseline beside it (SIDE, on the next
        port), then the duet, then stop the baseline's server."""
        base = step.base or self.space.baseline
        if self.h.side.launch is None:
            self.say(narrate.side_launch(self.space, base))
            port = self.config.server.port + self.busy_ports() + 1
            self.call("start_server", {"name": SIDE, "flags": dict(base), "port": port})
            return
        self.say(narrate.duet(self.space, step))
        inp: dict[str, Any] = {"a": SIDE, "b": self.server, "concurrency": list(self.levels)}
        inp |= {"max_rounds": DUET_ROUNDS, "label": narrate.tag(self.space, step.config)[:40]}
        if self.config.bench.requests_per_level is not None:
            inp["requests_per_level"] = self.config.bench.requests_per_level
        self.call("duet", inp)
        self.call("kill_server", {"name": SIDE})

    def busy_ports(self) -> int:
        """How many ports were found taken by strangers: each start moves one port up."""
        return sum(
            1
            for name, _, block in tool_exchanges(self.state)
            if name == "start_server" and block.get("is_error") and busy_port(block)
        )

    def finish(self, step: Finish) -> None:
        self.write_todos(todos(self.planner, self.h, "report"))
        probe = pipeline_verdict.acceptance_probe(self.state, self.config)
        if probe is not None:  # first the trained drafter's acceptance, from its server's log
            self.say("Reading the acceptance length the server measured for the trained drafter.")
            self.call("read_log", probe)
            return
        self.say(narrate.conclusion(self.space, step, self.h, self.planner))
        for name, inp in conclusion_calls(self.planned, self.h, step, self.state):
            self.call(name, inp)
        self.call("kill_server", {})

    def summary(self) -> str:
        return narrate.summary(self.state, self.h, self.planner)


def reading_of_run(run_path: Path) -> Reading:
    """What the autopilot reads from a run folder - its History under the run's config and the
    supervisor's directives: the noise floor and ratios it plans with and prints."""
    state = read_state(run_path)
    campaign = Campaign(state, run_config(state, run_path), run_path)
    return campaign.planner.read(history_of_run(run_path))  # measured by hand too
