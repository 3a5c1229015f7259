"""The error a tool raises for a mistake the model can act on. Its own module at the bottom of
tools/ so that what sits below the tool protocol (a server's command line, tools/servers/command.py;
a fleet's trial, tools/fleet/) raises the same error without importing tools/base.py."""


class ToolError(Exception):
    """Raised inside a tool for an error the model caused and can act on (one clear line)."""
