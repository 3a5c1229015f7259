"""Plain progress lines for `agent run` when stdout is not a terminal (one line per event)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

from agent.view.fleet import fleet_line, summary
from agent.view.standing import figures_of, final_lines, standing
from agent.view.words import api_unavailable
from state.events import Event, read_events
from state.fold import fold

SKIPPED = {"api_exchange", "tool_result", "run_resumed"}


def one_line(text: str, width: int = 110) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def describe(event: Event) -> str | None:
    t = event["type"]
    fleet = fleet_line(event)
    if fleet is not None:
        return fleet
    if t == "message":
        if event["role"] == "assistant":
            texts = [b["text"] for b in event["content"] if b.get("type") == "text"]
            return "agent: " + one_line(" ".join(texts)) if texts else None
        return "note: " + one_line(" ".join(b.get("text", "") for b in event["content"]))
    if t == "tool_call":
        return f"-> {event['name']} {one_line(json.dumps(event['input']), 90)}"
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
    fields = {k: v for k, v in event.items() if k not in ("seq", "ts", "type")}
    return f"{t}: {one_line(json.dumps(fields, default=str), 100)}"


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
