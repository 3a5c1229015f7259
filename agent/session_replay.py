"""`agent replay`: run the loop again against a recording and check that nothing drifted.

Model turns come from the recording - through the real SDK for Claude sessions (the replay brain),
or from the autopilot again, which is deterministic. Tool results and the events the tools wrote
(servers, benchmarks, todos) are fed back from the recording, so a replay needs no GPU, no host
and no network. With --check, the replayed events must equal the recorded ones.

What the supervisor did is fed back too: `agent say`, `stop` and `budget` messages are delivered
at the step where the recording has them, and a run of several sessions (ended by a budget, a
stop or a crash, then resumed) is replayed session by session: the recorded session ends where it
ended, and the next one starts as `agent resume` starts it (a fresh brain: its first request is
whole, not a delta). What the sessions' clean-up and `agent resume` wrote outside tool calls
(servers killed or adopted) is fed back; calls a crash left unstarted get recover's answer and no
tool_call, as in the run; the minutes budget warns and ends where it did (recorded_minutes).
A run whose last model call failed with no exchange recorded for it (a stream cut for good, the
API unavailable past the wait, a refusal where refusals were not recorded) ends there as
recorded. --max-steps cuts the replay from outside the loop (its
budgets stay the recorded ones), and only the replayed part is compared. A fleet run (one with a
`fleet_started`) is not replayed: one line, exit 2.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.brains.base import Brain
from agent.brains.replay import DriftError, Faults, ReplayBrain, unified
from agent.ends import RunEnded
from agent.loop import Agent
from agent.session import Limits, config_of, make_agent, make_brain, start
from state.events import Event, read_events
from state.run import Run
from tools.base import ToolBox, ToolContext, ToolResult
from tools.domain.config import Config, explain

FED = (
    "supervisor_message",
    "stop_requested",
    "limits_changed",
    "guard_allowed",
)  # what drain() delivers
# what a session's clean-up (wrap_up kills the servers) and `agent resume` (adopts or kills them)
# wrote outside any tool call: the state the next session's brain starts from
KEPT = ("server_killed", "server_adopted")
SESSION = ("run_finished", "run_resumed")
COMPARED = ("message", "tool_call", "tool_result", "todo", "compaction", "api_exchange")
IGNORED = ("seq", "ts", "duration_s", "session_minutes")
# its trials ran on a Ray cluster, placed and ended in an order no replay can make again
FLEET_NOT_REPLAYED = (
    "replaying a fleet run is not supported (its trials ran at once on a Ray cluster, in an "
    "order a replay cannot repeat); `agent report` and `agent watch` read it"
)


@dataclass
class Recording:
    events: list[Event]
    torn: str | None = None
    calls: dict[str, list[Event]] = field(default_factory=dict)  # tool_use id -> its events

    @classmethod
    def load(cls, source: Path) -> Recording:
        path = source / "events.jsonl" if source.is_dir() else source
        if not path.is_file():
            raise FileNotFoundError(f"no recording at {source}")
        try:
            contents = read_events(path)
        except ValueError as err:  # a damaged line or a broken sequence, not a torn tail
            raise ValueError(f"{path}: {err}; the log was damaged, not torn") from None
        rec = cls(contents.events, contents.torn_report)
        current: str | None = None
        for event in rec.events:
            if event["type"] == "tool_call":
                current = event["id"]
                rec.calls[current] = [event]
            elif current is not None:
                rec.calls[current].append(event)
                if event["type"] == "tool_result":
                    current = None
            elif event["type"] == "tool_result":  # a call a crash left unstarted: recover's answer
                rec.calls[event["id"]] = [event]
        if not rec.events or rec.events[0]["type"] != "run_started":
            raise ValueError(f"{source} is not a recorded session (no run_started event)")
        return rec

    @property
    def started(self) -> Event:
        return self.events[0]

    def call_started(self, call_id: str) -> bool:
        """Whether the call has a tool_call event (the calls a crash left unstarted do not)."""
        events = self.calls.get(call_id)
        return not events or events[0]["type"] == "tool_call"

    def exchanges(self) -> list[Event]:
        return [e for e in self.events if e["type"] == "api_exchange"]


class ReplayTools(ToolBox):
    """Answers each tool call from the recording, re-writing the events the tool wrote."""

    def __init__(self, specs_from: ToolBox, recording: Recording) -> None:
        super().__init__(list(specs_from.tools.values()))
        self.recording = recording

    async def call(
        self, ctx: ToolContext, name: str, raw_input: Any, call_id: str = ""
    ) -> tuple[ToolResult, float]:
        events = self.recording.calls.get(call_id)
        if not events or events[-1]["type"] != "tool_result":
            raise DriftError(f"tool call {call_id} ({name}) is not in the recording")
        # an unstarted call has only recover's answer: its input is checked with the message
        recorded = {"name": events[0]["name"], "input": events[0].get("input", raw_input)}
        if recorded != {"name": name, "input": raw_input}:
            raise DriftError(
                f"tool call {call_id} differs from the recording\n"
                + unified(recorded, {"name": name, "input": raw_input})
            )
        for side in events[1:-1]:  # what the tool logged while it ran: servers, benchmarks, todos
            if side["type"] in SESSION:  # a crash cut the call: RecordedInbox starts the next
                continue
            ctx.run.append(side["type"], **_fields(side))
            if side["type"] == "todo":
                ctx.run.sync_todos_file()
        end = events[-1]
        result = ToolResult(
            text=end["text"], is_error=end.get("is_error", False), data=end.get("data") or {}
        )
        return result, float(end.get("duration_s", 0.0))


class SessionEnd(RunEnded):
    """The recorded session ended here (a budget, a stop, a crash, a model call that failed);
    the replay ends it the same way."""

    def __init__(self, ended: Event | None) -> None:
        super().__init__(ended["reason"] if ended else "the recorded session was cut off here")
        self.status = ended["status"] if ended else "crashed"
        self.exit_code = int(ended["exit_code"]) if ended else 1


class ReplayCut(RunEnded):
    """`agent replay --max-steps N` ended the replay after N model turns; the recording goes on,
    and only what was replayed is compared."""

    status, exit_code = "cut", 3


# how a run ends when its model call fails (a BrainError, or the API unavailable for too long):
# no api_exchange is written for the failed call, so the replay plays the recorded end there
FAILED_CALL = ("error", "model_unavailable")


def failed_call_end(rec: Recording) -> SessionEnd | None:
    """The recording's last end, when it may have come from a model call that failed."""
    last = rec.events[-1]
    if last["type"] == "run_finished" and last.get("status") in FAILED_CALL:
        return SessionEnd(last)
    return None


