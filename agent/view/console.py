"""Plain progress lines for `agent run` when stdout is not a terminal (one line per event), in
words: a tool call says what it does ("-> run_benchmark on server at C=1,2 (baseline-L01)"), not
its JSON input; an event its fields as `key=value`; what the agent says is whole, on one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

from agent.view.fleet import fleet_line, summary
from agent.view.standing import figures_of, final_lines, standing
from agent.view.words import api_unavailable, named, short
from state.events import Event, read_events
from state.fold import fold
from state.server_events import ServerFailed, ServerStarted, server_event
from state.sweeps import count
from tools.domain.space import render_flags

SKIPPED = {"api_exchange", "tool_result", "run_resumed"}
LONGEST = 2000  # a line longer than this is a mistake of the writer, not news to the reader


def one_line(text: str, width: int = LONGEST) -> str:
    return short(str(text), width)


def fields(data: dict[str, Any], width: int = 160) -> str:
    """`key=value` for what is short, the size of what is not (a list, a table): never JSON."""
    parts = []
    for key, value in data.items():
        if isinstance(value, list | dict):
            parts.append(f"{key}=({count(len(value), 'item')})")
        elif value is not None and value != "":
            parts.append(f"{key}={short(str(value), 60)}")
    return short(" ".join(parts), width)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _flags(value: Any) -> list[str]:
    return render_flags(value) if isinstance(value, dict) else []


def call_words(name: str, raw: Any) -> str:
    """A tool call as a person says it; input of the wrong shape (the model's mistake, which
    the tool refused) is said as what it is, never trusted."""
    if not isinstance(raw, dict):
        return f"{name} {short(json.dumps(raw, default=str), 60)} (input not an object)"
    inp: dict[str, Any] = raw
    server = str(inp.get("server") or inp.get("name") or "")
    if name == "run_benchmark":
        levels = ",".join(map(str, _list(inp.get("concurrency")))) or "the configured levels"
        label = f" ({inp['label']})" if inp.get("label") else ""
        warmup = " (warm-up, not recorded)" if inp.get("warmup") is True else ""
        return f"run_benchmark on {server or 'the server'} at C={levels}{label}{warmup}"
    who = "" if server in ("", "server") else f" {server}"  # not "start_server server"
    if name == "start_server":
        flags = " ".join(_flags(inp.get("flags")))
        return f"start_server{who}" + (f": {flags}" if flags else "")
    if name == "kill_server":
        return f"kill_server{who}" if server else "kill_server (every server of this run)"
    if name == "todowrite":
        return f"todowrite ({count(len(_list(inp.get('todos'))), 'item')})"
    if name == "compare":
        return f"compare {', '.join(map(str, _list(inp.get('results'))))}"
    if name == "recommend":
        return f"recommend {' '.join(_flags(inp.get('config')))}".rstrip()
    return f"{name} {fields(inp)}".rstrip()


def cut_words(event: Event) -> str:
    """A call of a reply cut off at max_tokens (or another stop that cuts): it did not run, and
    its input is partial - never said as the call it looks like."""
    reason = str(event.get("stop_reason"))
    why = "at max_tokens" if reason == "max_tokens" else f"(stop_reason {reason})"
    return f"-> {event.get('name')} not run: the reply was cut off {why}, its input incomplete"


def server_words(event: Event) -> str | None:
    """A server's life in words; the autopilot's server is named "server": not "server server"."""
    t = event["type"]
    who = named("server", str(event.get("name", "")))
    server = server_event(event)
    if isinstance(server, ServerStarted):
        return f"{who} starting on {server.host}:{server.port} (pid {server.pid})"
    if t == "server_ready":
        return f"{who} ready after {float(event.get('seconds') or 0):.1f} s"
    if isinstance(server, ServerFailed):
        return f"{who} failed: {short(server.diagnosis or '', 160)}"
    if t == "server_killed":
        killed = event.get("killed")
        n = f" ({count(len(killed), 'process', 'processes')})" if isinstance(killed, list) else ""
        return f"{who} killed{n}"
    return None


def describe(event: Event) -> str | None:
    t = event["type"]
    fleet = fleet_line(event)
    if fleet is not None:
        return fleet
    if t == "message":
        if event["role"] == "assistant":
            texts = [b["text"] for b in event["content"] if b.get("type") == "text"]
            return "agent: " + one_line(" ".join(texts)) if texts else None
        return "note: " + one_line(" ".join(b.get("text", "") for b in event["content"]), 300)
    if t == "tool_call":
        return f"-> {call_words(event['name'], event.get('input'))}"
    if t == "tool_call_cut":
        return cut_words(event)
    words = server_words(event)
    if words is not None:
        return words
    if t == "todo":
        active = [i["content"] for i in event["todos"] if i["status"] == "in_progress"]
        done = sum(i["status"] in ("completed", "cancelled") for i in event["todos"])
        now = f"; now: {active[0]}" if active else ""
        return f"todo: {done}/{len(event['todos'])} done{now}"
    if t == "benchmark":  # a sweep's group of levels, as the results table's first column
        summary = event.get("summary") or {}
        levels = ", ".join(f"C={c} {v:,.1f}" for c, v in list(summary.items())[:8])
        label = event.get("label") or event.get("server") or event.get("id")
        return f"benchmark {label}: {levels} tok/s"
    if t == "model_wait":  # the retry and the pause alike: when the next try is
        return f"model {api_unavailable(event)}"
    if t == "run_finished":
        return (
            f"finished: {event['status']} (exit {event['exit_code']}): {one_line(event['reason'])}"
        )
    if t in SKIPPED:
        return None
    return f"{t}: {fields({k: v for k, v in event.items() if k not in ('seq', 'ts', 'type')})}"


class PlainPrinter:
    """One line per event; at the end of the run, where it stands (agent.view.standing)."""

    def __init__(self, out: TextIO = sys.stdout, run_path: Path | None = None) -> None:
        self.out = out
        self.run_path = run_path

    def __call__(self, event: Event) -> None:
        line = describe(event)
        if line:
            self.out.write(f"[{event['ts'][11:19]}] {line}\n")
        if event["type"] == "run_finished" and self.run_path is not None:
            events = read_events(self.run_path / "events.jsonl").events
            fleet = fold(events).fleet
            if fleet is not None:  # the trials per box and the utilisation, at the end
                self.out.write(f"[{event['ts'][11:19]}] {summary(fleet)}\n")
            figures = figures_of(self.run_path, events)
            if figures is not None:
                self.out.write(f"[{event['ts'][11:19]}] standing: {standing(figures)}\n")
            for line in final_lines(self.run_path, figures):
                self.out.write(f"[{event['ts'][11:19]}] {line}\n")
        self.out.flush()

    def close(self) -> Any:
        return None
