"""The `agent` command: it owns argument parsing, and nothing imports it back."""

from agent.cli.main import main

__all__ = ["main"]
