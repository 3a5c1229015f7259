"""The pre-launch flag check: a command line the engine would refuse, known without launching it.

Two ways, as the profile says ([flags] check): the flags the engine's `--help` lists, with the
values it enumerates there (`--flash-attn [on|off|auto]`, argparse's `{auto,half}`), or the
engine's own argument parser called in-process (the simulator's).
"""

from __future__ import annotations

import importlib
import json
import re
import shlex
from collections.abc import Callable, Mapping
from typing import Any

from tools.domain.space import Check, Flags

CHOICES = (
    re.compile(r"^\[([\w.-]+(?:\|[\w.-]+)+)\]$"),  # [on|off|auto]
    re.compile(r"^<([\w.-]+(?:\|[\w.-]+)+)>$"),  # <0|1>
    re.compile(r"^\{([\w.-]+(?:,[\w.-]+)+)\}$"),  # argparse: {auto,half}
    re.compile(r"^([a-z0-9][a-z0-9_-]*(?:,[a-z0-9][a-z0-9_-]*)+)$"),  # none,draft-simple,...
)


def canonical_flag(flag: str) -> str:
    """--some_flag and --some-flag are one flag (llama.cpp and argparse engines accept both)."""
    return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag


def help_flags(text: str) -> dict[str, tuple[str, ...] | None]:
    """{flag: the values it enumerates, or None} from an engine's --help output."""
    out: dict[str, tuple[str, ...] | None] = {}
    for line in text.splitlines():
        words = line.split()
        if not words or not words[0].startswith("-"):
            continue
        last: str | None = None
        for word in words:
            word = word.rstrip(",")
            if word.startswith("-") and len(word) > 1:
                last = canonical_flag(word.split("=", 1)[0])
                out.setdefault(last, None)
            elif last is not None:  # the flag's value hint
                found = _choices(word)
                if found:
                    out[last] = found
                last = None
            else:
                break  # the description starts
    return out


def _choices(hint: str) -> tuple[str, ...] | None:
    for pattern in CHOICES:
        m = pattern.match(hint)
        if m:
            return tuple(re.split(r"[|,]", m.group(1)))
    return None


def help_check(engine: str, help_text: str, version: str = "") -> Check:
    """A Check that refuses flags the help does not list and values outside what it enumerates."""
    known = help_flags(help_text)
    where = f"{engine} {version}".strip()

    def check(flags: Flags) -> str | None:
        for flag, value in flags.items():
            if value is False:
                continue  # omitted
            name = canonical_flag(flag)
            if name not in known:
                return f"{where} does not know {flag} (not in its --help)"
            choices = known[name]
            if choices and value is not True:
                bad = [v for v in str(value).split(",") if v not in choices]
                if bad:
                    return f"{where}: {flag} takes one of {'|'.join(choices)}, not {bad[0]!r}"
        return None

    return check


def parser_check(ref: str, base_argv: list[str]) -> Check:
    """A Check from the engine's own parser `module:function`, called with the whole argv: it
    raises (or exits, as argparse does) on a command line the engine would refuse."""
    module, _, name = ref.partition(":")
    parse: Callable[[list[str]], Any] = getattr(importlib.import_module(module), name)

    def check(flags: Flags) -> str | None:
        try:
            parse([*base_argv, *to_argv(flags)])
        except SystemExit:
            return "the engine's argument parser refuses this command line"
        except Exception as err:  # the parser's own error: its message is the reason
            return str(err).splitlines()[0] if str(err) else type(err).__name__
        return None

    return check


def to_argv(flags: Mapping[str, Any]) -> list[str]:
    """{--flag: value} as start_server writes it: true = the switch alone, false = omitted."""
    argv: list[str] = []
    for flag, value in flags.items():
        if value is False or value is None:
            continue
        argv.append(flag)
        if value is not True:
            argv.append(json.dumps(value) if isinstance(value, dict | list) else str(value))
    return argv


def launch_words(command: str) -> tuple[list[str], list[str]]:
    """(the launcher: env, program, `-m module`, positionals - and the flags after it)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return [], []
    i = 0
    while i < len(argv) and re.match(r"^[A-Za-z_]\w*=", argv[i]):
        i += 1
    if i < len(argv):
        i += 1  # the program
    python = i > 0 and re.match(r"^python[\d.]*$", argv[i - 1].rsplit("/", 1)[-1]) is not None
    while i < len(argv):
        if python and argv[i] == "-m" and i + 1 < len(argv):
            i += 2
        elif not argv[i].startswith("-"):
            i += 1
        else:
            break
    return argv[:i], argv[i:]
