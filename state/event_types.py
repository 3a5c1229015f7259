"""Every event type the log may hold, and what the fold needs of each: the fields it reads, each
of its kind. A hand-edited log is read with these before it is folded (state/fold.py):

- an event of a known type with a field the fold reads missing or of the wrong kind (a pid of -1,
  a todo list of strings, a budget of "inf") is refused in one line naming the seq and the field,
  never folded: folding it would change what the run does (docs/events.md);
- an event of a type no writer writes (a hand edit, a newer agent's log) is skipped: the readers
  say so in one line (`skipped_note`), and nothing else reads it.

Plain checks over a few fields, no model per event: the fold runs on every resume and replay.
Fields not listed are not checked (tools may add fields; readers ignore what they do not know).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, get_args

from state.numbers import LONGEST_S, MOST, MOST_USD, limits_problem
from state.todos import MAX_ITEMS, STATUSES, Priority

# a check says what is wrong with a value (one phrase), or None
Check = Callable[[Any], "str | None"]


def _text(v: Any) -> str | None:
    return None if isinstance(v, str) else "must be a string"


def _table(v: Any) -> str | None:
    return None if isinstance(v, dict) else "must be a table"


def _list(v: Any) -> str | None:
    return None if isinstance(v, list) else "must be a list"


def _flag(v: Any) -> str | None:
    return None if isinstance(v, bool) else "must be true or false"


def _anything(v: Any) -> str | None:
    return None


def _whole(lo: int, hi: int) -> Check:
    def check(v: Any) -> str | None:
        ok = isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi
        return None if ok else f"must be a whole number from {lo} to {hi}"

    return check


def _amount(hi: float) -> Check:
    def check(v: Any) -> str | None:
        number = isinstance(v, int | float) and not isinstance(v, bool)
        ok = number and math.isfinite(v) and 0 <= v <= hi
        return None if ok else f"must be a finite number from 0 to {hi:g}"

    return check


def _limits(v: Any) -> str | None:
    return limits_problem(v)  # the bounds agent.toml's budget has, said as "limits.KEY: ..."


def _blocks(v: Any) -> str | None:
    """A message's content: API content blocks, a text block's text a string."""
    if not isinstance(v, list):
        return "must be a list of content blocks"
    for i, block in enumerate(v):
        if not isinstance(block, dict):
            return f"[{i}] must be a content block (a table)"
        if block.get("type") == "text" and not isinstance(block.get("text"), str):
            return f"[{i}].text must be a string"
    return None


def _role(v: Any) -> str | None:
    return None if v in ("user", "assistant") else "must be user or assistant"


def _messages(v: Any) -> str | None:
    if not isinstance(v, list):
        return "must be a list of messages"
    for i, message in enumerate(v):
        if not isinstance(message, dict) or _role(message.get("role")) is not None:
            return f"[{i}] must be a message with role user or assistant"
        problem = _blocks(message.get("content"))
        if problem is not None:
            return f"[{i}].content {problem}"
    return None


def _pruned(v: Any) -> str | None:
    ok = isinstance(v, dict) and all(isinstance(p, str) for p in v.values())
    return None if ok else "must be a table of call id to path"


def _todos(v: Any) -> str | None:
    if not isinstance(v, list) or len(v) > MAX_ITEMS:
        return f"must be a list of at most {MAX_ITEMS} items"
    for i, item in enumerate(v):
        ok = isinstance(item, dict) and isinstance(item.get("id"), str)
        ok = ok and isinstance(item.get("content"), str) and item.get("status") in STATUSES
        if not (ok and item.get("priority", "medium") in PRIORITIES):
            return f"[{i}] must be an item with id, content, status (and priority) as todowrite's"
    return None


def _points(v: Any) -> str | None:
    """A benchmark's points: per level (a whole number) a table; its duration a number."""
    if not isinstance(v, dict):
        return "must be a table of level to metrics"
    for level, point in v.items():
        if not str(level).isdigit() or not isinstance(point, dict):
            return f"[{level!r}] must be a level (a whole number) with a table of metrics"
        if point.get("duration") is not None and _SECONDS(point["duration"]) is not None:
            return f"[{level}].duration {_SECONDS(point['duration'])}"
    return None


PRIORITIES = get_args(Priority)
_SECONDS = _amount(LONGEST_S)
_PID = _whole(1, 2**22)  # Linux's pid_max at most; 0 or -1 would signal a group or every process
_PORT = _whole(1, 65535)
_USD = _amount(MOST_USD)

