"""One writer per run: an exclusive flock on <run>/run.lock, held for the life of the writer.

Two processes appending to one events.jsonl (a second `agent resume` on a live run) duplicated
seq numbers and interleaved lines. The lock is taken before the log is read (a second writer must
not cut the live one's last line as "torn"), it holds the owner's pid for the message, and the
kernel releases it when the process dies - a crashed run is never left locked.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from state.files import open_run_file

LOCK_NAME = "run.lock"


class Locked(Exception):
    def __init__(self, pid: str) -> None:
        super().__init__(pid)
        self.pid = pid


def acquire(run_path: Path) -> int:
    """The locked file descriptor (close it to release); Locked(pid) when a live process has it."""
    fd = open_run_file(run_path / LOCK_NAME, os.O_RDWR | os.O_CREAT)  # never through a link
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise Locked(pid) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def process_alive(pid: int) -> bool:
    """Running on this machine (a zombie waiting to be reaped has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except (OSError, IndexError):  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
