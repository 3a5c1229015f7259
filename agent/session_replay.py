"""`agent replay`: run the loop again against a recording and check that nothing drifted.

Model turns come from the recording - through the real SDK for Claude sessions (the replay brain),
or from the autopilot again, which is deterministic. Tool results and the events the tools wrote
(servers, benchmarks, todos) are fed back from the recording, so a replay needs no GPU, no host
and no network. With --check, the replayed events must equal the recorded ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.brains.replay import DriftError, Faults, ReplayBrain, unified
from agent.session import Limits, config_of, make_agent, make_brain, start
from state.events import Event, read_events
from state.run import Run
from tools.base import ToolBox, ToolContext, ToolResult
from tools.domain.config import Config, explain

COMPARED = ("message", "tool_call", "tool_result", "todo", "compaction", "api_exchange")
IGNORED = ("seq", "ts", "duration_s", "session_minutes")


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
        contents = read_events(path)
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
        if not rec.events or rec.events[0]["type"] != "run_started":
            raise ValueError(f"{source} is not a recorded session (no run_started event)")
        return rec

    @property
    def started(self) -> Event:
        return self.events[0]

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
        recorded = {"name": events[0]["name"], "input": events[0]["input"]}
        if recorded != {"name": name, "input": raw_input}:
            raise DriftError(
                f"tool call {call_id} differs from the recording\n"
                + unified(recorded, {"name": name, "input": raw_input})
            )
        for side in events[1:-1]:  # what the tool logged while it ran: servers, benchmarks, todos
            ctx.run.append(side["type"], **_fields(side))
            if side["type"] == "todo":
                ctx.run.sync_todos_file()
        end = events[-1]
        result = ToolResult(
            text=end["text"], is_error=end.get("is_error", False), data=end.get("data") or {}
        )
        return result, float(end.get("duration_s", 0.0))


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
    started = rec.started
    try:
        config = Config.model_validate(started["config"])
    except ValidationError as err:
        raise ValueError(f"{source}: the recorded config does not load: {explain(err)}") from None
    limits = Limits(
        **{**started.get("limits", {}), **({"max_steps": max_steps} if max_steps else {})}
    )
    run = start(
        started["goal"], config, started["model"], runs_dir, run_id, limits, replay_of=str(source)
    )
    if started.get("brain") == "autopilot":
        brain = make_brain("autopilot", config_of(run))
    else:
        brain = ReplayBrain([_fields(e) for e in rec.exchanges()], started["model"], faults)
    agent = make_agent(run, brain, config)
    agent.tools = ReplayTools(agent.tools, rec)
    try:
        code = await agent.run_loop()
    except DriftError as err:
        agent.finish("drift", 1, str(err).splitlines()[0])
        return 1, run, str(err)
    return code, run, compare(rec.events, run, truncated=code == 3)


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
