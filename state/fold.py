"""Everything but the log itself is a fold over the events: resume, watch and replay share this.

`RunState.apply(event)` is called for every event, in order, by whoever reads the log: the loop as
it writes (so its view is always the log's view), `resume` on start-up, `watch` as it tails.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import median
from typing import Any, NamedTuple

from state.event_types import KNOWN, event_problem
from state.events import Event, epoch
from state.fleet import FleetState
from state.launches import Launches

STUB = "[output pruned by compaction; full text: {path}]"


@dataclass
class Spend:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    thinking_tokens: int = 0  # part of output_tokens (billed as output), shown apart
    usd: float = 0.0
    calls: int = 0

    def add(self, usage: dict[str, Any] | None, usd: float | None) -> None:
        for key, value in (usage or {}).items():
            if hasattr(self, key) and isinstance(value, int):
                setattr(self, key, getattr(self, key) + value)
        self.usd += usd or 0.0
        self.calls += 1


class MinutesWarning(NamedTuple):
    """The minutes budget's warning: the minutes used and the budget, and how many launches,
    benchmarks and server starts the run had made by then - the pace at which the autopilot's
    wrap-up sizes what still fits (agent/brains/autopilot/brain.py)."""

    used: float
    of: float
    launches: int
    results: int
    readies: int


def measured_pace(
    state: RunState, results: int | None = None, readies: int | None = None
) -> tuple[list[float], dict[int, list[float]]]:
    """What the run's launches and sweeps took, from its first `results` benchmarks and `readies`
    server starts (None: all): each start's seconds to ready (those measured) and, per level, each
    benchmark's seconds there - what the wrap-up sizes its launches by and the proof's reserve is
    estimated from."""
    durations: dict[int, list[float]] = {}
    for result in state.results[:results]:
        for level, point in (result.get("points") or {}).items():
            if point.get("duration"):
                durations.setdefault(int(level), []).append(float(point["duration"]))
    return [s for s in state.ready_seconds[:readies] if s > 0], durations


def benchmark_overhead(state: RunState) -> float:
    """The run's benchmarks' wall seconds over their levels' measured seconds, at least 1 (1
    where none is known): real vLLM's were 1.10 (stop 55), where the points' durations alone
    left the proof reserve 0.7 minutes short."""
    measured = sum(m for _, m in state.benchmark_walls)
    if measured <= 0:
        return 1.0
    return max(1.0, sum(w for w, _ in state.benchmark_walls) / measured)


def sweep_seconds(state: RunState, levels: Iterable[int] | None = None) -> float | None:
    """One sweep of `levels` (None: every level the run measured) on the wall clock, at the
    run's pace: the median seconds each level took, times benchmark_overhead. None where a
    level was never measured (or none was) - what the proof reserve and a duet's declared
    rounds are sized by."""
    _, durations = measured_pace(state)
    wanted = list(durations) if levels is None else list(levels)
    if not wanted or any(level not in durations for level in wanted):
        return None
    return sum(median(durations[level]) for level in wanted) * benchmark_overhead(state)


@dataclass
class RunState:
    run_id: str = ""
    goal: str = ""
    brain: str = ""
    model: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    started_ts: str = ""
    replay_of: str | None = None  # `agent replay`'s runs: the recording it replayed
    messages: list[dict[str, Any]] = field(default_factory=list)
    todos: list[dict[str, Any]] = field(default_factory=list)
    spend: Spend = field(default_factory=Spend)
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)  # running now
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)  # running now
    # the latest launch of each name, running or ended: its log stays worth reading
    launched: dict[str, dict[str, Any]] = field(default_factory=dict)
    job_runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> started, ended
    results: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    last_text: str = ""
    current_tool: dict[str, Any] | None = None
    warned_budget: bool = False
    minutes_warning: MinutesWarning | None = None  # None: no such warning
    launches_started: int = 0  # server_started events, every session's
    ready_seconds: list[float] = field(default_factory=list)  # each server_ready's, in order
    # each run_benchmark call's (wall seconds, its levels' measured seconds): what a benchmark
    # costs beyond its points' durations (client start, warm-up requests, the cache reset)
    benchmark_walls: list[tuple[float, float]] = field(default_factory=list)
    compactions: int = 0
    supervisor: list[dict[str, Any]] = field(default_factory=list)
    finished: dict[str, Any] | None = None
    stop_requested: bool = False
    inbox_done: set[str] = field(default_factory=set)  # supervisor messages already delivered
    guard_allow: list[str] = field(default_factory=list)  # bash rules from `agent allow`
    minutes_before: float = 0.0  # wall minutes spent by earlier sessions of this run
    session_ts: str = ""  # when this session began: the latest run_started or run_resumed
    last_seq: int = 0
    last_context_tokens: int = 0  # prompt size of the latest model call, for compaction
    last_results: list[dict[str, Any]] = field(default_factory=list)  # the latest turn's results
    # each tool call's typed result (a tool_result event's `data`), by call id: what code reads,
    # apart from the text the model reads (which compaction may prune)
    tool_data: dict[str, dict[str, Any]] = field(default_factory=dict)
    # what the autopilot made a call for (a `planned` event: a launch's experiment), by call id
    plans: dict[str, dict[str, Any]] = field(default_factory=dict)
    fleet: FleetState | None = None  # a fleet run's boxes and trials (state/fleet.py)
    # every launch: its flags, purpose, outcome, host or box, sweeps (state/launches.py)
    launches: Launches = field(default_factory=Launches)
    # events of a type no writer writes (seq, type), skipped: the readers say so (skipped_note)
    skipped: list[tuple[int, str]] = field(default_factory=list)

    def apply(self, event: Event) -> None:
        self.last_seq = event["seq"]
        kind = event["type"]
        if not isinstance(kind, str) or kind not in KNOWN:
            self.skipped.append((event["seq"], kind if isinstance(kind, str) else repr(kind)))
            return
        problem = event_problem(event)
        if problem is not None:  # a hand edit the fold would act on: refused, never folded
            raise BadEvent(f"event seq {event['seq']} ({kind}): {problem}")
        if self.fleet is None and event["type"] == "fleet_started":
            self.fleet = FleetState()
        if self.fleet is not None:
            self.fleet.apply(event)
        self.launches.apply(event)
        handler = getattr(self, "_on_" + event["type"], None)
        if handler is not None:
            handler(event)

    # --- run lifecycle -------------------------------------------------------------------------
    def _on_run_started(self, e: Event) -> None:
        self.run_id, self.goal = e.get("run_id", ""), e["goal"]
        self.brain, self.model = e.get("brain", ""), e.get("model", "")
        self.config, self.limits = e.get("config") or {}, dict(e.get("limits") or {})
        self.started_ts = self.session_ts = e["ts"]
        self.replay_of = e.get("replay_of")

    def _on_run_resumed(self, e: Event) -> None:
        self.finished = None
        self.stop_requested = False
        self.session_ts = e["ts"]

    def minutes_used(self, at: float) -> float:
        """The run's wall minutes by epoch second `at`, as its minutes budget counts them: the
        earlier sessions' and, while one runs, this one's so far."""
        start = epoch(self.session_ts)
        if self.finished or start is None:
            return self.minutes_before
        return self.minutes_before + max(at - start, 0.0) / 60

    def _on_run_finished(self, e: Event) -> None:
        self.finished = {k: e.get(k) for k in ("status", "exit_code", "reason")}
        self.current_tool = None
        self.minutes_before += e.get("session_minutes", 0.0)

    def _on_limits_changed(self, e: Event) -> None:
        self.limits.update(e["limits"])
        self.warned_budget = False
        self.minutes_warning = None
        self.inbox_done.add(e.get("inbox_id", ""))

    def _on_budget_warning(self, e: Event) -> None:
        self.warned_budget = True
        if e.get("limit") == "max_minutes":
            self.minutes_warning = MinutesWarning(
                float(e["used"]),
                float(e["of"]),
                self.launches_started,
                len(self.results),
                len(self.ready_seconds),
            )

    def _on_supervisor_message(self, e: Event) -> None:
        self.supervisor.append({"seq": e["seq"], "text": e["text"]})
        self.inbox_done.add(e.get("inbox_id", ""))
        self._user_blocks().append({"type": "text", "text": f"[supervisor] {e['text']}"})

    def _on_guard_allowed(self, e: Event) -> None:
        self.guard_allow.append(e["rule"])
        self.inbox_done.add(e.get("inbox_id", ""))
        text = f"[supervisor] bash commands matching {e['rule']} are now allowed outright"
        self._user_blocks().append({"type": "text", "text": text})

    def _on_stop_requested(self, e: Event) -> None:
        self.stop_requested = True
        self.inbox_done.add(e.get("inbox_id", ""))

    # --- the conversation ----------------------------------------------------------------------
    def _on_message(self, e: Event) -> None:
        role, content = e["role"], e["content"]
        if role == "assistant":
            self.steps += 1
            self.spend.add(e.get("usage"), e.get("cost_usd"))
            usage = e.get("usage") or {}
            self.last_context_tokens = sum(
                usage.get(k) or 0
                for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            ) + (usage.get("output_tokens") or 0)
            texts = [b["text"] for b in content if b.get("type") == "text" and b["text"].strip()]
            if texts:
                self.last_text = texts[-1]
            self.messages.append({"role": "assistant", "content": content})
            self.last_results = []
        else:
            self._user_blocks().extend(content)

    def _on_tool_call(self, e: Event) -> None:
        self.current_tool = {"id": e["id"], "name": e["name"], "input": e["input"], "ts": e["ts"]}

    def _on_tool_result(self, e: Event) -> None:
        self.current_tool = None
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": e["id"],
            "content": e["text"],
        }
        if e.get("is_error"):
            block["is_error"] = True
        self._user_blocks().append(block)
        keep = ("id", "name", "text", "is_error", "data")
        self.last_results.append({k: e.get(k) for k in keep})
        if isinstance(e.get("data"), dict) and e["data"]:
            self.tool_data[str(e["id"])] = e["data"]
        if e.get("name") == "run_benchmark" and not e.get("is_error") and e.get("duration_s"):
            done = self.results[-1] if self.results else {}
            if done.get("id") == (e.get("data") or {}).get("id"):
                points = (done.get("points") or {}).values()
                measured = sum(float(p.get("duration") or 0.0) for p in points)
                if measured > 0:  # a recording made before points carried durations: nothing
                    self.benchmark_walls.append((float(e["duration_s"]), measured))

    def _on_planned(self, e: Event) -> None:
        self.plans[str(e["call"])] = {k: v for k, v in e.items() if k not in ("seq", "ts", "type")}

    def _user_blocks(self) -> list[dict[str, Any]]:
        """The open user message: tool results and notes gather there until the next model turn."""
        if not self.messages or self.messages[-1]["role"] != "user":
            self.messages.append({"role": "user", "content": []})
        blocks: list[dict[str, Any]] = self.messages[-1]["content"]
        return blocks

    def _on_compaction(self, e: Event) -> None:
        self.compactions += 1
        self.spend.add(e.get("usage"), e.get("cost_usd"))
        if e.get("messages") is not None:  # a summary: the conversation is rebuilt
            self.messages = e["messages"]
        for tool_use_id, path in (e.get("pruned") or {}).items():
            for message in self.messages:
                for block in message["content"]:
                    if block.get("type") == "tool_result" and block["tool_use_id"] == tool_use_id:
                        block["content"] = STUB.format(path=path)

    # --- what the tools did --------------------------------------------------------------------
    def _on_todo(self, e: Event) -> None:
        # an item without a priority (a hand edit) gets todowrite's default; the others as written
        self.todos = [t if "priority" in t else {**t, "priority": "medium"} for t in e["todos"]]

    def _on_server_started(self, e: Event) -> None:
        self.launches_started += 1
        self.servers[e["name"]] = {k: v for k, v in e.items() if k not in ("seq", "type")}
        self.launched[e["name"]] = self.servers[e["name"]]

    def _on_server_ready(self, e: Event) -> None:
        self.ready_seconds.append(float(e.get("seconds") or 0.0))
        if e["name"] in self.servers:
            self.servers[e["name"]]["ready"] = True

    def _on_server_adopted(self, e: Event) -> None:
        """A resume found the server still serving (agent/recover.py): it is ready, as before."""
        if e["name"] in self.servers:
            self.servers[e["name"]]["ready"] = True
            self.servers[e["name"]]["adopted_seq"] = e["seq"]

    def _on_server_stopped(self, e: Event) -> None:
        self.servers.pop(e["name"], None)

    _on_server_killed = _on_server_stopped

    _on_server_failed = _on_server_stopped  # why it failed: the run's launches (self.launches)

    def _on_job_started(self, e: Event) -> None:
        self.jobs[e["name"]] = {k: v for k, v in e.items() if k not in ("seq", "type")}
        self.job_runs[e["name"]] = {"started": e, "ended": None}

    def _on_job_ended(self, e: Event) -> None:
        self.jobs.pop(e["name"], None)
        if e["name"] in self.job_runs:
            self.job_runs[e["name"]]["ended"] = e

    def _on_benchmark(self, e: Event) -> None:
        self.results.append({k: v for k, v in e.items() if k not in ("seq", "type")})


class BadEvent(ValueError):
    """An event that no writer could have written (an edited log) with a field the fold acts on:
    a budget of "inf" or -3 steps, a pid of -1, a todo list of strings (state/event_types.py).
    Folding it would change what the run does, so it is refused in one line, never folded."""


def fold(events: list[Event]) -> RunState:
    state = RunState()
    for event in events:
        state.apply(event)
    return state
