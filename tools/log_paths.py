"""Where the logs of servers and jobs go: the run's logs/ for the local host, the host's workdir
(logs/RUN-ID/) for a remote one. Each start gets a fresh file."""

from __future__ import annotations

import re

from tools.base import ToolContext, ToolError
from tools.hosts import Host

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_name(kind: str, name: str) -> str:
    if not NAME.fullmatch(name):  # `$` would let a trailing newline through
        shown = repr(name) if len(name) <= 80 else f"{name[:60]!r}... ({len(name)} characters)"
        raise ToolError(f"bad {kind} name {shown}: use up to 64 letters, digits, '.', '_' and '-'")
    return name


async def log_path(ctx: ToolContext, host: Host, kind: str, name: str) -> str:
    file = f"{kind}-{name}-{ctx.run.state.last_seq:05d}.log"
    if host.is_local:
        return str(ctx.run.path / "logs" / file)
    return f"{await host.workdir()}/logs/{ctx.run.id}/{file}"
