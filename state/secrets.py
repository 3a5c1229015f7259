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
    def __init__(self, values: list[str]) -> None:
        self.values = values

    def __call__(self, text: str) -> str:
        for value in self.values:
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
            if any(v.encode() in data for v in self.values):
                for value in self.values:
                    data = data.replace(value.encode(), MASK.encode())
                path.write_bytes(data)
                scrubbed += 1
        return scrubbed
