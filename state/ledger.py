"""The experiment ledger: <runs-dir>/ledger.jsonl, one line per benchmark result, across runs.

A later run looks a configuration up by its config hash (tools/bench/confighash.py defines it)
before it spends a server launch on it, and two results of one hash give the noise floor.
Appends are serialized with flock (several runs may share a runs folder) and fsynced; a torn
last line (a crash mid-write) is skipped when reading and cut off before the next append, as in
state/events.py. Entries are plain dicts (state/ imports nothing of the agent):
  {"ts", "config_hash", "id", "run_id", "path", "label", "server": {...}, "workload": {...},
   "summary": {"<level>": output_throughput}, "failed_levels": [...], "interrupted": bool}
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from state.atomic import write_all
from state.events import parse_lines, utc_now
from state.text import utf8

LEDGER_NAME = "ledger.jsonl"


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.repaired: str | None = None  # what the last read or append had to drop

    @classmethod
    def in_runs_dir(cls, runs_dir: Path) -> Ledger:
        return cls(runs_dir / LEDGER_NAME)

    def append(
        self, entry: dict[str, Any], scrub: Callable[[str], str] | None = None
    ) -> dict[str, Any]:
        """Append one entry (a `ts` is added when missing); durable when this returns. `scrub`
        (the run's) takes secrets out of the line: the ledger sits beside the run folders."""
        line = {"ts": utc_now(), **entry}
        data = json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        if scrub is not None:
            data = scrub(data)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size:
                end = self._complete_end(fd, size)
                if end < size:  # a torn last line from a crash: cut it so ours starts clean
                    os.ftruncate(fd, end)
                    self.repaired = f"cut a torn last line of {size - end} bytes"
            end = os.lseek(fd, 0, os.SEEK_END)
            try:
                write_all(fd, utf8(data))
                os.fsync(fd)
            except OSError:
                os.ftruncate(fd, end)  # no half line stays behind (a full disk, say)
                raise
        finally:
            os.close(fd)  # closing releases the lock
        return line

    def entries(self) -> list[dict[str, Any]]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            contents = parse_lines(data, valid=lambda obj: isinstance(obj, dict))
        except ValueError:  # a corrupt line in the middle: keep every line that parses
            self.repaired = "skipped corrupt lines"
            return [e for e in _lenient(data)]
        self.repaired = contents.torn_report
        return contents.events

    def lookup(self, config_hash: str) -> list[dict[str, Any]]:
        """Every result of this configuration, oldest first (empty when never measured)."""
        return [e for e in self.entries() if e.get("config_hash") == config_hash]

    def measured_levels(self, config_hash: str) -> dict[str, list[float]]:
        """{"<level>": [output_throughput of each result that measured it]}."""
        out: dict[str, list[float]] = {}
        for entry in self.lookup(config_hash):
            failed = {str(x) for x in entry.get("failed_levels", [])}
            for level, value in (entry.get("summary") or {}).items():
                if level not in failed:
                    out.setdefault(level, []).append(float(value))
        return out

    @staticmethod
    def _complete_end(fd: int, size: int) -> int:
        """Offset just past the last newline (the whole file when it ends with one)."""
        step = 4096
        pos = size
        while pos > 0:
            start = max(0, pos - step)
            chunk = os.pread(fd, pos - start, start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                return start + nl + 1
            pos = start
        return 0


def _lenient(data: bytes) -> list[dict[str, Any]]:
    out = []
    for raw in data.splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out
