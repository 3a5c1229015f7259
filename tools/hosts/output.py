"""Command output: bounded capture (head + tail) and cleaning for the model."""

from __future__ import annotations

import secrets
from typing import Any

from state.text import printable

MAX_CAPTURE = 16 * 1024 * 1024  # bytes kept per stream; beyond it the middle is dropped


class Capture:
    """Keeps the first and the last `limit / 2` bytes of a stream and counts what it dropped."""

    def __init__(self, limit: int = MAX_CAPTURE) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.half:  # trim in big steps, not on every chunk
                del self.tail[: len(self.tail) - self.half]

    @property
    def dropped(self) -> int:
        return max(0, self.total - len(self.head) - min(len(self.tail), self.half))

    def text(self) -> str:
        tail = bytes(self.tail[-self.half :]) if self.tail else b""
        if self.dropped:
            mark = f"\n[... {self.dropped} bytes dropped ...]\n".encode()
            return decode(bytes(self.head) + mark + tail)
        return decode(bytes(self.head) + tail)


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def clean(text: str) -> str:
    """What a terminal would show, roughly: escapes and control characters gone, a carriage
    return keeps only what was written after it on that line (progress bars)."""
    text = text.replace("\r\n", "\n")
    if "\r" in text:
        text = "\n".join(line.rstrip("\r").rsplit("\r", 1)[-1] for line in text.split("\n"))
    return printable(text)  # the one stripper of escapes and controls (C1 included)


def cut(text: str, limit: int) -> tuple[str, bool]:
    """Head and tail of `text` within about `limit` characters, on line boundaries when possible."""
    if len(text) <= limit:
        return text, False
    half = limit // 2
    head, tail = text[:half], text[-half:]
    if "\n" in head[half // 2 :]:
        head = head[: head.rindex("\n") + 1]
    if "\n" in tail[: half // 2]:
        tail = tail[tail.index("\n") + 1 :]
    omitted = len(text) - len(head) - len(tail)
    omitted_lines = text.count("\n", len(head), len(text) - len(tail))
    return f"{head}[... {omitted} characters ({omitted_lines} lines) cut ...]\n{tail}", True


def save_full(ctx: Any, prefix: str, text: str) -> str:
    """Keep the full text of a cut output under the run's outputs/; its path."""
    name = f"outputs/{prefix}-{ctx.run.state.last_seq:05d}-{secrets.token_hex(2)}.txt"
    return str(ctx.run.write_text(name, text))
