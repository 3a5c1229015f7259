"""Whether a sandboxed line gets the host's network (issue 47): the sandbox has a network namespace
of its own (bwrap --unshare-net: its own loopback, no other interface) unless the line names the
network.

A line names the network when its text holds a URL (`http://127.0.0.1:30000/health`, `git+https://`),
a host and port (`localhost:8000`, `10.0.0.5:22`), bash's `/dev/tcp/`, or runs a program whose work
is the network: a package installer or fetcher (pip, uv, conda, npm, cargo, go get...), curl, wget,
git's remote commands, the Hugging Face CLI, ssh/scp/rsync, a benchmark client (`vllm bench`,
`sglang.bench_serving`, `agent bench`). A line that launches an engine server never gets it: a
server started from bash ends with the call, and in its own namespace it cannot listen beyond the
sandbox whatever its --host (a client on the same line reaches it on the sandbox's loopback).

This is not where the boundary is against a model that wants the network - naming a URL is enough
to get it - but it keeps the lines that do not need it (a script, a one-liner, `python -m
http.server`, `vllm serve` without --host) off every interface and every other host. What bounds a
line that has the network: the public-bind rule (launches.py), the secrets it cannot read (the
environment and the home are not in the sandbox), the run's control files it cannot write.
"""

from __future__ import annotations

import re

from tools.guard.command import Refused
from tools.guard.launches import server_launch
from tools.guard.prepare import prepare
from tools.guard.unwrap import unwrap
from tools.guard.walk import simple_commands

URL = re.compile(r"\b[a-z][a-z0-9+.-]*://", re.I)
HOST_PORT = re.compile(
    r"(?<![\w.:-])(?:localhost|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-f:.]+\]|[a-z][\w-]*(?:\.[\w-]+)+)"
    r":\d{1,5}\b",
    re.I,
)
DEV_NET = re.compile(r"/dev/(?:tcp|udp)/")
_WORD = r"(?:(?<=[\s;&|(`'\"/])|^)"
_END = r"(?=[\s;&|)`'\"]|$)"
CLIENTS = re.compile(
    _WORD
    + r"(?:curl|wget|aria2c|pip\d?(?:\.\d+)?|uv|pipx|poetry|conda|mamba|micromamba|npm|npx|yarn|"
    r"pnpm|cargo|huggingface-cli|hf|ssh|scp|sftp|rsync|apt-get|apt)"
    + _END
    + r"|\bgit\s+(?:-C\s+\S+\s+)?(?:clone|fetch|pull|push|ls-remote|submodule|remote)\b"
    r"|\bgo\s+(?:get|install|mod)\b"
    r"|\bbench(?:_serving|_one_batch_server)?\b",
    re.I,
)


def needs_network(command: str) -> str | None:
    """What in the line names the network (its reason to share the host's), or None: the line
    runs in a network namespace of its own."""
    if _launches_a_server(command):
        return None
    for pattern in (URL, HOST_PORT, DEV_NET, CLIENTS):
        m = pattern.search(command)
        if m:
            return m.group(0).strip()
    return None


def _launches_a_server(command: str) -> bool:
    try:
        source, literal = prepare(command)
        commands = simple_commands(source, literal)
    except (Refused, RecursionError, Exception):  # unread: judged on its text alone
        return False
    for cmd in commands:
        argv = unwrap(list(cmd.argv), [])
        if server_launch(argv) and not set(argv) & {"--help", "-h", "--version"}:
            return True
    return False
