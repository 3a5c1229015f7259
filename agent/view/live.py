"""The rich live view, shared by `agent watch` and `agent run` on a terminal.

`agent run` attaches `terminal_view(run, progress)` to `run.listeners`: on a terminal a LiveView
(the panels of agent.view.panels, redrawn four times a second, with one dim line per event
scrolling above them), otherwise plain lines (agent.view.console). Both have the listener interface:
`__call__(event)` and `close()`.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, TextIO

from rich.console import Console, RenderableType
from rich.live import Live
from rich.text import Text

from agent.view.bars import Progress
from agent.view.console import PlainPrinter, describe, server_words
from agent.view.panels import Board, render, short
from state.events import Event, read_events
from state.run import Run
from state.text import printable

__all__ = ["Board", "LiveView", "event_line", "render", "terminal_view"]


def _short_line(event: Event) -> str | None:
    """Events a supervisor reads at a glance, in words rather than JSON."""
    t = event["type"]
    if t == "supervisor_message":
        return f"supervisor: {short(event.get('text', ''), 200)}"
    if t == "guard_allowed":
        return f"supervisor: bash commands matching {short(event.get('rule', ''), 160)} allowed"
    if t == "stop_requested":
        return "supervisor: stop requested (the tool running finishes first)"
    if t == "inbox_refused":
        return (
            f"inbox: refused a message ({short(event.get('reason', ''), 120)}); kept in "
            f"{short(event.get('moved_to', ''), 120)}"
        )
    if t == "limits_changed":
        limits = ", ".join(f"{k} -> {v:g}" for k, v in (event.get("limits") or {}).items())
        return f"supervisor: budget raised: {limits}"
    return server_words(event)


def event_line(event: Event) -> Text | None:
    try:
        line = _short_line(event) or describe(event)
    except (TypeError, ValueError, AttributeError):  # an event shaped unlike we expect
        line = describe(event)
    if line is None:
        return None
    style = "bold magenta" if line.startswith("supervisor:") else "dim"
    if event.get("type") == "inbox_refused":
        style = "bold red"  # something other than the supervisor wrote into its channel
    shown = printable(line, one_line=True)  # model and tool text must not drive the terminal
    return Text(f"[{str(event.get('ts', ''))[11:19]}] {shown}", style=style)


class LiveView:
    """A listener that keeps its own fold (the loop mutates run.state on another schedule than
    the refresh thread draws) and draws it with rich's Live."""

    def __init__(
        self, run: Run, progress: Progress | None = None, console: Console | None = None
    ) -> None:
        self.console = console or Console()
        self.progress = progress
        self.lock = threading.Lock()
        self.board = Board(run_path=run.path)
        for event in read_events(run.events_path).events:  # a resumed run shows its history
            self.board.apply(event)
        self.live = Live(self, console=self.console, refresh_per_second=4, redirect_stderr=False)
        self.live.start()

    def __call__(self, event: Event) -> None:
        with self.lock:
            self.board.apply(event)
        line = event_line(event)
        if line is not None:
            self.live.console.print(line)

    def __rich__(self) -> RenderableType:  # called by Live's refresh thread
        with self.lock:
            self.board.bars = self.progress.bars() if self.progress else []
            return render(self.board)

    def close(self) -> None:
        self.live.stop()


def terminal_view(run: Run, progress: Progress | None = None, out: TextIO | None = None) -> Any:
    """The listener for `agent run`: the live view on a terminal, plain lines otherwise."""
    out = out or sys.stdout
    if out.isatty():
        return LiveView(run, progress, Console(file=out))
    return PlainPrinter(out, run.path)
