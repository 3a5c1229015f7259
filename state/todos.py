"""The todo list: the agent's external memory, kept outside the model.

Each write replaces the whole list (opencode's semantics). The rules are enforced here, in code:
at most one item in_progress, unique ids, non-empty content. The bounds on what the model sends
(past_bounds, checked by todowrite) keep the list a plan: at most MAX_ITEMS items, each id and
content of a bounded length - a 300-item list of 120 KB was taken, and every todoread echoed it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from state.text import printable

Status = Literal["pending", "in_progress", "completed", "cancelled"]
Priority = Literal["high", "medium", "low"]
STATUSES = ("in_progress", "pending", "completed", "cancelled")
MAX_ITEMS = 50  # a campaign's plan is a few dozen items; a recorded one has at most 8
MAX_CHARS = {"id": 64, "content": 500}  # per item (in the tool's schema: kept as they were)
ECHO_CHARS = 4000  # a list longer than this, rendered, is echoed as a summary
SHOWN_CHARS = 120  # an item's content in a summary


class Todo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        min_length=1, max_length=MAX_CHARS["id"], description="Stable id, unique in the list"
    )
    content: str = Field(
        min_length=1, max_length=MAX_CHARS["content"], description="What to do, imperative"
    )
    status: Status = Field(description="pending | in_progress | completed | cancelled")
    priority: Priority = Field(default="medium", description="high | medium | low")

    @field_validator("content", "id")
    @classmethod
    def not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class TodoRuleError(ValueError):
    """The list breaks a rule that no single item breaks (duplicates, two in_progress)."""


def past_bounds(raw: Any) -> str | None:
    """What puts a list as the model sent it past the bounds, in one line (None: within them) -
    checked before the items are, so that 300 items too long are one error, not 300 lines."""
    if not isinstance(raw, list):
        return None  # not a list at all: the schema says so
    if len(raw) > MAX_ITEMS:
        return (
            f"at most {MAX_ITEMS} items, got {len(raw)}: merge items, drop finished ones, keep "
            "details in files"
        )
    over = [
        (i, key, len(item[key]))
        for i, item in enumerate(raw)
        if isinstance(item, dict)
        for key, most in MAX_CHARS.items()
        if isinstance(item.get(key), str) and len(item[key]) > most
    ]
    if not over:
        return None
    i, key, n = over[0]
    more = f" ({len(over)} fields are over)" if len(over) > 1 else ""
    return f"todos.{i}.{key} has {n} characters, at most {MAX_CHARS[key]} allowed{more}"


def check_rules(todos: list[Todo]) -> None:
    problems = []
    ids = [t.id for t in todos]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        problems.append(f"ids must be unique, repeated: {', '.join(dupes)}")
    active = [t.id for t in todos if t.status == "in_progress"]
    if len(active) > 1:
        problems.append(
            f"at most one item may be in_progress, got {len(active)}: {', '.join(active)}"
        )
    if problems:
        raise TodoRuleError("; ".join(problems))


def diff(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> dict[str, Any]:
    """What changed between two lists: added and removed ids, status changes, edited content."""
    before = {t["id"]: t for t in old}
    after = {t["id"]: t for t in new}
    return {
        "added": [i for i in after if i not in before],
        "removed": [i for i in before if i not in after],
        "status": {
            i: [before[i]["status"], t["status"]]
            for i, t in after.items()
            if i in before and before[i]["status"] != t["status"]
        },
        "edited": [
            i
            for i, t in after.items()
            if i in before
            and (before[i]["content"], before[i]["priority"]) != (t["content"], t["priority"])
        ],
    }


def render(todos: list[dict[str, Any]]) -> str:
    """The list as the model and a person read it: one line per item, with no terminal escape
    sequence or line break of the model's making (state/text.py)."""
    if not todos:
        return "(the todo list is empty)"
    return "\n".join(_line(t) for t in todos)


def _line(t: dict[str, Any], width: int | None = None) -> str:
    mark = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]", "cancelled": "[-]"}
    content = printable(str(t["content"]), one_line=True)
    if width is not None and len(content) > width:
        content = content[: width - 1] + "…"
    return (
        f"{mark.get(t['status'], '[?]')} {printable(str(t['id']), one_line=True)}: "
        f"{content} ({t['priority']})"
    )


def counts(todos: list[dict[str, Any]]) -> str:
    """'50 items: 1 in_progress, 49 pending'."""
    n = Counter(str(t["status"]) for t in todos)
    return f"{len(todos)} items: " + ", ".join(f"{n[s]} {s}" for s in STATUSES if n[s])


def echo(todos: list[dict[str, Any]]) -> str:
    """The list as a tool echoes it: whole while it is short; past ECHO_CHARS the counts and
    the open items, one short line each (the one in progress first) - the finished ones only
    counted: `agent todos` and todos.json keep the list whole."""
    whole = render(todos)
    if len(whole) <= ECHO_CHARS:
        return whole
    open_items = [t for s in ("in_progress", "pending") for t in todos if t["status"] == s]
    lines = [f"{counts(todos)} (a long list: the open items, each cut to {SHOWN_CHARS} characters)"]
    return "\n".join(lines + [_line(t, SHOWN_CHARS) for t in open_items])
