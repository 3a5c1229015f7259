"""The supervisor's hand on a run: its inbox delivered and its budgets checked before each step,
by whatever drives the run - the one-box loop (agent/loop.py) before each model call, the
fleet's controller (agent/fleet/controller.py) before each planning round. One object, so a
stop, a budget and its 80 % warning mean the same on one box and on a fleet."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agent.ends import BudgetExhausted, Stopped
from state.inbox import drain
from state.run import Run
from tools.domain.config import BUDGET_WARN_AT
from tools.domain.permission_rules import RuleError, parse_rule

WARN_AT = BUDGET_WARN_AT  # share of a budget at which the run is told to wrap up


def drain_inbox(run: Run) -> int:
    """The run's inbox delivered (state/inbox.py: only what the `agent` CLI signed), an `allow`
    rule checked with the guard's grammar as `agent allow` checks it."""
    return drain(run, rule_check=_rule_problem)


def _rule_problem(text: str) -> str | None:
    try:
        parse_rule(text)
    except RuleError as err:
        return f"an invalid rule: {err}"
    return None


@dataclass
class Supervision:
    run: Run
    # the supervisor's messages: the run's inbox, or in a replay the recorded ones, at the steps
    # where they arrived
    inbox: Callable[[Run], object] = drain_inbox
    clock: Callable[[], float] = time.monotonic  # injectable: tests simulate time
    session_start: float = field(default_factory=time.monotonic)
    # a replay's minutes used, as recorded (session_replay.recorded_minutes): the figures the
    # budget compared, exactly - minutes worked back from a clock may land a rounding below
    recorded: Callable[[], float] | None = None

    def minutes(self) -> float:
        """Minutes used: the earlier sessions' and this one's."""
        if self.recorded is not None:
            return self.recorded()
        return self.run.state.minutes_before + (self.clock() - self.session_start) / 60

    def deliver(self) -> None:
        """The supervisor's waiting messages into the log (say, stop, budget, allow)."""
        self.inbox(self.run)

    def check(self) -> str | None:
        """Stopped or BudgetExhausted raised when the run must end; the first time a budget
        passes WARN_AT, a `budget_warning` event and the words telling the brain to wrap up."""
        state = self.run.state
        if state.stop_requested:
            raise Stopped("stopped by the supervisor")
        limits = state.limits
        used = {
            "max_steps": (state.steps, "steps"),
            "max_usd": (state.spend.usd, "USD"),
            "max_minutes": (self.minutes(), "minutes"),
        }
        shares = {k: v / limits[k] for k, (v, _) in used.items() if limits.get(k)}
        for key, share in shares.items():
            if share >= 1:
                value, unit = used[key]
                raise BudgetExhausted(f"budget exhausted: {value:g} of {limits[key]:g} {unit}")
        if shares and max(shares.values()) >= WARN_AT and not state.warned_budget:
            key = max(shares, key=lambda k: shares[k])
            value, unit = used[key]
            self.run.append("budget_warning", limit=key, used=value, of=limits[key])
            return (
                f"Budget: {value:.4g} of {limits[key]:g} {unit} used. Wrap up now: finish or "
                "cancel the open todos, kill the servers you started and write your conclusion."
            )
        return None
