"""Small text helpers every panel of the view uses: a duration as a clock, text cut to one line."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from state.events import epoch
from state.text import printable


def clock(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def short(text: str, width: int) -> str:
    """One line of at most `width` characters, with no escape sequence the model or a tool's
    output could use to redraw the supervisor's terminal."""
    flat = " ".join(printable(str(text), one_line=True).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def named(kind: str, name: str) -> str:
    """ "server fa3" for a server named fa3, and "server", not "server server", for one named
    after its kind (the autopilot's server is "server", its baseline "baseline")."""
    return kind if name in ("", kind) else f"{kind} {name}"


def api_unavailable(wait: dict[str, Any], now_s: float | None = None) -> str:
    """The model API is unavailable: when the next try is, then why (from a model_wait event).
    The essentials first: on a narrow terminal the API's own words are what wraps or is cut."""
    why = str(wait.get("reason") or "").removeprefix("the Anthropic API: ")
    line = "API unavailable"
    at = epoch(wait.get("retry_at"))
    if at is not None:
        line += f" · next try {datetime.fromtimestamp(at, UTC).strftime('%H:%M:%S')}"
        if now_s is not None:
            line += f" (in {clock(at - now_s)})"
    return f"{line} · {short(why.removeprefix('the Anthropic API is unavailable: '), 160)}"
