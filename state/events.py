"""The append-only event log: one JSON object per line, `seq` 1, 2, ... with no gaps.

Every event is flushed and fsynced before `append` returns, so an event that was reported is on
disk. A crash can at worst leave a torn last line; the reader drops it and says so, and the writer
cuts it off before it appends again. Nothing else can happen to a log that only this writer
appended to, so the reader checks the sequence: a seq repeated, out of order or missing (a log
copied together by hand, two writers, an edit) is corruption, named by its seq and byte offset.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from state.atomic import write_all
from state.files import open_run_file, read_run_file
from state.text import utf8

Event = dict[str, Any]

# the longest line an event may be: a compaction's rebuilt conversation (a whole context window,
# JSON-escaped) is the largest any writer writes, a few MB; a recorded session's longest is 42 KB.
# A longer line is an edit, refused before it is parsed: a 50 MB one made `report` take 6.7 s
MAX_EVENT_BYTES = 16 * 2**20


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def call_input(value: Any) -> dict[str, Any]:
    """A tool call's input as a mapping. What the model sent that is not one (a list, a string,
    null: every tool refuses it) reads as empty, so that no view or fold trips on it."""
    return value if isinstance(value, dict) else {}


def epoch(ts: Any) -> float | None:
    """An event's `ts` (utc_now's text) as seconds since the epoch; None if it is not one."""
    try:
        return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass
class LogContents:
    events: list[Event] = field(default_factory=list)
    torn: bytes = b""  # an incomplete last line (a write cut short by a crash), dropped
    end: int = 0  # byte offset just past the last complete line

    @property
    def torn_report(self) -> str | None:
        if not self.torn:
            return None
        return f"dropped a torn last line of {len(self.torn)} bytes (a write cut short by a crash)"


def is_event(obj: Any) -> bool:
    """Valid JSON that is not an object with seq and type is as damaged as a line that does not
    parse (a number or a list made todos, report and resume raise TypeError)."""
    return isinstance(obj, dict) and isinstance(obj.get("seq"), int) and "type" in obj


class SeqBreak(ValueError):
    """The log's sequence is broken: a seq repeated, out of order or missing."""


def seq_break(seq: int, previous: int, offset: int) -> SeqBreak | None:
    """Why `seq` cannot follow `previous` (0: nothing before it) at byte `offset`, or None."""
    if seq == previous + 1:
        return None
    if seq == previous:
        what = f"seq {seq} repeated"
    elif seq < previous:
        what = f"seq {seq} out of order (after seq {previous})"
    elif seq == previous + 2:
        what = f"seq {previous + 1} missing (seq {seq} follows seq {previous})"
    else:
        what = f"seq {previous + 1}..{seq - 1} missing (seq {seq} follows seq {previous})"
    return SeqBreak(f"broken sequence at byte {offset}: {what}")


def parse_lines(
    data: bytes,
    start_offset: int = 0,
    valid: Callable[[Any], bool] = is_event,
    after_seq: int | None = None,
) -> LogContents:
    """Parse complete lines of `data`; an unterminated or unparsable tail is reported as torn.
    A line that parses but is not `valid` counts as unparsable. Each complete line's seq must
    follow the one before (the first follows `after_seq`; None: records without a sequence)."""
    out = LogContents(end=start_offset)
    previous = after_seq
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            out.torn = data[pos:]
            break
        if nl - pos > MAX_EVENT_BYTES:
            raise ValueError(
                f"the event at byte {start_offset + pos} is a line of {nl - pos:,} bytes, past "
                f"the {MAX_EVENT_BYTES // 2**20} MiB an event may be (no writer writes one)"
            )
        line = data[pos:nl]
        if line.strip():
            try:
                obj = json.loads(line)
                if not valid(obj):
                    raise ValueError("not a record")
            except ValueError:
                # only the last line can be torn; a bad line in the middle is corruption
                if data[nl + 1 :].strip():
                    raise ValueError(f"corrupt event at byte {start_offset + pos}") from None
                out.torn = data[pos:]
                break
            if previous is not None:
                broken = seq_break(obj["seq"], previous, start_offset + pos)
                if broken is not None:
                    raise broken
                previous = obj["seq"]
            out.events.append(obj)
        pos = nl + 1
        out.end = start_offset + pos
    return out


def read_events(path: Path) -> LogContents:
    try:
        data = read_run_file(path)  # a symbolic link raises LinkedRunFile: never followed
    except FileNotFoundError:
        return LogContents()
    return parse_lines(data, after_seq=0)


class EventLog:
    """Appends events to `events.jsonl`. One writer per run (the loop's process)."""

    def __init__(
        self,
        path: Path,
        existing: LogContents | None = None,
        scrub: Callable[[str], str] | None = None,
    ) -> None:
        self.path = path
        self.scrub = scrub
        contents = existing if existing is not None else read_events(path)
        self.repaired = contents.torn_report
        self.seq = contents.events[-1]["seq"] if contents.events else 0
        # O_APPEND: every write lands at the end, whatever else has the file open; O_NOFOLLOW
        # (state/files.py): a link is never appended to, nor its target truncated as a torn tail
        fd = open_run_file(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        if contents.torn:
            os.ftruncate(fd, contents.end)  # cut the torn line so the next event starts clean
        os.lseek(fd, 0, os.SEEK_END)
        self._fd = fd

    def append(self, type: str, **data: Any) -> Event:
        event: Event = {"seq": self.seq + 1, "ts": utc_now(), "type": type, **data}
        line = json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str)
        if self.scrub is not None:
            line = self.scrub(line)  # a secret never reaches the disk, whatever the tool printed
        raw = utf8(line) + b"\n"
        if len(raw) > MAX_EVENT_BYTES:  # no reader would take it back: the run stays readable
            raise ValueError(
                f"a {type} event of {len(raw):,} bytes, past the {MAX_EVENT_BYTES // 2**20} MiB "
                "an event may be: not written"
            )
        end = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            write_all(self._fd, raw)
            os.fsync(self._fd)
        except OSError:
            os.ftruncate(self._fd, end)  # no half event stays behind (a full disk, say)
            raise
        self.seq += 1
        return event

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
