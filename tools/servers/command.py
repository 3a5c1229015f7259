"""A server's command line, as every launch path builds and checks it: start_server on a host,
a fleet's trial on its node (tools/fleet/trial.py), run_trial's flags before a trial is placed.
Below the tool protocol (it raises tools/errors.py's ToolError), so the fleet's trials use it
without importing the tools above them."""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
from typing import Any

from tools.errors import ToolError
from tools.servers.profiles import Engine

FLAG = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*$")


def build_command(base: str, flags: dict[str, Any], engine: Engine, port: int) -> str:
    parts = [base.strip()]
    for flag, value in flags.items():
        if not FLAG.match(flag):
            raise ToolError(f"bad flag name {flag!r}: flags look like --some-flag")
        if flag in ("--port", engine.port_flag):
            raise ToolError("set the port with the `port` field, not as a flag")
        if value is False or value is None:
            continue
        if value is True:
            parts.append(flag)
        else:
            text = json.dumps(value) if isinstance(value, dict | list) else str(value)
            parts.append(f"{flag} {shlex.quote(text)}")
    parts.append(f"{engine.port_flag} {port}")
    given = [*flags, *shlex.split(base)]
    if engine.loopback and not any(a == "--host" or a.startswith("--host=") for a in given):
        parts.append(engine.loopback)
    return " ".join(parts)


def public_bind(command: str) -> str | None:
    """The address of a `--host` that is not loopback (0.0.0.0, ::, a LAN address, a name other
    than localhost), or None: such a server answers anyone who can reach the box."""
    try:
        words = shlex.split(command)
    except ValueError:  # an unbalanced quote: judge the plain words
        words = command.split()
    for i, word in enumerate(words):
        if word == "--host" and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith("--host="):
            value = word.removeprefix("--host=")
        else:
            continue
        if value == "localhost":
            continue
        try:
            if ipaddress.ip_address(value.strip("[]")).is_loopback:
                continue
        except ValueError:
            pass
        return value
    return None


def refuse_public_bind(command: str, allowed: bool) -> None:
    """The one rule of every launch path - start_server, a fleet's trials (the run's config
    before a cluster starts, each trial's command on its node) and run_trial's flags: no server
    on every interface unless `server.allow_public_bind`. A ToolError of one line."""
    exposed = public_bind(command)
    if exposed is not None and not allowed:
        raise ToolError(
            f"refused: --host {exposed} would serve the model to every network the host is "
            "on; servers bind loopback (127.0.0.1) and the benchmark reaches them through it. "
            "If the user wants it, they set server.allow_public_bind = true in agent.toml"
        )
