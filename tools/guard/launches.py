"""Servers started from a bash line: which engine a line launches, and whether it would listen
beyond loopback - start_server's rule (tools/servers/command.py `public_bind`) on a command's
words, below the tool protocol (the guard imports no tool)."""

from __future__ import annotations

import ipaddress
import re

from tools.domain import engines
from tools.guard.unwrap import name_of

PYTHONS = re.compile(r"python(?:\d+(?:\.\d+)?)?")
# the servers the engine profiles describe (each profile's [processes] launchers and `loopback`,
# tools/domain/engines.py): {module: listens on every interface without an address} and
# {program: (the subcommand that starts it, the same)}
MODULES, PROGRAMS = engines.server_modules(), engines.server_programs()
# servers the profiles do not describe but that a model may start by hand: their public-bind
# flag, and whether they bind every interface when it is not given
OTHER_SERVERS = ("text-generation-launcher", "lmdeploy", "ollama", "tabby")
# (the address flag, binds every interface by default)
BIND_FLAGS: dict[str, tuple[tuple[str, ...], bool]] = {
    **{m: ((engines.address_flag(m),), every) for m, every in MODULES.items()},
    **{p: ((engines.address_flag(p),), every) for p, (_, every) in PROGRAMS.items()},
    "agent": (("--host",), False),
    "text-generation-launcher": (("--hostname", "-H"), True),
    "lmdeploy": (("--server-name",), True),
    "tgi": (("--hostname",), True),
}


def server_launch(argv: list[str]) -> str | None:
    """The engine `argv` starts as a server (`vllm serve`, `python -m sglang.launch_server`,
    llama-server, trtllm-serve...), or None."""
    if not argv:
        return None
    head = name_of(argv[0])
    if PYTHONS.fullmatch(head) and "-m" in argv[1:]:
        i = argv.index("-m")
        module = argv[i + 1] if i + 1 < len(argv) else ""
        return module if module in MODULES else None
    if head in PROGRAMS:
        sub = PROGRAMS[head][0].split()
        return head if argv[1 : 1 + len(sub)] == sub else None
    if head == "agent":
        return "agent" if argv[1:3] == ["sim", "serve"] else None
    if head == "lmdeploy":
        return "lmdeploy" if argv[1:2] == ["serve"] else None
    if head == "text-generation-launcher":
        return head
    return None


def public_bind(argv: list[str], default: bool = False) -> str | None:
    """The address a server launch names beyond loopback (`--host 0.0.0.0`), or None: the rule
    of start_server (tools/servers/command.py `public_bind`) on a bash command's words. With
    `default`, also an engine that listens on every interface when not told (vLLM without
    --host: start_server adds `--host 127.0.0.1`, a bash line cannot be rewritten)."""
    engine = server_launch(argv)
    if engine is None or set(argv) & {"--help", "-h", "--version"}:
        return None
    flags, public_default = BIND_FLAGS.get(engine, (("--host",), False))
    public_default = public_default and default
    given = None
    for i, w in enumerate(argv):
        for f in flags:
            if w == f and i + 1 < len(argv):
                given = argv[i + 1]
            elif w.startswith(f + "="):
                given = w.split("=", 1)[1]
    if given is None:
        return (
            f"{engine} without {flags[0]} (it listens on every interface)"
            if public_default
            else None
        )
    if given == "localhost" or is_loopback(given):
        return None
    return f"{flags[0]} {given}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
