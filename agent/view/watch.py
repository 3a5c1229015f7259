"""`agent watch RUN [--json]`: follow a run's events.jsonl from another process, live or after
the run ended. See docs/supervising.md.

Following a file another process appends to: remember the byte offset just past the last complete
line, so a trailing partial line is read again until its newline arrives (and a torn line the
writer cuts off when it repairs a crash is simply gone); start over when the file is replaced or
shrinks below that offset.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live

from agent.view.bars import read_progress
from agent.view.fleet import FLEET_EVENTS, snapshot
from agent.view.live import Board, event_line, render
from state.events import Event, parse_lines
from state.files import open_run_file
from state.fleet import FleetState
from state.lock import LOCK_NAME, process_alive

HISTORY_LINES = 10  # event lines shown for what happened before watch started
WRITER_CHECK_S = 2.0  # how often to ask whether the run's process is still there
FLEET_VIEW_AFTER = (*FLEET_EVENTS, "run_finished")  # --json --fleet: a fleet_view line after


class WriterGone(Exception):
    """The process writing the run ended without a run_finished event (killed, crashed)."""

    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self.pid = pid


class NoEvents(Exception):
    """The log stayed empty and no live process holds the run: it was killed before its first
    event (between creating the folder and run_started), so nothing will ever come."""

    def __init__(self, path: Path, waited: float) -> None:
        super().__init__(
            f"{path} has no events after {waited:g} s and no live process writes the run (it "
            f"ended before its first event); nothing to watch - start a new run"
        )


def lock_holder_alive(run_path: Path) -> bool:
    """Whether the pid in run.lock (the last process that opened the run for writing) lives."""
    try:
        text = (run_path / LOCK_NAME).read_text(errors="replace").strip()
    except OSError:
        return False
    return text.isdigit() and process_alive(int(text))


def writer_of(event: Event) -> int | None:
    """The pid of the process that started or resumed the run, when it runs on this machine."""
    pid, host = event.get("pid"), event.get("hostname")
    if isinstance(pid, int) and host == socket.gethostname():
        return pid
    return None


@dataclass
class Line:
    raw: bytes  # exactly as in the file, without the newline (for --json)
    event: Event


class Follower:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0  # just past the last complete line
        self.inode: int | None = None
        self.seq = 0  # of the last event read: the next must be seq + 1

    def poll(self) -> tuple[bool, list[Line]]:
        """(whether the file was replaced and reading started over, the new complete lines).
        Raises ValueError for a complete line that is not an event or breaks the sequence: the
        writer appends whole lines in order, so either is corruption, as for `read_events`."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False, []
        reset = st.st_size < self.offset or self.inode not in (None, st.st_ino)
        if reset:
            self.offset, self.seq = 0, 0
        self.inode = st.st_ino
        if st.st_size <= self.offset:
            return reset, []
        # never through a link (state/files.py): a log that is one raises LinkedRunFile
        with os.fdopen(open_run_file(self.path, os.O_RDONLY), "rb") as f:
            f.seek(self.offset)
            data = f.read(st.st_size - self.offset)
        complete = data[: data.rfind(b"\n") + 1]  # a trailing partial line is read again later
        contents = parse_lines(complete, self.offset, after_seq=self.seq)
        if contents.torn:  # only complete lines were parsed: a bad one is not a torn tail
            raise ValueError(f"corrupt event at byte {contents.end}")
        self.offset = contents.end
        if contents.events:
            self.seq = contents.events[-1]["seq"]
        raw = [line for line in complete.split(b"\n") if line.strip()]
        return reset, [Line(r, e) for r, e in zip(raw, contents.events, strict=True)]


