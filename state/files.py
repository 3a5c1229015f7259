"""Run files are opened without following symbolic links (issue 47).

A run folder is written by the run and read by its supervisor; a model command that could plant
`events.jsonl -> ~/.bashrc` would have `agent resume`'s torn-tail repair truncate the target, and
the log's appends write into it. Every run file the run opens for itself goes through
`open_run_file` (O_NOFOLLOW: a link at the last component fails with ELOOP, raised as
`LinkedRunFile`, one line); files written whole are replaced by a rename (state/atomic.py), which
replaces a link and never writes through it.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


class LinkedRunFile(OSError):
    """A run file that is a symbolic link: never followed, never truncated through."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            errno.ELOOP,
            f"{path} is a symbolic link, not the run's own file: it is not followed (nothing "
            f"is written or truncated through it); put the real file back, or start a new run",
        )
        self.path = path

    def __str__(self) -> str:
        return str(self.strerror)


def open_run_file(path: Path, flags: int, mode: int = 0o600) -> int:
    """os.open with O_NOFOLLOW (and O_CLOEXEC); a symbolic link raises LinkedRunFile."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as err:
        if err.errno == errno.ELOOP or (err.errno == errno.EEXIST and os.path.islink(path)):
            raise LinkedRunFile(path) from None
        raise


def read_run_file(path: Path) -> bytes:
    """The whole file, read without following a link (FileNotFoundError when it is not there)."""
    fd = open_run_file(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
