"""Secrets never reach a run folder: every event and every file the run writes passes through
`scrub`, which replaces the values of secret-looking environment variables and config values.

A secret is the value of any variable whose name contains KEY, TOKEN, SECRET or PASSWORD, or
a part of whose name (split on `_`) ends with PASSWD, PASS, PWD or PASSPHRASE (SSHPASS, MYSQL_PWD;
not the shell's PWD and OLDPWD), at least 8 characters long, so that short common words are not
mistaken for one. Values are also looked for as JSON writes them (a `"`, `\\` or newline inside
a secret is escaped in events and result files).

A command keeps its shape when its secrets are masked: `HF_TOKEN=hf_x cmd` is recorded as
`HF_TOKEN=[redacted] cmd`, `export T=x; cmd` keeps its `;`. The variable's name is the reference:
`resolve` puts the value from the environment back when the command is launched again (a resumed
run reads its config from the log).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from state.text import repair, utf8

WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
# at the end of a part of the name only: SSHPASS, MYSQL_PWD, DB_PASSWD - not BYPASS_X or PWD_DIR
SHORT_WORDS = ("PASSWD", "PASS", "PWD", "PASSPHRASE")
NOT_SECRET = frozenset({"PWD", "OLDPWD"})  # the shell's working directories
MIN_LENGTH = 8
MASK = "[redacted]"


def _parts(name: str) -> list[str]:
    return [part for part in re.split(r"[^A-Z0-9]+", name.upper()) if part]


def is_secret_name(name: str) -> bool:
    if name.upper() in NOT_SECRET:
        return False
    return any(word in name.upper() for word in WORDS) or any(
        part.endswith(SHORT_WORDS) for part in _parts(name)
    )


def secret_values(env: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> list[str]:
    env = os.environ if env is None else env
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_LENGTH}
    values |= {v for v in extra if len(v) >= MIN_LENGTH}
    return sorted(values, key=len, reverse=True)  # longest first: no partial leftovers


# NAME=value and --flag value / --flag=value inside a string (a server command, say); an unquoted
# value ends where the shell would end the word (`export T=x; cmd`: the `;` is not the value's)
WORD = r"""("[^"]*"|'[^']*'|[^\s;&|<>()'"`][^\s;&|<>()`]*)"""
ASSIGNMENT = re.compile(r"(?:^|[\s;&|(])([A-Za-z_][A-Za-z0-9_]*)=" + WORD)
FLAG_VALUE = re.compile(r"(?:^|\s)(--?[A-Za-z][A-Za-z0-9_.-]*)(?:=|\s+)" + r"(?!-)" + WORD)


def is_secret_word(name: str) -> bool:
    """Stricter than is_secret_name, for names inside commands: a part of the name (split on
    - and _) ends with a secret word, so HF_TOKEN and --api-key count but --max-tokens and
    --tokenizer do not."""
    if name.upper() in NOT_SECRET:
        return False
    return any(part.endswith(WORDS + SHORT_WORDS) for part in _parts(name))


def command_secrets(text: str) -> list[str]:
    """Values given to secret-looking variables or flags inside a command line:
    `HF_TOKEN=hf_x vllm serve m --api-key abc` -> ["hf_x", "abc"]."""
    pairs = ASSIGNMENT.findall(text) + FLAG_VALUE.findall(text)
    return [value.strip("'\"") for name, value in pairs if is_secret_word(name)]


def config_secrets(obj: Any, under_secret: bool = False) -> list[str]:
    """Every string under a secret-looking name anywhere in a config mapping, and the secret
    values written inside its strings (a token in the server command)."""
    if isinstance(obj, str):
        return [obj] if under_secret else command_secrets(obj)
    if isinstance(obj, dict):
        return [
            s
            for k, v in obj.items()
            for s in config_secrets(v, under_secret or is_secret_word(str(k)))
        ]
    if isinstance(obj, list):
        return [s for v in obj for s in config_secrets(v, under_secret)]
    return []


class Scrubber:
    """Replaces secret values in text and in files. A value with a non-UTF-8 byte (an environment
    variable arrives with it as a lone surrogate) is looked for as its raw bytes in files and as
    text both ways: as it came, and with U+FFFD where tool output was decoded."""

    def __init__(self, values: list[str]) -> None:
        self.values = values

    @property
    def values(self) -> list[str]:
        return self._values

    @values.setter
    def values(self, values: list[str]) -> None:
        variants = {v for value in values for v in (value, repair(value))}
        # events and result files are scrubbed as serialized JSON: look for the escaped forms too
        variants |= {e for v in list(variants) for e in _json_forms(v)}
        self._values = sorted(variants, key=len, reverse=True)
        self._bytes = sorted({_raw(v) for v in variants}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def folder(self, root: Path) -> int:
        """Rewrite any file under root that holds a secret (server logs are written by the
        server itself, not through the run); returns how many files were scrubbed."""
        scrubbed = 0
        if not self.values:
            return 0
        for path in root.rglob("*"):
            if not path.is_file() or path.stat().st_size > 512 * 1024 * 1024:
                continue
            data = path.read_bytes()
            if any(v in data for v in self._bytes):
                for value in self._bytes:
                    data = data.replace(value, MASK.encode())
                path.write_bytes(data)
                scrubbed += 1
        return scrubbed


def _json_forms(value: str) -> set[str]:
    """`value` as it stands inside a JSON string, with and without ensure_ascii."""
    forms = set()
    for ascii_only in (False, True):
        try:
            forms.add(json.dumps(value, ensure_ascii=ascii_only)[1:-1])
        except UnicodeEncodeError:  # pragma: no cover - json escapes surrogates, never raises
            continue
    return forms - {value}


REFERENCE = re.compile(r"(?:^|(?<=[\s;&|(]))([A-Za-z_][A-Za-z0-9_]*)=" + re.escape(MASK))


class UnresolvedSecret(ValueError):
    """A masked secret in a command that the environment cannot give back; one line."""


def resolve(command: str, env: Mapping[str, str] | None = None) -> str:
    """`command` with each `NAME=[redacted]` given the value of NAME from the environment (the
    log keeps the name, never the value); anything else masked cannot be run as recorded."""
    env = os.environ if env is None else env
    missing: list[str] = []

    def value(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in env:
            missing.append(name)
            return m.group(0)
        return f"{name}={shlex.quote(env[name])}"

    resolved = REFERENCE.sub(value, command)
    if missing:
        names = ", ".join(dict.fromkeys(missing))
        raise UnresolvedSecret(
            f"the command's secret {names} was recorded as {MASK} (the log keeps no secret); "
            f"set {names} in the environment of the agent (`{missing[0]}=... agent resume RUN`)"
        )
    if MASK in resolved:
        raise UnresolvedSecret(
            f"the command holds a secret recorded as {MASK} that no variable names (a flag's "
            "value, say); pass it through an environment variable instead: "
            '`--api-key "$MY_KEY"` with MY_KEY set for the agent'
        )
    return resolved


def _raw(value: str) -> bytes:
    """The bytes a program wrote for `value`: a lone surrogate stands for the byte it escaped."""
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return utf8(value)
