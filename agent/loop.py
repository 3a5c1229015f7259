"""The loop: run -> step -> query + execute. Everything it does is an event in the run's log.

Control flow by exceptions that carry the way the run ends (mini-swe-agent's pattern); budgets and
the supervisor's inbox are checked before every model call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from agent.brains.base import (
    Brain,
    BrainError,
    BrainUnavailable,
    PromptTooLong,
    Turn,
    TurnRequest,
)
from agent.compaction import compact_to_fit, maybe_compact
from agent.ends import (
    BudgetExhausted,
    Failed,
    Finished,
    ModelUnavailable,
    RunEnded,
    Stopped,
    Stuck,
)
from agent.interrupts import POLL_S, Interrupts, reason_now
from agent.supervision import Supervision
from agent.supervision import drain_inbox as drain  # signed, validated (state/inbox.py)
from agent.tool_batch import run_batch
from state.atomic import is_disk_full
from state.run import Run
from tools.base import ToolBox, ToolContext, ToolResult

T = TypeVar("T")
PAUSE_FIRST_S, PAUSE_MAX_S = 15.0, 120.0  # the run's pauses on an unavailable API: doubling
COMPACT_TRIES = 3  # compactions after "prompt is too long" before the run gives up
THINKING_SHOWN = 2000  # characters of a turn's thinking summary kept on its message event
NUDGE = (
    "You have made the same tool call with the same result several times (or are cycling "
    "between two calls). That is not progress: re-read the todo list and change approach."
)
# a run of failing calls whatever their input: a nudge after FAILING_NUDGE in a row, the end
# (stuck) after FAILING_END - no recorded session fails more than once in a row (docs/core.md)
FAILING_NUDGE, FAILING_END = 10, 20
FAILING = (
    "Your last {n} tool calls all failed. Trying variations of the same thing is not "
    "progress: read the errors, re-read the todo list and change approach; after {end} "
    "failures in a row the run ends as stuck."
)
# the stop reasons after which every block of a reply is whole; any other (max_tokens, refusal,
# model_context_window_exceeded) may cut the last one midway, and the SDK's partial parser
# drops an unfinished string: kill_server {"name": "cand-eag reads as kill_server {} (all)
WHOLE = ("tool_use", "end_turn", "stop_sequence", "pause_turn")


@dataclass
class Agent:
    run: Run
    brain: Brain
    tools: ToolBox
    ctx: ToolContext
    system: str
    max_tokens: int = 32_000
    session_start: float = field(default_factory=time.monotonic)
    calls: list[str] = field(default_factory=list)  # recent (call, result) keys, for stuck checks
    nudged: bool = False
    failing: int = 0  # tool calls in a row whose result is an error
    failing_nudged: bool = False  # this run of failures has had its nudge
    on_end: Callable[[str], Awaitable[None]] | None = None  # clean-up before run_finished
    overload_wait_minutes: float = 30.0  # how long an unavailable API pauses the run
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep  # injectable: tests simulate time
    clock: Callable[[], float] = time.monotonic
    recorded_minutes: Callable[[], float] | None = None  # a replay's (Supervision.recorded)
    # the supervisor's messages, delivered before each model call: the run's inbox, or in a
    # replay the recorded ones, at the steps where they arrived
    inbox: Callable[[Run], object] = drain
    interrupts: Interrupts = field(default_factory=Interrupts)  # a stop cuts a sweep short
    disk_full: bool = False  # the run ended because nothing more can be written
    # whether a call gets its tool_call event: in a replay, not the calls a crash left unstarted
    # (`agent resume` answered them without one)
    logs_call: Callable[[str], bool] = lambda _call_id: True

    async def run_loop(self) -> int:
        """Step until the run ends; returns the exit code. The run_finished event says why."""
        self.ctx.minutes_left = self.minutes_left
        try:
            while True:
                await self.step()
        except RunEnded as end:
            status, code, reason = end.status, end.exit_code, str(end)
        except BrainError as err:
            status, code, reason = "error", 1, str(err)
        except asyncio.CancelledError:  # Ctrl-C or SIGTERM: end as a graceful stop would
            status, code, reason = "stopped", 130, "interrupted"
        except Exception as err:  # a bug of ours: record it, clean up, exit 1 - never lose state
            if is_disk_full(err):  # every event before it is on disk; the one cut is not
                self.disk_full = True
                status, code, reason = "error", 1, self.disk_full_reason(err)
            else:
                traceback.print_exc()
                status, code, reason = "error", 1, f"internal error: {type(err).__name__}: {err}"
        if self.on_end is not None:
            try:
                await self.on_end(status)
            except Exception as err:  # the clean-up must not cost the run its final event
                traceback.print_exc()
                reason += f" (clean-up failed: {type(err).__name__}: {err})"
        return self.finish(status, code, reason)

    async def step(self) -> None:
        self.inbox(self.run)
        self.check_limits()
        await maybe_compact(self)
        turn = await self.query_fitting()
        await self.execute(turn)

    async def query_fitting(self) -> Turn:
        """The step's turn. A prompt the API refuses as past the model's context is compacted
        (harder at each try) and sent again; a run that resumes such a prompt does the same."""
        for tries in range(COMPACT_TRIES + 1):
            try:
                return await self.query()
            except PromptTooLong as err:
                if tries == COMPACT_TRIES:
                    raise Failed(f"{err}; still too long after {tries} compactions") from err
                try:
                    await compact_to_fit(self, tries)
                except PromptTooLong as again:
                    raise Failed(f"{again}; even the compaction summary does not fit") from again
        raise AssertionError("unreachable")

    async def query(
        self, purpose: str = "step", messages: list[dict[str, Any]] | None = None
    ) -> Turn:
        try:
            turn = await self.ask(self.request(purpose, messages))
        except BrainError as err:
            if err.exchange is not None:  # a refusal is part of the recording, like a turn
                self.run.append("api_exchange", **err.exchange)
            raise
        if turn.exchange is not None:
            self.run.append("api_exchange", **turn.exchange)
        return turn

    def request(
        self, purpose: str = "step", messages: list[dict[str, Any]] | None = None
    ) -> TurnRequest:
        """What the brain gets: the conversation (the fold's, unless given) and the tool specs."""
        state = self.run.state
        return TurnRequest(
            system=self.system,
            tools=self.tools.specs(),
            messages=state.messages if messages is None else messages,
            max_tokens=self.max_tokens,
            state=state,
            config=self.ctx.config,
            purpose="summary" if purpose == "summary" else "step",
        )

    async def ask(self, request: TurnRequest) -> Turn:
        """The brain's next turn. An overloaded, rate-limited or unreachable API (past the
        brain's own retries) pauses the run - a model_wait event per retry and per pause, with
        the next try's time - until it answers, or until overload_wait_minutes have passed: then
        the run ends, resumable. A stop or a budget ends any of these waits within POLL_S."""
        notify = getattr(self.brain, "notify_waits", None)
        if notify is not None:
            notify(lambda why, seconds: self.model_wait("retry", why, seconds))
        since, pauses = self.clock(), 0
        while True:
            try:
                return await self.interruptible(self.brain.next_turn(request))
            except BrainUnavailable as err:
                waited = self.clock() - since
                limit = self.overload_wait_minutes * 60
                if waited >= limit:
                    raise ModelUnavailable(
                        f"{err} (for {waited / 60:.1f} minutes); `agent resume "
                        f"{self.run.id}` goes on from here"
                    ) from err
                pause = min(PAUSE_FIRST_S * 2**pauses, PAUSE_MAX_S, limit - waited)
                self.model_wait("pause", str(err), pause, waited_s=round(waited, 1))
                await self.interruptible(self.sleep(pause))
                pauses += 1
                self.act_on(reason_now(self.run, self.minutes(), all_limits=True))

    def model_wait(self, stage: str, why: str, seconds: float, **more: Any) -> None:
        """The API is unavailable: say why and when the next try is (watch shows it)."""
        at = datetime.now(UTC) + timedelta(seconds=seconds)
        retry_at = at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        self.run.append(
            "model_wait",
            stage=stage,
            reason=why,
            pause_s=round(seconds, 1),
            retry_at=retry_at,
            **more,
        )

    async def interruptible(self, awaitable: Awaitable[T]) -> T:
        """Wait on the model (its stream, its retries, a pause) while looking every POLL_S for
        a stop and at the budgets: either one cancels the wait and ends the run at once."""
        task = asyncio.ensure_future(awaitable)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=POLL_S)
                if done:
                    return task.result()
                reason = reason_now(self.run, self.minutes(), all_limits=True)
                if reason is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                    self.act_on(reason)
        finally:
            if not task.done():  # the run itself was cancelled (Ctrl-C, SIGTERM)
                task.cancel()

    def act_on(self, reason: str | None) -> None:
        """End the run for a stop or a budget found while waiting: the inbox delivered first,
        so the log says why, as before a model call."""
        if reason is None:
            return
        self.inbox(self.run)
        self.check_limits()  # raises with the usual words
        if reason.startswith("stopped"):
            raise Stopped(reason)
        raise BudgetExhausted(reason)

    async def execute(self, turn: Turn) -> None:
        extra = {"thinking": turn.thinking[:THINKING_SHOWN]} if turn.thinking else {}
        self.run.append(
            "message",
            role="assistant",
            content=turn.content,
            stop_reason=turn.stop_reason,
            usage=turn.usage,
            cost_usd=turn.cost_usd,
            model=turn.model,
            **extra,  # the thinking summary, for watch and the report
        )
        for call, plan in turn.plans.items():  # why a call is made, where the brain says it
            self.run.append("planned", call=call, **plan)
        uses = turn.tool_uses  # independent calls overlap; the log stays in call order
        if turn.stop_reason not in WHOLE:  # no call of a cut reply runs: each is answered
            results = [self.refuse_cut(block, turn.stop_reason) for block in uses]
        else:
            watcher = asyncio.create_task(
                self.interrupts.watch(lambda: reason_now(self.run, self.minutes()))
            )
            try:
                results = await run_batch(self.ctx, uses, self.call_tool)
            finally:
                watcher.cancel()
        pattern = ""
        for block, (result, _) in zip(uses, results, strict=True):
            pattern = self.track(block, result.text) or pattern
            self.failing = self.failing + 1 if result.is_error else 0
        # after the turn's results: tool_result blocks must lead their message
        if pattern:
            self.unstick(pattern)
        self.check_failing()
        self.after_turn(turn)

    def refuse_cut(self, block: dict[str, Any], stop_reason: str) -> tuple[ToolResult, float]:
        """A call of a reply that stopped on `stop_reason`: its input may be partial, so it
        does not run; an error result keeps the conversation valid and says what to do."""
        self.run.append(
            "tool_call_cut",
            id=block["id"],
            name=block["name"],
            input=block.get("input"),
            stop_reason=stop_reason,
        )
        why = "at max_tokens" if stop_reason == "max_tokens" else f"(stop_reason {stop_reason})"
        result = ToolResult(
            text=f"{block['name']} not run: your reply was cut off {why}, so this call may be "
            "incomplete; no call of that reply ran. Send the calls again, shorter: split a "
            "long input (a large todo list, a long command) over several calls.",
            is_error=True,
            data={"cut": stop_reason},
        )
        self.run.append(
            "tool_result",
            id=block["id"],
            name=block["name"],
            text=result.text,
            is_error=True,
            data=result.data,
            duration_s=0.0,
        )
        return result, 0.0

    async def call_tool(self, ctx: ToolContext, block: dict[str, Any]) -> tuple[ToolResult, float]:
        """One tool_use: its tool_call and tool_result events, through the call's run view."""
        if self.logs_call(block["id"]):
            ctx.run.append("tool_call", id=block["id"], name=block["name"], input=block["input"])
        result, seconds = await self.interrupts.call(
            block["name"], lambda: self.tools.call(ctx, block["name"], block["input"], block["id"])
        )
        ctx.run.append(
            "tool_result",
            id=block["id"],
            name=block["name"],
            text=result.text,
            is_error=result.is_error,
            data=result.data,
            duration_s=round(seconds, 3),
        )
        return result, seconds

    def after_turn(self, turn: Turn) -> None:
        reason = turn.stop_reason
        if reason == "refusal":
            raise Failed("the model refused to continue (stop_reason: refusal)")
        if reason == "pause_turn" or turn.tool_uses:
            return  # pause_turn: the next request sends the turn back; a cut call's result
            # said what to do (refuse_cut)
        if reason in ("end_turn", "stop_sequence"):
            raise Finished(turn.text.strip()[:500] or "the brain ended its turn")
        if reason == "max_tokens":
            self.note("Your reply was cut off at max_tokens. Continue, and keep replies short.")
            return
        raise Failed(f"the model stopped with an unexpected stop_reason {reason!r}")

    # --- guards --------------------------------------------------------------------------------
    def check_limits(self) -> None:
        """The run's end if a stop or a budget says so; at 80 % of a budget, words to wrap up."""
        warning = self.supervision.check()
        if warning is not None:
            self.note(warning)

    def track(self, block: dict[str, Any], result_text: str) -> str:
        """Remember a call and its result; "repeat" or "cycle" when they go round in circles."""
        key = json.dumps([block["name"], block["input"], result_text], sort_keys=True)
        self.calls = [*self.calls[-3:], key]
        c = self.calls
        if len(c) >= 3 and c[-1] == c[-2] == c[-3]:
            return "repeat"
        if len(c) >= 4 and c[-1] == c[-3] and c[-2] == c[-4] and c[-1] != c[-2]:
            return "cycle"
        return ""

    def check_failing(self) -> None:
        """A run of failing calls, whatever their input (each a new guess): a nudge once it is
        FAILING_NUDGE long, the end at FAILING_END. A call that succeeds starts a new run."""
        if self.failing == 0:
            self.failing_nudged = False
        elif self.failing >= FAILING_NUDGE and not self.failing_nudged:
            self.failing_nudged = True
            self.run.append("stuck_nudge", pattern="failing", calls=self.failing)
            self.note(FAILING.format(n=self.failing, end=FAILING_END))
        elif self.failing >= FAILING_END:
            raise Stuck(f"stuck: {self.failing} tool calls in a row failed, after a nudge")

    def unstick(self, pattern: str) -> None:
        if self.nudged:
            raise Stuck("stuck: the same tool calls and results kept repeating after a nudge")
        self.nudged, self.calls = True, []
        self.run.append("stuck_nudge", pattern=pattern)
        self.note(NUDGE)

    def note(self, text: str) -> None:
        """A message from the loop itself, put before the next model call."""
        self.run.append("message", role="user", content=[{"type": "text", "text": text}])

    @property
    def supervision(self) -> Supervision:
        """The inbox and the budgets, as the fleet's controller checks them too."""
        return Supervision(
            self.run, self.inbox, self.clock, self.session_start, self.recorded_minutes
        )

    def minutes(self) -> float:
        return self.supervision.minutes()

    def minutes_left(self) -> float | None:
        """What the minutes budget leaves now (None: the run has none)."""
        limit = self.run.state.limits.get("max_minutes")
        return float(limit) - self.minutes() if limit else None

    def disk_full_reason(self, err: BaseException) -> str:
        return (
            f"disk full ({err}): free space where {self.run.path} is, then "
            f"`agent resume {self.run.id}` goes on from the last event written"
        )

    def finish(self, status: str, exit_code: int, reason: str) -> int:
        try:
            self.run.append(
                "run_finished",
                status=status,
                exit_code=exit_code,
                reason=reason,
                # never below 0: a session_start read off another clock (a replay's, a test's)
                # is no time spent, and the fold refuses a negative figure
                session_minutes=max(0.0, round((time.monotonic() - self.session_start) / 60, 4)),
            )
        except OSError as err:
            if not is_disk_full(err):
                raise
            self.disk_full = True  # the end is not recorded: a resume takes it for a crash
            if not reason.startswith("disk full"):
                reason = f"{reason}; then {self.disk_full_reason(err)}"
            print(f"run {self.run.id}: {reason}", file=sys.stderr)
        return exit_code
