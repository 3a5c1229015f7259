"""What one request measured. Times are time.perf_counter() seconds (CLOCK_MONOTONIC on Linux,
so records from child processes share the parent's clock)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class RequestRecord:
    start: float = 0.0  # just before the request bytes were written
    end: float = 0.0  # when the response was complete (or the request gave up)
    ttft: float = 0.0  # first message with non-empty `choices` - start (0 when none came)
    latency: float = 0.0  # last `choices` message - start (the usage-only chunk excluded)
    itl: list[float] = field(default_factory=list)  # gaps between consecutive `choices` messages
    output_tokens: int = 0  # usage.completion_tokens (or the text chunks, see usage_counted)
    prompt_tokens: int = 0  # usage.prompt_tokens; before the response: the length it was sent at
    chunks: int = 0  # messages with non-empty `choices`
    success: bool = False
    error_kind: str = ""  # e.g. "http_500", "connect", "no_usage"; "" when success
    error: str = ""  # one line, for the first few failures of a kind
    queue_time: float = 0.0  # time between a worker becoming free and sending (client queue)
    usage_counted: bool = False  # no usage message: tokens counted from the chunks
    max_tokens: int = 0  # the output length asked for (0: the level's, from before it existed)

    def fail(self, kind: str, message: str) -> None:
        self.success = False
        if not self.error_kind:  # the first cause wins: later ones are consequences
            self.error_kind, self.error = kind, message[:300]

    def to_wire(self) -> list[Any]:
        """A compact list for the pipe from a shard process."""
        return [
            self.start,
            self.end,
            self.ttft,
            self.latency,
            self.itl,
            self.output_tokens,
            self.prompt_tokens,
            self.chunks,
            self.success,
            self.error_kind,
            self.error,
            self.queue_time,
            self.usage_counted,
            self.max_tokens,
        ]

    @classmethod
    def from_wire(cls, row: list[Any]) -> RequestRecord:
        return cls(*row)
