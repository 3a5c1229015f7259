"""Typed views of the two server events the report and the views read most: `server_started` and
`server_failed` (tools/start_server.py writes them). The log stays one JSON object per line
(state/events.py); a reader parses an event once with `server_event` instead of looking up its
keys one by one. Every field but the name has a default and unknown keys are kept, so the events
of an older run parse as they are."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from state.events import Event


class ServerStarted(BaseModel):
    """A server was launched (not yet ready): where, how, and the flags under test."""

    model_config = ConfigDict(extra="allow")

    name: str = ""
    host: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    pid: int | None = None
    pgid: int | None = None
    port: int | None = None
    command: str | None = None
    flags: dict[str, Any] | None = None
    log: str | None = None


class ServerFailed(BaseModel):
    """A server did not start (or was refused before launch): why, and the log's lines."""

    model_config = ConfigDict(extra="allow")

    name: str = ""
    diagnosis: str | None = None
    log_excerpt: str | None = None
    seconds: float | None = None
    cleanup: str | None = None
    flags: dict[str, Any] | None = None  # only a launch refused before it started says them
    command: str | None = None


def server_event(e: Event) -> ServerStarted | ServerFailed | None:
    """The event as its typed record; None for any other kind, and for one whose fields are not
    what the writer writes (a hand-edited log): a reader skips it rather than fail."""
    kinds: dict[str, type[ServerStarted] | type[ServerFailed]] = {
        "server_started": ServerStarted,
        "server_failed": ServerFailed,
    }
    kind = kinds.get(str(e.get("type")))
    try:
        return None if kind is None else kind.model_validate(e)
    except ValidationError:
        return None
