"""Supervisor messages for a live run: file-based, atomic, each delivered exactly once.

A sender (`agent say/stop/budget/allow`, another process) writes one file per message into the run's
inbox/ with a unique name, atomically (temp file + rename). The loop turns each into an event and
only then deletes the file; the event carries the file's name, so a crash between the two cannot
deliver a message twice (the fold remembers which were delivered) nor lose one.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from state.atomic import write_atomic
from state.run import Run

KINDS = ("say", "stop", "budget", "allow")


def send(run_path: Path, kind: str, **body: Any) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown inbox message kind {kind!r}")
    inbox = run_path / "inbox"
    inbox.mkdir(exist_ok=True)
    name = f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(3)}.json"
    write_atomic(inbox / name, json.dumps({"kind": kind, **body}).encode())
    return name


def waiting(run_path: Path, delivered: set[str]) -> list[dict[str, Any]]:
    """The messages not delivered yet, oldest first, left in place (the loop looks for a stop
    while a tool call runs; it delivers them before the next model call)."""
    inbox = run_path / "inbox"
    out = []
    for path in sorted(inbox.glob("*.json")) if inbox.is_dir() else []:
        if path.name not in delivered:
            try:
                message = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(message, dict):
                out.append(message)
    return out


def drain(run: Run) -> int:
    """Turn waiting messages into events, oldest first; returns how many were delivered."""
    inbox = run.path / "inbox"
    delivered = 0
    for path in sorted(inbox.glob("*.json")) if inbox.is_dir() else []:
        if path.name not in run.state.inbox_done:
            try:
                message = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # a rename is atomic, so this is not ours; leave it for a person
            _deliver(run, path.name, message)
            delivered += 1
        path.unlink(missing_ok=True)
    return delivered


def _deliver(run: Run, inbox_id: str, message: dict[str, Any]) -> None:
    kind = message.get("kind")
    if kind == "say":
        run.append("supervisor_message", text=str(message.get("text", "")), inbox_id=inbox_id)
    elif kind == "stop":
        run.append("stop_requested", inbox_id=inbox_id)
    elif kind == "allow":  # a bash rule (validated by `agent allow`): the bash tool reads the fold
        run.append("guard_allowed", rule=str(message.get("rule", "")), inbox_id=inbox_id)
    elif kind == "budget":
        limits = {k: v for k, v in (message.get("limits") or {}).items() if v is not None}
        run.append("limits_changed", limits=limits, inbox_id=inbox_id)
