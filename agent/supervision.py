"""The supervisor's hand on a run: its inbox delivered and its budgets checked before each step,
by whatever drives the run - the one-box loop (agent/loop.py) before each model call, the
fleet's controller (agent/fleet/controller.py) before each planning round. One object, so a
stop, a budget and its 80 % warning mean the same on one box and on a fleet."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median

from agent.ends import BudgetExhausted, Stopped
from state.fold import RunState, measured_pace, sweep_seconds
from state.inbox import drain
from state.run import Run
from tools.bench.duet import ROUND_MARGIN
from tools.domain.config import BUDGET_WARN_AT
from tools.domain.permission_rules import RuleError, parse_rule

WARN_AT = BUDGET_WARN_AT  # share of a budget at which the run is told to wrap up
# the proof of a winner, as this box measured its launches and sweeps: a duet's two launches and
# this many rounds (both servers sweep once a round), else this many launch pairs (the least that
# gives an interval); and what follows it. The rounds: those that establish a gain one noise
# floor beyond stats.MIN_GAIN when the rounds spread half the floor (stats.pairs_to_win) - the
# same 7 at any floor from 2 to 30 %, the gain and the spread scaling together
# (tests/test_proof_reserve.py). Real vLLM's rounds spread 0.087 and 0.11 in log where its floors
# were 18.0 and 23.9 %; 4 rounds, the lab's, left both duets open (docs/engines.md, stop 54)
PROOF_ROUNDS = 7
PROOF_PAIRS = 2
PROOF_AFTER_S = 20.0
RESERVE_AT_MOST = 0.5  # never more of the minutes budget than this: exploring needs the rest


def proof_reserve_minutes(state: RunState) -> float:
    """The minutes the proof of a winner takes on this box, from the run's own launches (the
    median seconds to ready) and sweeps (the median seconds at each level measured): a duet's
    where the host runs two servers at once ([server] side_by_side), else launch pairs'. 0
    before the run has measured a launch and a sweep. Reserved from the minutes budget: the
    wrap-up warning comes when the minutes left are down to it, if before WARN_AT - a
    real-vLLM campaign whose wrap-up came at 80 % of 30 minutes had time for one duet round."""
    starts, _ = measured_pace(state)
    sweep = sweep_seconds(state)  # on the wall clock: q6 (stop 55) held 5 of 7 rounds without
    if not starts or sweep is None:
        return 0.0
    start = median(starts)
    side = bool((state.config.get("server") or {}).get("side_by_side"))
    # a duet starts its last round only with ROUND_MARGIN of a round left and what follows
    # (tools/bench/duet.py): a real-vLLM campaign reserved 7 rounds and measured 6 (stop 55)
    rounds = PROOF_ROUNDS - 1 + ROUND_MARGIN
    seconds = 2 * start + rounds * 2 * sweep if side else PROOF_PAIRS * 2 * (start + sweep)
    return (seconds + PROOF_AFTER_S) / 60


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
        if not shares or state.warned_budget:
            return None
        key = max(shares, key=lambda k: shares[k])
        reserve, why = 0.0, ""
        if limits.get("max_minutes"):
            reserve = min(proof_reserve_minutes(state), RESERVE_AT_MOST * limits["max_minutes"])
            if limits["max_minutes"] - used["max_minutes"][0] <= reserve and shares[key] < WARN_AT:
                key = "max_minutes"
                why = f" (the {reserve:.1f} minutes a proof of the winner takes on this box)"
        if shares[key] < WARN_AT and not why:
            return None
        value, unit = used[key]
        more = {"reserve": round(reserve, 2)} if why else {}
        self.run.append("budget_warning", limit=key, used=value, of=limits[key], **more)
        return (
            f"Budget: {value:.4g} of {limits[key]:g} {unit} used{why}. Wrap up now: finish or "
            "cancel the open todos, kill the servers you started and write your conclusion."
        )
