"""Atomic file writes: a reader sees the old file or the new one, never half of either.

`write_all` is the one way state/ writes bytes: os.write may write fewer bytes than asked (a full
disk does that before it raises ENOSPC), and a short write taken for a whole one once renamed a
truncated todos.json over a valid one.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        write_all(fd, data)
        os.fsync(fd)
        os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        os.close(fd) if _is_open(fd) else None
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` or raise OSError (ENOSPC when the disk takes no more)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.ENOSPC, "no space left on device: a write stopped short")
        view = view[n:]


def is_disk_full(err: BaseException) -> bool:
    """ENOSPC, or a quota that is used up: the run cannot write, whatever it does."""
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)


def write_json_atomic(path: Path, obj: Any) -> None:
    write_atomic(path, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode())


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
