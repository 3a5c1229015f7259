"""The tools every run gets, in a fixed order (the API tool list must be byte-identical)."""

from __future__ import annotations

from tools.base import Tool
from tools.todo import TodoRead, TodoWrite


def all_tools() -> list[Tool]:
    return [TodoWrite(), TodoRead()]
