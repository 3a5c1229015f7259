"""What the fold says about servers and jobs, including the ones that already ended (their
logs are still worth reading)."""

from __future__ import annotations

from typing import Any


def server_record(ctx: Any, name: str) -> dict[str, Any] | None:
    """The running server of that name, else the last one started under it."""
    state = ctx.run.state
    record: dict[str, Any] | None = state.servers.get(name) or state.launched.get(name)
    return record


def job_record(ctx: Any, name: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(job_started, job_ended or None) of the last job of that name."""
    runs = ctx.run.state.job_runs.get(name)
    return (runs["started"], runs["ended"]) if runs else (None, None)