def follow(
    path: Path,
    interval: float = 0.25,
    grace: float = 2.0,
    once: bool = False,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[tuple[bool, list[Line]]]:
    """Batches of new lines (an empty batch every `interval`, so timers can tick) until the run
    ends: a run_finished with nothing after it for `grace` seconds (`agent resume` appends
    run_resumed right after), or at once when the log already ended when we started. Raises
    WriterGone when the run's process (if the log names it) is gone without finishing."""
    follower = Follower(path)
    reset, lines = follower.poll()
    writer = _writer(lines, None)
    yield reset, lines
    if once or (lines and lines[-1].event["type"] == "run_finished"):
        return
    ended_at: float | None = None
    checked = began = clock()
    empty = not lines  # an empty log has no writer pid to ask: run.lock names it
    while True:
        if ended_at is not None and clock() - ended_at >= grace:
            return
        if empty and clock() - began >= grace and not lock_holder_alive(path.parent):
            raise NoEvents(path, round(clock() - began, 1))
        time.sleep(interval)
        reset, lines = follower.poll()
        empty = empty and not lines
        writer = _writer(lines, None if reset else writer)
        if lines or reset:
            ended = lines[-1].event["type"] == "run_finished" if lines else False
            ended_at = clock() if ended else None
        elif ended_at is None and writer and clock() - checked >= WRITER_CHECK_S:
            checked = clock()
            if not process_alive(writer):
                _, lines = follower.poll()  # its last words, if any, before saying it is gone
                if not lines or lines[-1].event["type"] != "run_finished":
                    yield False, lines
                    raise WriterGone(writer)
                ended_at = clock()
        yield reset, lines


def _writer(lines: list[Line], current: int | None) -> int | None:
    for line in lines:
        if line.event["type"] in ("run_started", "run_resumed"):
            current = writer_of(line.event)
    return current


def stream_json(
    path: Path, out: TextIO, interval: float, grace: float, once: bool, fleet: bool = False
) -> int:
    """NDJSON: each event line as the file holds it. After a start-over, events already sent
    (by seq) are not sent again. With `fleet`, after each event that changes a fleet's picture,
    one `fleet_view` line (not an event: no seq) with the fleet as the view sees it."""
    sent = 0
    boxes = FleetState()
    try:
        for reset, lines in follow(path, interval, grace, once):
            if reset:
                boxes = FleetState()
            for line in lines:
                if fleet:
                    boxes.apply(line.event)
                if line.event["seq"] > sent:
                    out.write(line.raw.decode("utf-8", "replace") + "\n")
                    sent = line.event["seq"]
                    if fleet and boxes.sessions and line.event["type"] in FLEET_VIEW_AFTER:
                        out.write(json.dumps(fleet_view(boxes, line.event)) + "\n")
            out.flush()
    except BrokenPipeError:  # `agent watch --json | head`: the reader left, not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except WriterGone as gone:
        out.flush()
        print(f"agent watch: {gone_message(path, gone.pid)}", file=sys.stderr)
        return 1
    except NoEvents as err:
        print(f"agent watch: {err}", file=sys.stderr)
        return 1
    return 0


def fleet_view(fleet: FleetState, event: Event) -> dict[str, Any]:
    """The line `agent watch --json --fleet` writes after a fleet event (docs/fleet.md)."""
    return {"type": "fleet_view", "after_seq": event["seq"], "ts": event.get("ts"),
            **snapshot(fleet)}  # fmt: skip


def gone_message(path: Path, pid: int) -> str:
    return (
        f"the run's process (pid {pid}) ended without finishing the run (killed or crashed); "
        f"go on with `agent resume {path.parent}`"
    )


def watch_view(
    path: Path,
    console: Console,
    interval: float = 0.25,
    grace: float = 2.0,
    once: bool = False,
) -> Board:
    """Draw the run: a live view on a terminal; on anything else, one line per event as it
    arrives and the full view once at the end. Returns the final board; `board.gone` is the
    pid of a run process that ended without finishing the run."""
    board = Board(run_path=path.parent)
    live: Live | None = None
    if console.is_terminal and not once:
        live = Live(render(board), console=console, auto_refresh=False, redirect_stderr=False)
        live.start()
    first = True
    try:
        for reset, lines in follow(path, interval, grace, once):
            if reset and not first:
                board = Board(run_path=path.parent)
                console.print("[yellow]events.jsonl was replaced: reading it again[/]")
            for line in lines:
                board.apply(line.event)
            shown = lines[-HISTORY_LINES:] if first else lines
            if not once:
                for line in shown:
                    text = event_line(line.event)
                    if text is not None:
                        console.print(text)
            first = False
            board.bars = (
                read_progress(path.parent, board.tool_seq) if board.state.current_tool else []
            )
            if live is not None:
                live.update(render(board), refresh=True)
    except WriterGone as gone:
        board.gone = gone.pid
    finally:
        if live is not None:
            live.stop()
    if live is None:
        console.print(render(board))
    if board.gone:
        console.print(f"[bold red]{gone_message(path, board.gone)}[/]")
    return board
