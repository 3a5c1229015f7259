"""How a run ends: one exception class per way, each carrying its status and exit code
(docs/cli.md), raised wherever the end is found and caught once, by the loop (or the fleet's
controller), which records it as `run_finished` (mini-swe-agent's pattern)."""

from __future__ import annotations


class RunEnded(Exception):
    """The run is over; the message is its reason, in words."""

    status = "finished"
    exit_code = 0


class Finished(RunEnded):
    """The brain concluded: its final answer, or the planner's conclusion."""


class BudgetExhausted(RunEnded):
    """A limit (steps, USD, minutes) is used up; `agent budget` raises it, then `agent resume`."""

    status, exit_code = "budget_exhausted", 3


class Stuck(RunEnded):
    """The same calls and results kept repeating after a nudge."""

    status, exit_code = "stuck", 4


class Stopped(RunEnded):
    """The supervisor's `agent stop` (or Ctrl-C): servers killed, report written."""

    status, exit_code = "stopped", 130


class Failed(RunEnded):
    """The run cannot go on: the model refused or stopped oddly, or the prompt stays too long."""

    status, exit_code = "error", 1


class ModelUnavailable(RunEnded):
    """The API stayed overloaded past [model] overload_wait_minutes; `agent resume` goes on."""

    status, exit_code = "model_unavailable", 1
