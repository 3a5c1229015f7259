"""What the event log says about servers and jobs, including the ones that already ended (the
fold drops those, but their logs are still worth reading)."""

from __future__ import annotations

from typing import Any

from state.events import read_events


def last_event(ctx: Any, types: tuple[str, ...], name: str) -> dict[str, Any] | None:
    found = None
    for event in read_events(ctx.run.events_path).events:
        if event.get("type") in types and event.get("name") == name:
            found = event
    return found


def server_record(ctx: Any, name: str) -> dict[str, Any] | None:
    """The running server of that name, else the last one started under it."""
    live: dict[str, Any] | None = ctx.run.state.servers.get(name)
    return live if live is not None else last_event(ctx, ("server_started",), name)


def job_record(ctx: Any, name: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(job_started, job_ended or None) of the last job of that name."""
    started = ended = None
    for event in read_events(ctx.run.events_path).events:
        if event.get("name") != name:
            continue
        if event.get("type") == "job_started":
            started, ended = event, None
        elif event.get("type") == "job_ended" and started is not None:
            ended = event
    return started, ended
