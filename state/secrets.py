"""Secrets never reach a run folder: every event and every file the run writes passes through
`scrub`, which replaces the values of secret-looking environment variables and config values.

A secret is the value of any variable whose name contains KEY, TOKEN, SECRET or PASSWORD (at least
8 characters, so that short common words are not mistaken for one).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from state.text import repair, utf8

WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
MIN_LENGTH = 8
MASK = "[redacted]"


def is_secret_name(name: str) -> bool:
    return any(word in name.upper() for word in WORDS)


def secret_values(env: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> list[str]:
    env = os.environ if env is None else env
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_LENGTH}
    values |= {v for v in extra if len(v) >= MIN_LENGTH}
    return sorted(values, key=len, reverse=True)  # longest first: no partial leftovers


# NAME=value and --flag value / --flag=value inside a string (a server command, say)
ASSIGNMENT = re.compile(r"""(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|'[^']*'|\S+)""")
FLAG_VALUE = re.compile(
    r"""(?:^|\s)(--?[A-Za-z][A-Za-z0-9_.-]*)(?:=|\s+)("[^"]*"|'[^']*'|[^\s-]\S*)"""
)


def is_secret_word(name: str) -> bool:
    """Stricter than is_secret_name, for names inside commands: a part of the name (split on
    - and _) ends with a secret word, so HF_TOKEN and --api-key count but --max-tokens and
    --tokenizer do not."""
    return any(part.endswith(WORDS) for part in re.split(r"[^A-Z0-9]+", name.upper()) if part)


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


def _raw(value: str) -> bytes:
    """The bytes a program wrote for `value`: a lone surrogate stands for the byte it escaped."""
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return utf8(value)
