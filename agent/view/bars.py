"""Progress of the tool that is running: a server's model load, a benchmark sweep.

Tools call `ctx.progress(kind, **info)`; this is that callable. It keeps the latest state of each
bar for the terminal view and mirrors it, throttled, into the run folder's `progress.json` so that
`agent watch` in another process can draw the same bars. Progress is transient by nature: a bar
belongs to the tool call that made it and is dropped when that call's result arrives.

Kinds the tools send (others are drawn generically from `fraction` or `done`/`total`):
  ("server_load", name=, fraction=, line=)   fraction of the weights loaded, the log line
  ("benchmark", id=, level=, done=, total=, output_throughput=)   requests done at a level;
                                             output_throughput when the level has ended
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from state.atomic import write_atomic

PROGRESS_FILE = "progress.json"
WRITE_EVERY_S = 0.5  # the file is for a person's eyes: twice a second is plenty


@dataclass
class Bar:
    key: str
    label: str
    fraction: float | None  # None: indeterminate (a load whose log shows no progress yet)
    detail: str = ""


def make_bar(kind: str, info: dict[str, Any]) -> Bar:
    name = str(info.get("name") or info.get("server") or info.get("id") or "")
    fraction = _fraction(info)
    if kind == "server_load":
        label, detail = f"load {name}".strip(), str(info.get("line") or "")
    elif kind.startswith("bench"):
        level = info.get("level")
        label = f"bench {name}".strip() + (f" C={level}" if level is not None else "")
        detail = _counts(info)
        if info.get("levels_done") is not None and info.get("levels_total"):
            detail += f" (level {info['levels_done']}/{info['levels_total']})"
    else:
        label, detail = f"{kind} {name}".strip(), _counts(info) or str(info.get("line") or "")
    return Bar(key=f"{kind}:{name}", label=label, fraction=fraction, detail=detail.strip()[:120])


def _fraction(info: dict[str, Any]) -> float | None:
    fraction = info.get("fraction")
    if fraction is None and info.get("total"):
        fraction = (info.get("done") or 0) / info["total"]
    if not isinstance(fraction, int | float):
        return None
    return min(max(float(fraction), 0.0), 1.0)


def _counts(info: dict[str, Any]) -> str:
    if info.get("total"):
        return f"{info.get('done') or 0}/{info['total']}"
    return ""


class Progress:
    """The `ctx.progress` sink. Thread-safe: the live view reads it from its refresh thread."""

    def __init__(self, run_path: Path | None = None, seq: Callable[[], int] | None = None) -> None:
        self.run_path = run_path
        self.seq = seq  # the run's latest event seq: ties the file's bars to the running tool
        self.lock = threading.Lock()
        self._bars: dict[str, Bar] = {}
        self._last_level: dict[str, str] = {}  # a sweep's bar shows the level it measured last
        self._written = 0.0
        self._dirty = False

    def __call__(self, kind: str, **info: Any) -> None:
        bar = make_bar(kind, info)
        tput = info.get("output_throughput")
        with self.lock:
            if isinstance(tput, int | float) and info.get("level") is not None:
                self._last_level[bar.key] = f"C={info['level']}: {tput:,.0f} tok/s"
            if bar.key in self._last_level:
                bar.detail = f"{bar.detail}  (last {self._last_level[bar.key]})".strip()
            self._bars[bar.key] = bar
            self._dirty = True
        self._maybe_write(final=bar.fraction == 1.0)

    def bars(self) -> list[Bar]:
        with self.lock:
            return list(self._bars.values())

    def on_event(self, event: dict[str, Any]) -> None:
        """A run listener: a tool's bars end with its result (or with the run)."""
        if event.get("type") in ("tool_result", "run_finished"):
            self.clear()

    def clear(self) -> None:
        with self.lock:
            self._bars.clear()
            self._last_level.clear()
            self._dirty = False  # watch ignores a file older than the running tool call

    def _maybe_write(self, final: bool = False) -> None:
        if self.run_path is None:
            return
        now = time.monotonic()
        if not final and now - self._written < WRITE_EVERY_S:
            return
        with self.lock:
            if not self._dirty:
                return
            body = {
                "seq": self.seq() if self.seq else 0,
                "bars": [asdict(b) for b in self._bars.values()],
            }
            self._dirty = False
        self._written = now
        with contextlib.suppress(OSError):  # a nicety: never break the tool that reports it
            write_atomic(self.run_path / PROGRESS_FILE, json.dumps(body).encode())


def read_progress(run_path: Path, since_seq: int) -> list[Bar]:
    """The bars `agent run` last wrote, if they belong to the tool call logged at `since_seq`."""
    try:
        body = json.loads((run_path / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(body, dict) or body.get("seq", 0) < since_seq or since_seq <= 0:
        return []
    bars = []
    for raw in body.get("bars") or []:
        try:
            bars.append(Bar(**raw))
        except TypeError:
            continue
    return bars
