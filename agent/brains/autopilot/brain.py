"""The autopilot brain: the planner's next step as the tool calls a model would make.

A pure function of (the run's fold, the config): every turn it rebuilds the History from the
events, asks the planner, and emits todowrite / start_server / run_benchmark / compare / recommend
/ kill_server blocks with a short narration - so a resumed or replayed run continues exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from statistics import median
from typing import Any

from agent.brains.autopilot import directives, narrate, pipeline, pipeline_verdict
from agent.brains.autopilot.ask_tell import AskTell
from agent.brains.autopilot.conclude import DUET_ROUNDS
from agent.brains.autopilot.engine_limits import space_of
from agent.brains.autopilot.history import History, Objective
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
from agent.brains.autopilot.planner import Experiment, Finish, Planner, Settings
from agent.brains.autopilot.reading import Reading
from agent.brains.autopilot.steps import request_groups
from agent.brains.autopilot.todo_plan import stage_of, todos
from agent.brains.base import Turn, TurnRequest
from state.fold import RunState, measured_pace
from state.run import read_state
from tools.domain.config import Config
from tools.domain.space import SearchError
from tools.servers.profiles import engine_for
from tools.servers.speculation import speculative_flags

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


def launches_that_fit(state: RunState, levels: Sequence[int]) -> int | None:
    """After the warning on the minutes budget: the launches the minutes it left can pay for,
    less those started since; None without such a warning. A wrap-up launch is one start and one
    sweep of `levels` (a re-validation, half a launch pair): the run's pace per launch up to the
    warning, scaled by what such a launch measured against the run's average one. The pace alone
    counts exploring's repeated sweeps in every launch: a 45-minute real-vLLM campaign sized its
    wrap-up at 91 s a launch, its launches took 49 s, and it ended with one launch pair and five
    minutes unused (docs/engines.md). A wrap-up that starts a launch it cannot end runs the budget
    out (exit 3, the re-validation cut mid-sweep) where concluding at once would have finished."""
    w = state.minutes_warning
    if w is None or w.launches == 0 or w.used <= 0:
        return None
    pace = w.used * 60 / w.launches * wrap_up_share(state, levels)
    return int((w.of - w.used) * 60 // pace) - (state.launches_started - w.launches)


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


class Campaign:
    """One turn's view of the campaign. `run_path`: the run folder, where the result files are
    found by id (None: at the paths the tools wrote)."""

    def __init__(self, state: RunState, config: Config, run_path: Path | None = None) -> None:
        self.state, self.config = state, config
        self.server = config.server.name
        self.space = space_of(config)
        self.levels = tuple(config.bench.concurrency)
        engine = engine_for(config)
        speculative = speculative_flags(engine, self.space.flags, self.space.requires)
        self.directives, self.replies = directives.read(state.supervisor, speculative, self.levels)
        obj = config.objective
        objective = Objective(obj.kind, obj.level)
        if self.directives.focus is not None:
            objective = Objective("level", self.directives.focus)
        self.objective = objective
        settings = Settings(
            levels=self.levels,
            objective=objective,
            excluded=self.directives.skip,
            wrap_up=self.directives.wrap_up or state.warned_budget,
            launches_fit=launches_that_fit(state, self.levels),
            target_noise=obj.precision,
            requests_per_level=config.bench.requests_per_level,
            min_level_s=engine.level_minimum(config.bench.min_level_s),
            max_tokens=config.bench.max_tokens,
            side_by_side=config.server.side_by_side,
        )
        self.planner = Planner(self.space, settings)
        self.h: History = observe(state, self.space, self.server, run_path, slo_of(config))
        self.search = AskTell(self.planner, self.h)  # told through the run's events (observe)
        self.search.resume()  # the experiment the server up was launched for, still in flight
        self.blocks: list[dict[str, Any]] = []
        self.calls = 0

    # --- building the turn ---------------------------------------------------------------------
    def say(self, text: str) -> None:
        self.blocks.append({"type": "text", "text": text})

    def call(self, name: str, inp: dict[str, Any]) -> None:
        self.calls += 1
        block_id = f"toolu_ap_{self.state.steps + 1:03d}_{self.calls}"
        self.blocks.append({"type": "tool_use", "id": block_id, "name": name, "input": inp})

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
        return Turn(content=self.blocks, stop_reason=stop, model="autopilot")

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
            self.call("start_server", start)
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
            self.call("bash", probe)
            return
        self.say(narrate.conclusion(self.space, step, self.h, self.planner))
        if step.best is None:
            self.call("kill_server", {})
            return
        for ids in compare_sets(self.h, self.planner, step):
            self.call("compare", {"results": ids, "baseline": ids[0]})
        floor = self.planner.read(self.h).floors[0]
        why = pipeline_verdict.with_drafter(step.why, self.state, self.config, self.h, floor)
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
        if self.objective != Objective(self.config.objective.kind, self.config.objective.level):
            inp["objective"] = {"kind": self.objective.kind, "level": self.objective.level}
        self.call("recommend", inp)
        self.call("kill_server", {})

    def summary(self) -> str:
        return narrate.summary(self.state, self.h, self.planner)


def reading_of_run(run_path: Path) -> Reading:
    """What the autopilot reads from a run folder - its History under the run's config and the
    supervisor's directives: the noise floor and ratios it plans with and prints."""
    state = read_state(run_path)
    campaign = Campaign(state, run_config(state, run_path), run_path)
    return campaign.planner.read(history_of_run(run_path))  # measured by hand too


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
