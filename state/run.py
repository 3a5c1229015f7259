"""A run folder and the one object that writes to it.

<runs-dir>/<run-id>/events.jsonl   the single source of truth (append-only)
                    todos.json     the current list, written atomically
                    config.toml    the resolved config, secrets redacted
                    results/       one JSON per benchmark
                    outputs/       full tool output that was cut short in the conversation
                    logs/          server logs fetched
                    report.md      and its charts
                    inbox/         supervisor messages waiting for the loop (agent say/stop/budget)
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from state.atomic import write_atomic
from state.events import Event, EventLog, LogContents, read_events
from state.fold import BadEvent, RunState, fold
from state.lock import Locked, acquire
from state.secrets import Scrubber, secret_values
from state.text import utf8
from state.todos import Todo, check_rules, diff

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # fullmatch: `$` lets "id\n" in
SUBDIRS = ("results", "outputs", "logs", "inbox")


class RunError(Exception):
    """A run folder that cannot be created or opened; the message is one line for the user."""


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


class Run:
    """Writes events and keeps the fold of them current; owns the run folder."""

    def __init__(self, path: Path) -> None:
        # absolute: every path the run records (server logs, results) must resolve the same
        # from whatever folder `agent resume` runs in
        self.path = path.absolute()
        try:
            self._lock = acquire(path)  # before the read: the live writer's last line is not torn
        except Locked as err:
            raise RunError(
                f"run {path.name} is being written by a live process (pid {err.pid}); "
                f"wait for it to end or ask it to stop with `agent stop {path.name}`"
            ) from None
        try:
            contents = _read(self.events_path)
            self.state = _fold(self.events_path, contents)
            self.scrub = Scrubber(secret_values())
            self.log = EventLog(self.events_path, contents, self.scrub)
        except BaseException:
            os.close(self._lock)
            raise
        self.listeners: list[Callable[[Event], None]] = []  # e.g. the terminal view

    @classmethod
    def create(cls, runs_dir: Path, run_id: str | None = None) -> Run:
        run_id = run_id or new_run_id()
        if not RUN_ID.fullmatch(run_id):
            raise RunError(f"bad run id {run_id!r}: use letters, digits, '.', '_' and '-'")
        if runs_dir.exists() and not runs_dir.is_dir():
            raise RunError(f"runs folder {runs_dir} is not a folder")
        path = runs_dir / run_id
        if path.exists():
            raise RunError(
                f"run {run_id} already exists in {runs_dir}; use `agent resume {run_id}`"
            )
        runs_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # a new one: its owner's only
        path.mkdir(mode=0o700)
        os.chmod(path, 0o700)  # readable by its owner only, whatever the umask
        for sub in SUBDIRS:
            (path / sub).mkdir(mode=0o700)
        return cls(path)

    @classmethod
    def open(cls, path: Path) -> Run:
        if not (path / "events.jsonl").is_file():
            raise RunError(f"{path} is not a run folder (no events.jsonl)")
        return cls(path)

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def events_path(self) -> Path:
        return self.path / "events.jsonl"

    def append(self, type: str, **data: Any) -> Event:
        event = self.log.append(type, **data)
        self.state.apply(event)
        for listener in self.listeners:
            listener(event)
        return event

    # --- the todo store ------------------------------------------------------------------------
    def write_todos(self, todos: list[Todo]) -> dict[str, Any]:
        """Validate, write todos.json atomically, log a `todo` event; returns what changed."""
        check_rules(todos)
        new = [t.model_dump() for t in todos]
        changes = diff(self.state.todos, new)
        self.write_json("todos.json", {"todos": new})
        self.append("todo", todos=new, changes=changes)
        return changes

    def sync_todos_file(self) -> None:
        """After a crash between the file write and the event, the event log wins."""
        self.write_json("todos.json", {"todos": self.state.todos})

    def write_json(self, relpath: str, obj: Any) -> Path:
        return self.write_text(relpath, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")

    def write_text(self, relpath: str, text: str) -> Path:
        """Write a file of the run atomically, secrets scrubbed."""
        path = self.path / relpath
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(path, utf8(self.scrub(text)))
        return path

    def close(self) -> None:
        self.log.close()
        if getattr(self, "_lock", -1) >= 0:  # (a tool call's view of the run holds no lock)
            os.close(self._lock)  # releases the lock
            self._lock = -1


def read_state(path: Path) -> RunState:
    """The fold of a run's log, read-only: for readers in other processes while a run may be
    writing (opening a Run would cut what looks like a torn line - the live writer's)."""
    return _fold(path / "events.jsonl", _read(path / "events.jsonl"))


def _read(events_path: Path) -> LogContents:
    try:
        return read_events(events_path)
    except ValueError as err:  # not a torn tail: a line in the middle was damaged
        raise RunError(f"{events_path}: {err}; the log was damaged, not torn") from None


def _fold(events_path: Path, contents: LogContents) -> RunState:
    try:
        return fold(contents.events)
    except BadEvent as err:  # an event edited into the log: said in one line, never folded
        raise RunError(f"{events_path}: {err}") from None


def resolve_run(ref: str, runs_dir: Path) -> Path:
    """RUN is a run id under the runs folder or a path to a run folder."""
    for candidate in (Path(ref), runs_dir / ref):
        if (candidate / "events.jsonl").is_file():
            return candidate
    if Path(ref).is_dir():
        raise RunError(f"{ref} is not a run folder (no events.jsonl)")
    raise RunError(f"no run {ref!r} (looked for {ref} and {runs_dir / ref})")
