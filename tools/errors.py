"""The error a tool raises for a mistake the model can act on. Its own module at the bottom of
tools/ so that what sits below the tool protocol (a server's command line, tools/servers/command.py;
a fleet's trial, tools/fleet/) raises the same error without importing tools/base.py."""

from typing import Any


class ToolError(Exception):
    """Raised inside a tool for an error the model caused and can act on (one clear line).
    `data`: the typed cause, kept beside the text in the tool_result event, so that code reads
    what happened without parsing the words written for the model."""

    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.data: dict[str, Any] = data or {}