class RecordedInbox:
    """The loop's inbox in a replay: before the model call that follows the n-th assistant
    message, the supervisor events the recording has there (drain() delivers at that point), and
    the recorded end of a session that was resumed afterwards."""

    def __init__(self, recording: Recording, cut_after: int | None = None) -> None:
        self.cut_after = cut_after  # --max-steps: end the replay after this many model turns
        self.cut = False
        self.pending: list[tuple[int, Event]] = []  # (assistant messages before it, event)
        self.minutes_at: dict[int, tuple[float, bool]] = {}  # minutes it warned or ended at
        turns, in_call = 0, False
        for event in recording.events:
            if event["type"] == "message" and event.get("role") == "assistant":
                turns += 1
            elif event["type"] in (*FED, *SESSION) or (event["type"] in KEPT and not in_call):
                self.pending.append((turns, event))
            if event["type"] in ("tool_call", "tool_result"):
                in_call = event["type"] == "tool_call"
            minutes = minutes_decided(event)
            if minutes is not None:  # an end needs the limit reached: at least the limit then
                self.minutes_at[turns] = (minutes, event["type"] == "run_finished")
        self.turns = 0
        self.waiting = 0  # tool calls of the latest turn without their result yet

    def on_event(self, event: Event) -> None:
        if event["type"] == "message" and event.get("role") == "assistant":
            self.turns += 1
            self.waiting = sum(b.get("type") == "tool_use" for b in event["content"])
        elif event["type"] == "tool_result":
            self.waiting -= 1

    def __call__(self, run: Run) -> int:
        if self.cut_after is not None and self.turns >= self.cut_after:
            self.cut = True
            raise ReplayCut(
                f"replay cut at {self.turns} of {self.cut_after} steps (--max-steps); "
                "the recording goes on"
            )
        fed = 0
        while self.pending and self.pending[0][0] <= self.turns:
            event = self.pending[0][1]
            if event["type"] in (*FED, *KEPT):
                run.append(event["type"], **_fields(event))
            elif not self.resumes_after(1 if event["type"] == "run_finished" else 0):
                break  # the run's last end: the loop must reach it by itself
            else:  # the session ended here and was resumed: end this one the same way
                ended = event if event["type"] == "run_finished" else None
                if ended is not None:  # (a crash left no run_finished: the resume comes next)
                    self.pending.pop(0)
                raise SessionEnd(ended)
            self.pending.pop(0)
            fed += 1
        return fed

    def resumes_after(self, skip: int = 0) -> Event | None:
        """The recorded run_resumed that comes next (after `skip` pending events), if any."""
        rest = self.pending[skip:]
        return rest[0][1] if rest and rest[0][1]["type"] == "run_resumed" else None

    def resume(self, run: Run) -> bool:
        """Start the next session as `agent resume` did, if the recording has one here."""
        while self.pending and self.pending[0][1]["type"] == "run_finished":
            if not self.resumes_after(1):
                return False
            self.pending.pop(0)  # the loop ended this session by itself, as recorded
        resumed = self.resumes_after()
        if resumed is None:
            return False
        self.pending.pop(0)
        run.append("run_resumed", **_fields(resumed))
        return True


