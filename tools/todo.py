"""todowrite / todoread: the plan, kept outside the model (opencode's semantics)."""

from __future__ import annotations

from pydantic import Field

from state.todos import Todo, TodoRuleError, render
from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult


class TodoWriteInput(ToolInput):
    todos: list[Todo] = Field(description="The whole list; it replaces the previous one")


class TodoWrite(Tool):
    name = "todowrite"
    Input = TodoWriteInput

    async def run(self, ctx: ToolContext, inp: TodoWriteInput) -> ToolResult:
        try:
            changes = ctx.run.write_todos(inp.todos)
        except TodoRuleError as err:
            raise ToolError(f"todo list rejected: {err}") from None
        todos = ctx.run.state.todos
        open_items = sum(t["status"] in ("pending", "in_progress") for t in todos)
        return ToolResult(
            text=f"{render(todos)}\n({open_items} open of {len(todos)})",
            data={"changes": changes},
        )


class TodoReadInput(ToolInput):
    pass


class TodoRead(Tool):
    name = "todoread"
    Input = TodoReadInput

    async def run(self, ctx: ToolContext, inp: TodoReadInput) -> ToolResult:
        return ToolResult(text=render(ctx.run.state.todos), data={"todos": ctx.run.state.todos})
