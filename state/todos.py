"""The todo list: the agent's external memory, kept outside the model.

Each write replaces the whole list (opencode's semantics). The rules are enforced here, in code:
at most one item in_progress, unique ids, non-empty content.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from state.text import printable

Status = Literal["pending", "in_progress", "completed", "cancelled"]
Priority = Literal["high", "medium", "low"]


class Todo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=64, description="Stable id, unique in the list")
    content: str = Field(min_length=1, max_length=500, description="What to do, imperative")
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
    mark = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]", "cancelled": "[-]"}
    return "\n".join(
        f"{mark.get(t['status'], '[?]')} {printable(str(t['id']), one_line=True)}: "
        f"{printable(str(t['content']), one_line=True)} ({t['priority']})"
        for t in todos
    )
