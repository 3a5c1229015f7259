"""The scheduler: continuous batching driven by a decode-step loop, in simulated time.

Simulated (model) time runs `time_scale` times faster than real time. Step boundaries are
computed exactly in model time - a late wake-up delays delivery, never the physics - and a
request joins the first step that starts after it arrived, as on a real scheduler: prefill
batches of newly admitted requests (which yield their first token) alternate with decode steps
over every running sequence (which yield 1 token each, or 1 + accepted drafts with EAGLE).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import deque
from collections.abc import Callable

from sim import predictability
from sim.drift import Live
from sim.model import Model
from sim.prefix_cache import PrefixCache, cacheable, page_keys

MAX_PREFILL_TOKENS = 16384  # SGLang's default prefill budget per batch
DRIFT_PERIOD_MS = 5000.0  # model time between two draws of the slow noise component


class Seq:
    """One request inside the engine."""

    __slots__ = (
        "accepted",
        "arrival",
        "cached",
        "finish_reason",
        "finished",
        "generated",
        "keys",
        "max_tokens",
        "probs",
        "prompt_tokens",
        "sent",
        "target",
        "temperature",
        "text_score",
        "waiter",
    )

    def __init__(
        self, prompt_tokens: int, max_tokens: int, target: int, temperature: float
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.target = target  # tokens it will produce: max_tokens, or fewer at a natural EOS
        self.temperature = temperature
        self.generated = 0
        self.sent = 0
        self.accepted = 0
        self.arrival = 0.0
        self.finished = False
        self.finish_reason = "length" if target >= max_tokens else "stop"
        self.waiter: asyncio.Future[None] | None = None
        self.probs: tuple[float, ...] = (1.0,)
        self.text_score = 0.0  # sim.predictability of the prompt: raises speculative acceptance
        self.keys: list[int] = []  # prefix-cache page keys of the prompt
        self.cached = 0  # prompt tokens the prefix cache served at admission

    async def wait_finished(self) -> None:
        while not self.finished:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter

    async def wait(self) -> None:
        """Until there are tokens not yet sent, or the request is finished."""
        while self.sent >= self.generated and not self.finished:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter


class Engine:
    def __init__(
        self,
        model: Model,
        time_scale: float,
        noise: float,
        seed: int,
        schedule: Live | None = None,
        drift_start: float | None = None,
    ) -> None:
        self.model = model
        self.scale = time_scale
        self.noise = noise
        self.rng = random.Random(seed)
        self.launch_factor = max(0.5, self.rng.gauss(1.0, noise / 2))
        self.drift = 1.0
        self.drift_until = 0.0
        self.t0 = time.perf_counter()
        # the injected machine drift (--drift, sim/drift.py; not the noise's `drift` above): its
        # clock is real seconds since drift_start, shared by every launch of a campaign
        self.schedule = schedule
        now = time.time()
        self.schedule_offset_s = now - (drift_start if drift_start is not None else now)
        self.cursor = 0.0  # model ms at which the next iteration starts
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self.reserved = 0  # KV tokens promised to running requests
        self.wake: asyncio.Event | None = None
        self.on_log: Callable[[str], None] | None = None  # SGLang-like batch log lines
        self.log_interval = 40  # decode steps between two "Decode batch" lines
        self.last_gen_throughput = 0.0
        self._log_at = 0.0
        self._log_tokens = 0
        # counters for /metrics and /server_info
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.requests_total = 0
        self.finished_total = 0
        self.spec_drafts = 0
        self.spec_draft_tokens = 0
        self.spec_accepted = 0
        self.decode_steps = 0
        self.max_lag_ms = 0.0
        self.prefix_cache = PrefixCache(model.max_total_tokens)  # SGLang's radix cache

    # --------------------------------------------------------------- clock
    def now(self) -> float:
        """Model time, ms."""
        return (time.perf_counter() - self.t0) * 1000.0 * self.scale

    def speed(self) -> float:
        """The injected drift's speed at the step starting now (1.0 without a schedule)."""
        if self.schedule is None:
            return 1.0
        return self.schedule.speed(self.schedule_offset_s + self.cursor / self.scale / 1000.0)

    def _noisy(self, ms: float) -> float:
        ms /= self.speed()  # a slower box takes longer over every step: less throughput
        if self.noise <= 0:
            return ms
        if self.cursor >= self.drift_until:
            self.drift = max(0.5, self.rng.gauss(1.0, self.noise))
            self.drift_until = self.cursor + DRIFT_PERIOD_MS
        return ms * self.launch_factor * self.drift

    # --------------------------------------------------------------- requests
    def submit(self, seq: Seq, text: str = "") -> None:
        """Queue a request; `text` (the prompt) feeds the prefix cache and the acceptance."""
        seq.arrival = self.now()
        if text:
            seq.keys = page_keys(text.split())
            if self.model.args.spec:
                seq.text_score = predictability.score(text)
        spec = self.model.args.spec
        seq.probs = self.model.accept_probs(seq.temperature, seq.text_score) if spec else (1.0,)
        self.requests_total += 1
        self.waiting.append(seq)
        if self.wake is not None:
            self.wake.set()

    def abort(self, seq: Seq) -> None:
        """A client went away: free its slot at the next step boundary."""
        seq.target = min(seq.target, seq.generated)

    # --------------------------------------------------------------- the loop
    async def run(self) -> None:
        self.wake = asyncio.Event()
        while True:
            if not self.running and not self.waiting:
                self.wake.clear()
                await self.wake.wait()
                self.cursor = max(self.cursor, self.now())
                self._log_at, self._log_tokens = self.cursor, self.generation_tokens_total
            admitted = self._admit()
            if admitted:
                tokens = sum(s.prompt_tokens - s.cached for s in admitted)
                end = self.cursor + self._noisy(self.model.prefill_ms(tokens))
            elif self.running:
                batch = len(self.running)
                step = self._noisy(self.model.decode_ms(batch))
                end = self.cursor + step
            else:  # requests are waiting but none had arrived when this step would start
                self.cursor = max(self.cursor, min(s.arrival for s in self.waiting))
                continue
            delay = (end - self.now()) / self.scale / 1000.0
            if delay > 0.0008:
                await asyncio.sleep(delay)
            elif delay < 0:
                self.max_lag_ms = max(self.max_lag_ms, -delay * 1000.0)
            if admitted:
                self._finish_prefill(admitted)
            else:
                self._finish_decode(batch, end)
            self.cursor = end

    def _admit(self) -> list[Seq]:
        """Waiting requests that arrived before this iteration and fit: the next prefill batch."""
        out: list[Seq] = []
        budget = MAX_PREFILL_TOKENS
        limit = self.model.max_running
        pool = self.model.max_total_tokens
        while self.waiting and self.waiting[0].arrival <= self.cursor:
            seq = self.waiting[0]
            need = seq.prompt_tokens + seq.max_tokens
            if len(self.running) + len(out) >= limit or self.reserved + need > pool:
                break
            seq.cached = cacheable(seq.prompt_tokens, self.prefix_cache.match(seq.keys))
            if out and budget < seq.prompt_tokens - seq.cached:
                break
            self.waiting.popleft()
            budget -= seq.prompt_tokens - seq.cached
            self.reserved += need
            out.append(seq)
        return out

    def _finish_prefill(self, admitted: list[Seq]) -> None:
        if self.on_log is not None:
            self.on_log(
                f"Prefill batch. #new-seq: {len(admitted)}, "
                f"#new-token: {sum(s.prompt_tokens - s.cached for s in admitted)}, "
                f"#cached-token: {sum(s.cached for s in admitted)}, "
                f"token usage: {self.token_usage:.2f}, #running-req: {len(self.running)}, "
                f"#queue-req: {len(self.waiting)}, "
            )
        for seq in admitted:
            self.prompt_tokens_total += seq.prompt_tokens
            self.prefix_cache.insert(seq.keys)
            self.prefix_cache.hit_tokens += seq.cached
            self.prefix_cache.query_tokens += seq.prompt_tokens
            self._emit(seq, 1)
            if not seq.finished:
                self.running.append(seq)

    def _finish_decode(self, batch: int, end: float) -> None:
        spec = self.model.args.spec
        rand = self.rng.random
        drafts = self.model.draft_tokens - 1
        for seq in self.running:
            n = 1
            if spec:
                probs = seq.probs  # P(the step yields 1, 2, ... tokens)
                r = rand()
                acc = probs[0]
                while r >= acc and n < len(probs):
                    acc += probs[n]
                    n += 1
                self.spec_drafts += 1
                self.spec_draft_tokens += drafts
                self.spec_accepted += n - 1
            self._emit(seq, n)
        self.running = [s for s in self.running if not s.finished]
        self.decode_steps += 1
        if self.decode_steps % self.log_interval == 0:
            self._log_decode(batch, end)

    def _log_decode(self, batch: int, end: float) -> None:
        elapsed = end - self._log_at
        tokens = self.generation_tokens_total - self._log_tokens
        self.last_gen_throughput = tokens / elapsed * 1000.0 if elapsed > 0 else 0.0
        self._log_at, self._log_tokens = end, self.generation_tokens_total
        if self.on_log is None:
            return
        accept = f"accept len: {self.accept_length:.2f}, " if self.model.args.spec else ""
        self.on_log(
            f"Decode batch. #running-req: {batch}, #token: {self.reserved}, "
            f"token usage: {self.token_usage:.2f}, {accept}"
            f"cuda graph: {not self.model.eager(batch)}, "
            f"gen throughput (token/s): {self.last_gen_throughput:.2f}, "
            f"#queue-req: {len(self.waiting)}, "
        )

    def _emit(self, seq: Seq, n: int) -> int:
        n = max(0, min(n, seq.target - seq.generated))
        seq.generated += n
        self.generation_tokens_total += n
        if seq.generated >= seq.target:
            seq.finished = True
            self.finished_total += 1
            self.reserved -= seq.prompt_tokens + seq.max_tokens
        waiter = seq.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        return n

    def flush_cache(self) -> bool:
        """Empty the prefix cache; refused (False) while requests run, as SGLang refuses."""
        if self.running or self.waiting:
            return False
        self.prefix_cache.flush()
        return True

    # --------------------------------------------------------------- stats
    @property
    def accept_length(self) -> float:
        if not self.spec_drafts:
            return math.nan if not self.model.args.spec else self.model.tau()
        return 1.0 + self.spec_accepted / self.spec_drafts

    @property
    def token_usage(self) -> float:
        return self.reserved / max(1, self.model.max_total_tokens)
