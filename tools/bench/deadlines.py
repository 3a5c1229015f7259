"""How long the benchmark client waits, for each thing it waits on (docs/benchmark.md, Deadlines).

A server that keeps sending never trips a stall timeout (nothing received for N s): one header
byte a second, `: keepalive` comments forever, tokens past max_tokens. So every request has three
deadlines besides the stall, and every level one of its own:

- head: from the response's first byte to the end of its headers (a server writes its head in
  one go; one byte a second is not a server that is busy, it is one that is broken);
- first token: from the send to the first `choices` message (queueing and prefill included);
- total: from the send to the end of the response,
      max(floor_s, first_token_s + max_tokens / pace_tok_s)
  where pace_tok_s is the slowest pace a stream is expected to keep. Once LEARN_AFTER requests of
  the level have succeeded, the level's own pace tightens it for the requests still running:
      max(floor_s, slack x max_tokens x median(e2el / output_tokens of the successes))
  (never above the first formula): the level's expected pace, with room for a slow tail; and
  once this server or the run's baseline has served every level of a sweep (the same workload),
  the sweep's first-token deadline is max(floor_s, slack x the slowest p99 TTFT measured there),
  never above first_token_s (`served`, tools/learned_deadline.py);
- level: `level_s`, or derived - the connect timeout plus one warm-up round plus
  ceil(requests / streams) rounds of the total deadline (an open level: its last send time plus
  one warm-up round and one total deadline) - a backstop that holds even if a request's own
  deadlines did not.

Probes before and beside the levels (/v1/models, /server_info, /tokenize, a cache reset) are
whole operations bounded by `probe_s` each (httpx's timeouts are per read, so a trickled body
never trips them: the total is the caller's, asyncio.timeout).

The figures are wall-clock seconds, also against a time-scaled simulator.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from tools.bench.request_record import RequestRecord

LEARN_AFTER = 5  # successes of a level before its own pace tightens the total deadline
LEVEL_DEADLINE = "level_deadline"  # the error kind of what a level's deadline cut: a failed level
# the kinds of a request that waited out a deadline without a single token from the server
WAITED_OUT = frozenset({"timeout", "head_timeout", "ttft_timeout"})
ABANDONED = "abandoned"  # not sent: the level's first requests all waited out (loadgen.hopeless)


class DeadlineError(ValueError):
    """A deadline that is not a positive number of seconds."""


@dataclass(frozen=True)
class Deadlines:
    head_s: float = 30.0  # first response byte -> headers complete
    first_token_s: float = 600.0  # send -> first `choices` message (a long queue at C=250)
    pace_tok_s: float = 1.0  # the slowest pace (tokens/s of one stream) the total allows
    floor_s: float = 120.0  # no total deadline is shorter
    slack: float = 4.0  # x the level's learned seconds per token
    level_s: float | None = None  # a level's deadline; None: derived (above)
    probe_s: float = 30.0  # one whole probe request (/v1/models, /server_info, /tokenize, ...)

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if value is not None and not (ok and 0 < value < math.inf):  # inf: never bounded
                raise DeadlineError(f"deadline {name} must be a positive number, got {value!r}")

    @classmethod
    def from_job(cls, job: dict[str, Any] | None) -> Deadlines:
        return cls(**job) if job else cls()

    def to_job(self) -> dict[str, Any]:
        return asdict(self)

    def request_s(self, max_tokens: int) -> float:
        """A request's total deadline before the level has a pace of its own."""
        return max(self.floor_s, self.first_token_s + max(max_tokens, 1) / self.pace_tok_s)

    def served(self, ttft_s: float) -> Deadlines:
        """The deadlines of a sweep at levels already served, whose slowest p99 TTFT was
        `ttft_s` (tools/learned_deadline.py): the first token within slack x that, at least
        floor_s, never later than first_token_s."""
        tight = min(self.first_token_s, max(self.floor_s, self.slack * ttft_s))
        return replace(self, first_token_s=tight)

    def learned_request_s(self, max_tokens: int, s_per_token: float | None) -> float:
        """The total deadline once the level's pace is known (never above request_s)."""
        static = self.request_s(max_tokens)
        if s_per_token is None:
            return static
        learned = max(self.floor_s, self.slack * max(max_tokens, 1) * s_per_token)
        return min(static, learned)

    def level_deadline(
        self,
        requests: int,
        streams: int,
        max_tokens: int,
        connect_s: float,
        last_send_s: float | None = None,
    ) -> float:
        """The whole level's deadline (connections, warm-up, requests): `level_s`, or derived."""
        if self.level_s is not None:
            return self.level_s
        one = self.request_s(max_tokens)
        if last_send_s is not None:  # an open level: sends on a schedule, then the last answer
            return connect_s + one + last_send_s + one
        rounds = math.ceil(max(requests, 1) / max(streams, 1))
        return connect_s + one * (1 + rounds)

    def minimum_level_deadline(
        self, full: float, count: int, streams: int, max_tokens: int, connect_s: float, min_s: float
    ) -> float:
        """A level with a minimum length (`full`: its deadline for every request it prepared):
        its count's deadline, the minimum, then the answers in flight - at most `full`."""
        least = self.level_deadline(count, streams, max_tokens, connect_s)
        return min(full, least + min_s + self.request_s(max_tokens))

    def tick_s(self, stall_s: float) -> float:
        """How often the watchdog looks: a quarter of the shortest wait, at most a second."""
        return min(1.0, stall_s / 4, self.head_s / 4, self.first_token_s / 4, self.floor_s / 4)


def level_pace(records: Sequence[RequestRecord]) -> float | None:
    """The level's seconds per output token: the median over its successes, None until
    LEARN_AFTER of them."""
    per_token = [r.latency / r.output_tokens for r in records if r.success and r.output_tokens > 0]
    if len(per_token) < LEARN_AFTER:
        return None
    return statistics.median(per_token)