def minutes_decided(event: Event) -> float | None:
    """The minutes used when the minutes budget warned (budget_warning) or ended the session."""
    if event["type"] == "budget_warning" and event.get("limit") == "max_minutes":
        return float(event["used"])
    ended = re.match(r"budget exhausted: (\S+) of \S+ minutes", str(event.get("reason", "")))
    return float(ended[1]) if event["type"] == "run_finished" and ended else None


def recorded_minutes(agent: Agent, inbox: RecordedInbox) -> Callable[[], float]:
    """The minutes used in a replay, which takes seconds: the recorded figure where the minutes
    budget warned or ended the session, none elsewhere - the same decisions as recorded (the
    very figures it compared, not worked back from a clock: those may round below them)."""

    def minutes() -> float:
        # the recorded minutes once the turn's results are in, where the loop decided on them
        # (before its next model call); while the tools run none: the stop watcher must not
        # cut a replayed call the recording answered, however slowly the replay runs
        key = inbox.turns if inbox.waiting <= 0 else -1
        minutes, ended = inbox.minutes_at.get(key, (0.0, False))
        if ended:  # (the reason's figure is rounded)
            minutes = max(minutes, float(agent.run.state.limits.get("max_minutes") or 0))
        return minutes

    return minutes


def _fields(event: Event) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in ("seq", "ts", "type")}


async def replay(
    source: Path,
    runs_dir: Path,
    run_id: str | None = None,
    max_steps: int | None = None,
    faults: Faults | None = None,
) -> tuple[int, Run, str | None]:
    """Replay `source` into a new run; returns (exit code, run, drift report or None)."""
    rec = Recording.load(source)
    if any(e["type"] == "fleet_started" for e in rec.events):
        raise ValueError(f"{source} is a fleet run: {FLEET_NOT_REPLAYED}")
    started = rec.started
    try:
        config = Config.model_validate(started["config"])
    except ValidationError as err:
        raise ValueError(f"{source}: the recorded config does not load: {explain(err)}") from None
    # the recorded limits: the loop warns and ends where it did (--max-steps is no budget of
    # the run's: a budget warning at another step would change every request after it)
    limits = Limits(**started.get("limits", {}))
    run = start(
        started["goal"], config, started["model"], runs_dir, run_id, limits, replay_of=str(source)
    )
    replay_brain = ReplayBrain([_fields(e) for e in rec.exchanges()], started["model"], faults)
    replay_brain.ending = failed_call_end(rec)
    inbox = RecordedInbox(rec, cut_after=max_steps)
    run.listeners.append(inbox.on_event)
    while True:  # one session of the recording at a time
        brain: Brain = replay_brain
        if started.get("brain") == "autopilot":  # a resume starts a new autopilot
            brain = make_brain("autopilot", config_of(run))
        agent = make_agent(run, brain, config)
        agent.tools = ReplayTools(agent.tools, rec)
        agent.inbox = inbox
        agent.logs_call = rec.call_started  # as `agent resume` answered them: no tool_call
        agent.recorded_minutes = recorded_minutes(agent, inbox)
        try:
            code = await agent.run_loop()
        except DriftError as err:
            agent.finish("drift", 1, str(err).splitlines()[0])
            return 1, run, str(err)
        if not inbox.resume(run):
            break
        replay_brain.fresh_session()  # a resumed process sends its first request whole
    # cut short by --max-steps: the recording goes on; otherwise a replay must reach its end
    return code, run, compare(rec.events, run, truncated=inbox.cut)


def compare(recorded: list[Event], run: Run, truncated: bool) -> str | None:
    """The first difference between the recorded and the replayed events, as a diff."""
    replayed = read_events(run.events_path).events
    a = [_comparable(e) for e in recorded if e["type"] in COMPARED]
    b = [_comparable(e) for e in replayed if e["type"] in COMPARED]
    if truncated:
        a = a[: len(b)]
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"event {i + 1} ({x['type']}) differs\n{unified(x, y)}"
    if len(a) != len(b):
        return (
            f"the recording has {len(a)} comparable events, the replay {len(b)}; next: "
            + json.dumps((a[len(b)] if len(a) > len(b) else b[len(a)]), default=str)[:300]
        )
    ends = [_comparable(e) for e in (recorded[-1], replayed[-1]) if e["type"] == "run_finished"]
    if not truncated and len(ends) == 2 and ends[0]["status"] != ends[1]["status"]:
        return f"the run ended differently\n{unified(ends[0], ends[1])}"
    return None


def _comparable(event: Event) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in IGNORED}
