"""Cutting running tool calls short: `agent stop` and an exhausted minutes budget do not wait
for a sweep to end (a 4.5-minute sweep once ran a 4-minute budget to 10 minutes).

While a turn's calls run, the loop looks every POLL_S for a stop waiting in the inbox (left there:
delivering it in the middle of a call's events would split the conversation) and at the minutes
used. Either one cancels the calls that can be cut; each gets an `interrupted` result, and the
next step delivers the stop or ends the run on its budget, as it always did. The loop looks the
same way while it awaits the model - its stream, its retries, a pause (agent/loop.py
`interruptible`) - and there the stop is delivered and the run ends at once.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from state.inbox import waiting
from state.run import Run
from tools.base import INTERRUPTED_PREFIX, ToolResult

# a benchmark saves its completed levels when cancelled; a server being started is recorded and
# killed by the run's end; other calls are short, or must not be cut half-way (bash, transfers)
INTERRUPTIBLE = ("run_benchmark", "start_server")
POLL_S = 0.5

Call = Callable[[], Awaitable[tuple[ToolResult, float]]]


@dataclass
class Interrupts:
    reason: str | None = None  # why the turn's calls were cut short (a stop, the budget)
    running: set[asyncio.Task[Any]] = field(default_factory=set)  # interruptible calls running

    async def watch(self, check: Callable[[], str | None]) -> None:
        """Until `check` names a reason: then cancel the interruptible calls running."""
        self.reason = None
        while self.reason is None:
            await asyncio.sleep(POLL_S)
            self.reason = check()
        for task in list(self.running):
            task.cancel()

    async def call(self, name: str, call: Call) -> tuple[ToolResult, float]:
        """Run one tool call of the turn, cut short (or not started) once a reason is found."""
        if self.reason is not None:  # found while this call waited for an earlier one
            return self.result(name, "was not started"), 0.0
        if name not in INTERRUPTIBLE:
            return await call()
        task, start = asyncio.current_task(), time.perf_counter()
        assert task is not None
        self.running.add(task)
        try:
            return await call()
        except asyncio.CancelledError:
            if self.reason is None:  # Ctrl-C, SIGTERM: the whole run is being cancelled
                raise
            task.uncancel()
            return self.result(name, "was cut short"), time.perf_counter() - start
        finally:
            self.running.discard(task)

    def result(self, name: str, what: str) -> ToolResult:
        return ToolResult(
            text=f"{INTERRUPTED_PREFIX}: this {name} call {what} ({self.reason}); what it "
            "finished is kept (a benchmark's completed levels are saved as its result)",
            is_error=True,
            data={"interrupted": True, "reason": self.reason},
        )


def reason_now(run: Run, minutes: float, all_limits: bool = False) -> str | None:
    """A stop requested or waiting, or the minutes budget used up (with an `agent budget` that
    is waiting, the newest limit). With `all_limits` (while the model is awaited: its steps and
    spend cannot move), the steps and USD budgets too, which only a lowered limit can cross."""
    state = run.state
    messages = waiting(run.path, state.inbox_done)
    if state.stop_requested or any(m.get("kind") == "stop" for m in messages):
        return "stopped by the supervisor"
    limits = dict(state.limits)
    for m in messages:
        if m.get("kind") == "budget":
            limits.update({k: v for k, v in (m.get("limits") or {}).items() if v})
    used = {"max_minutes": (minutes, "minutes")}
    if all_limits:
        used |= {"max_steps": (state.steps, "steps"), "max_usd": (state.spend.usd, "USD")}
    for key, (value, unit) in used.items():
        limit = limits.get(key)
        if limit and value >= limit:
            return f"budget exhausted: {value:g} of {limit:g} {unit}"
    return None


def cancel_on_sigterm() -> None:
    """SIGTERM cancels the running task (a run's main), once: a second one must not cut the
    clean-up the cancellation starts (killing servers, stopping a cluster). On a fleet, call it
    after ray.init, whose own handler would abort the process."""
    task = asyncio.current_task()
    if task is not None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, lambda: task.cancelling() or task.cancel())