# per type: the fields the fold reads without a default (required), then those it reads when
# present (checked when not null)
Fields = dict[str, Check]
KNOWN: dict[str, tuple[Fields, Fields]] = {
    # the run's lifecycle
    "run_started": (
        {"goal": _text},
        {
            "limits": _limits,
            "run_id": _text,
            "brain": _text,
            "model": _text,
            "config": _table,
            "replay_of": _text,
        },
    ),
    "run_resumed": ({}, {}),
    "run_finished": ({}, {"status": _text, "session_minutes": _amount(LONGEST_S / 60)}),
    "budget_warning": ({}, {"limit": _text, "used": _amount(MOST), "of": _amount(MOST)}),
    "limits_changed": ({"limits": _limits}, {"inbox_id": _text}),
    "guard_allowed": ({"rule": _text}, {"inbox_id": _text}),
    "supervisor_message": ({"text": _text}, {"inbox_id": _text}),
    "inbox_refused": ({}, {"inbox_id": _text, "reason": _text}),
    "stop_requested": ({}, {"inbox_id": _text}),
    "stuck_nudge": ({}, {"pattern": _text}),
    # the conversation
    "message": (
        {"role": _role, "content": _blocks},
        {"usage": _table, "cost_usd": _USD, "stop_reason": _text},
    ),
    "tool_call": ({"id": _text, "name": _text, "input": _anything}, {}),
    "tool_call_cut": ({"id": _text, "name": _text}, {}),
    "tool_result": (
        {"id": _text, "text": _text},
        {"name": _text, "is_error": _flag, "data": _table, "duration_s": _SECONDS},
    ),
    "planned": ({"call": _text}, {}),
    "api_exchange": ({}, {"request_hash": _text}),
    "model_wait": ({}, {"stage": _text, "pause_s": _SECONDS, "waited_s": _SECONDS}),
    "compaction": (
        {},
        {"messages": _messages, "pruned": _pruned, "usage": _table, "cost_usd": _USD},
    ),
    # what the tools did
    "todo": ({"todos": _todos}, {"changes": _table}),
    "server_started": (
        {"name": _text},
        {"pid": _PID, "pgid": _PID, "port": _PORT, "host": _text, "flags": _table},
    ),
    "server_ready": ({"name": _text}, {"seconds": _SECONDS}),
    "server_failed": ({"name": _text}, {"seconds": _SECONDS}),
    "server_killed": ({"name": _text}, {}),
    "server_stopped": ({"name": _text}, {}),  # written by earlier agents: read as server_killed
    "server_adopted": ({"name": _text}, {"pid": _PID, "pgid": _PID, "port": _PORT}),
    "job_started": ({"name": _text}, {"pid": _PID}),
    "job_ended": ({"name": _text}, {}),
    "benchmark": ({}, {"summary": _table, "points": _points, "flags": _table}),
    # a fleet
    "fleet_started": ({}, {"nodes": _table, "slots": _whole(0, MOST)}),
    "trial_started": (
        {"trial": _text},
        {"flags": _table, "levels": _list, "attempt": _whole(1, MOST)},
    ),
    "trial_placed": ({"trial": _text}, {"node": _text, "box": _text}),
    "trial_ended": (
        {"trial": _text},
        {"ok": _flag, "seconds": _SECONDS, "ready_s": _SECONDS, "box": _text},
    ),
    "trial_retried": ({"trial": _text}, {"reason": _text}),
    "trial_reaped": ({"trial": _text}, {}),
    "trial_cleaned": ({"trial": _text}, {}),
    "trial_left": ({"trial": _text}, {"pgid": _PID, "port": _PORT}),
}


def _said(key: str, problem: str, v: Any) -> str:
    if problem.startswith(key):  # the check named the field itself (limits_problem)
        return problem
    return f"{key}: {problem} (got {_shown(v)})"


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def event_problem(e: dict[str, Any]) -> str | None:
    """What is wrong with an event of a known type, in one phrase naming the field; None: fine."""
    required, optional = KNOWN[e["type"]]
    for key, check in required.items():
        if key not in e:
            return f"{key}: missing"
        problem = check(e[key])
        if problem is not None:
            return _said(key, problem, e[key])
    for key, check in optional.items():
        value = e.get(key)
        if value is not None:
            problem = check(value)
            if problem is not None:
                return _said(key, problem, value)
    return None


def skipped_note(skipped: Sequence[tuple[int, str]]) -> str | None:
    """One line for the events of unknown types the fold skipped (seq, type), or None."""
    if not skipped:
        return None
    kinds = sorted({t for _, t in skipped})
    where = ", ".join(str(seq) for seq, _ in skipped[:5]) + (" ..." if len(skipped) > 5 else "")
    return (
        f"skipped {len(skipped)} event{'s' if len(skipped) > 1 else ''} of a type this agent does "
        f"not know ({', '.join(kinds[:5])}; seq {where}): a hand edit or a newer agent's log; "
        "nothing of the run reads them"
    )
