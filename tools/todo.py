"""todowrite / todoread: the plan, kept outside the model (opencode's semantics)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from state.text import printable
from state.todos import ECHO_CHARS, Todo, TodoRuleError, counts, echo, past_bounds, render
from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult


class TodoWriteInput(ToolInput):
    todos: list[Todo] = Field(description="The whole list; it replaces the previous one")

    @field_validator("todos", mode="before")
    @classmethod
    def bounded(cls, raw: Any) -> Any:
        problem = past_bounds(raw)
        if problem is not None:  # the template is fixed: an id may hold braces
            raise PydanticCustomError("todo_bounds", "{problem}", {"problem": problem})
        return raw


class TodoWrite(Tool):
    name = "todowrite"
    Input = TodoWriteInput

    async def run(self, ctx: ToolContext, inp: TodoWriteInput) -> ToolResult:
        try:
            changes = ctx.run.write_todos(inp.todos)
        except TodoRuleError as err:
            raise ToolError(f"todo list rejected: {err}") from None
        todos = ctx.run.state.todos
        whole = render(todos)
        if len(whole) > ECHO_CHARS:  # the model just wrote it: no need to read it back whole
            active = [t["id"] for t in todos if t["status"] == "in_progress"]
            now = f"; in progress: {printable(active[0], one_line=True)}" if active else ""
            text = f"saved: {counts(todos)}{now} (todoread shows the open items)"
            return ToolResult(text=text, data={"changes": changes})
        open_items = sum(t["status"] in ("pending", "in_progress") for t in todos)
        return ToolResult(
            text=f"{whole}\n({open_items} open of {len(todos)})",
            data={"changes": changes},
        )


class TodoReadInput(ToolInput):
    pass


class TodoRead(Tool):
    name = "todoread"
    Input = TodoReadInput

    async def run(self, ctx: ToolContext, inp: TodoReadInput) -> ToolResult:
        return ToolResult(text=echo(ctx.run.state.todos), data={"todos": ctx.run.state.todos})
