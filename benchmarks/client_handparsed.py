"""The hand-written HTTP/1.1 framing tools/bench/http.py used before httptools (issue 12): kept
only to measure the parser change side by side,

    .venv/bin/python benchmarks/client_capacity.py --candidates agent,raw,raw-handparsed

It is wrong against servers that split or close the way llama-server does (the final CRLF of a
chunked body in its own segment is left for the next request); never use it for a measurement.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from time import perf_counter

import orjson

from tools.bench.diagnose import error_message, no_choices
from tools.bench.http import Target
from tools.bench.request_record import RequestRecord

_CHOICES = b'"choices":[{'
_CHOICES_SP = b'"choices": [{'
_USAGE = (b'"usage":{', b'"usage": {')
_ERROR_BODY_KEEP = 2048

HEAD, CHUNKED, LENGTH, UNTIL_CLOSE, IDLE = range(5)


class HandParsedConn(asyncio.Protocol):
    """The connection before httptools: HTTP framing cut by hand with bytes.find."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.rec: RequestRecord | None = None
        self.fut: asyncio.Future[None] | None = None
        self.state = IDLE
        self.last_rx = 0.0
        self.requests = 0  # sent on this connection so far
        self.answered = False  # any byte of the current response received
        self.server_closed = False  # (read by loadgen)
        # per request (reset by send)
        self.head = bytearray()
        self.raw = b""  # chunked framing not yet cut
        self.sse = b""  # SSE text after the last complete event
        self.status, self.ctype, self.keep_alive = 0, "", True
        self.remaining, self.last_t, self.crlf = 0, 0.0, False
        self.usage_event = b""
        self.other_event = b""
        self.error_body = bytearray()

    # --- asyncio callbacks ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.rec is not None:
            if self.state == UNTIL_CLOSE:
                self._finish()
            else:
                self._abort("disconnect", f"server closed the connection ({exc or 'EOF'})")

    def data_received(self, data: bytes) -> None:
        t = perf_counter()
        self.last_rx = t
        if self.rec is None:
            return  # bytes after a finished response (or after an abort): ignore
        if self.state == HEAD:
            self.answered = True
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                if len(self.head) > 65536:
                    self._abort("bad_response", "response headers over 64 KiB")
                return
            data = bytes(self.head[end + 4 :])
            if not self._parse_head(bytes(self.head[:end])):
                return
            if not data:
                if self.state == LENGTH and self.remaining == 0:
                    self._finish()
                return
        if self.state == CHUNKED:
            self._chunked(data, t)
        elif self.state == LENGTH:
            if len(data) >= self.remaining:
                data = data[: self.remaining]
                self.remaining = 0
                self._body(data, t)
                self._finish()
            else:
                self.remaining -= len(data)
                self._body(data, t)
        elif self.state == UNTIL_CLOSE:
            self._body(data, t)

    # --- one request ---------------------------------------------------------------------------
    def send(self, request: bytes, rec: RequestRecord, fut: asyncio.Future[None]) -> None:
        self.rec, self.fut = rec, fut
        self.requests += 1
        self.answered = False
        self.state, self.head, self.raw, self.sse = HEAD, bytearray(), b"", b""
        self.status, self.ctype, self.keep_alive = 0, "", True
        self.remaining, self.last_t, self.crlf = 0, 0.0, False
        self.usage_event = b""
        self.other_event = b""
        self.error_body = bytearray()
        assert self.transport is not None
        rec.start = self.last_rx = perf_counter()
        self.transport.write(request)

    def abort(self, kind: str, message: str) -> None:
        """Give up on the request in flight (stall timeout, cancellation) and drop the socket."""
        if self.rec is not None:
            self._abort(kind, message)

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.closed = True

    # --- parsing -------------------------------------------------------------------------------
    def _parse_head(self, head: bytes) -> bool:
        lines = head.split(b"\r\n")
        status_line = lines[0].split(None, 2)
        if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/"):
            self._abort("bad_response", f"not an HTTP response: {lines[0][:80]!r}")
            return False
        try:
            self.status = int(status_line[1])
        except ValueError:
            self._abort("bad_response", f"bad status line: {lines[0][:80]!r}")
            return False
        self.keep_alive = status_line[0] == b"HTTP/1.1"
        chunked, length = False, -1
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip()
            if name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"content-length":
                length = int(value) if value.isdigit() else -1
            elif name == b"connection":
                self.keep_alive = value.lower() != b"close"
            elif name == b"content-type":
                self.ctype = value.decode("latin-1").lower()
        if chunked:
            self.state = CHUNKED
        elif length >= 0:
            self.state, self.remaining = LENGTH, length
        else:
            self.state, self.keep_alive = UNTIL_CLOSE, False
        return True

    def _chunked(self, data: bytes, t: float) -> None:
        raw = self.raw + data if self.raw else data
        pos, n = 0, len(raw)
        while pos < n:
            eol = raw.find(b"\r\n", pos)
            if eol < 0:
                break
            size_field = raw[pos:eol].split(b";", 1)[0]
            try:
                size = int(size_field, 16)
            except ValueError:
                self._abort("bad_response", f"bad chunk size {size_field[:20]!r}")
                return
            if size == 0:  # last chunk; trailers (none in practice) are not needed
                self.raw = b""
                self._finish()
                return
            start, end = eol + 2, eol + 2 + size
            if end + 2 > n:
                break  # the chunk is not complete yet
            self._body(raw[start:end], t)
            if self.rec is None:  # the body handler gave up
                return
            pos = end + 2
        self.raw = raw[pos:]

    def _body(self, payload: bytes, t: float) -> None:
        if self.status != 200:
            if len(self.error_body) < _ERROR_BODY_KEEP:
                self.error_body += payload[: _ERROR_BODY_KEEP - len(self.error_body)]
            return
        if self.crlf or (not self.sse and b"\r\n" in payload):
            self.crlf = True
            payload = payload.replace(b"\r\n", b"\n")
        buf = self.sse + payload if self.sse else payload
        end = buf.rfind(b"\n\n")
        if end < 0:
            self.sse = buf
            if len(buf) > 4 << 20:
                self._abort("bad_response", "no SSE event boundary in 4 MiB of body")
            return
        events, self.sse = buf[:end], buf[end + 2 :]
        n = events.count(_CHOICES) + events.count(_CHOICES_SP)
        rec = self.rec
        assert rec is not None
        if n:
            if rec.chunks:
                rec.itl.append(t - self.last_t)
            else:
                rec.ttft = t - rec.start
            if n > 1:  # several messages in one read arrive together: gaps of 0, as in vLLM
                rec.itl.extend([0.0] * (n - 1))
            rec.chunks += n
            self.last_t = t
        if _USAGE[0] in events or _USAGE[1] in events:
            self.usage_event = events
        elif not n and not self.other_event:
            self.other_event = events[:4096]  # for the diagnosis when no choices ever come

    def _finish(self) -> None:
        rec, fut = self.rec, self.fut
        assert rec is not None and fut is not None
        self.rec, self.fut, self.state = None, None, IDLE
        rec.end = perf_counter()
        if self.status != 200:
            rec.fail(f"http_{self.status}", error_message(bytes(self.error_body)) or "(no body)")
        elif self.sse.strip() and rec.chunks == 0 and not self.other_event:
            self.other_event = self.sse[:4096]  # a body without blank-line framing
        if self.status == 200:
            if rec.chunks:
                rec.latency = self.last_t - rec.start
                self._usage(rec)
            else:
                rec.fail(*no_choices(self.other_event, self.ctype))
        if not self.keep_alive:
            self.close()
        if not fut.done():
            fut.set_result(None)

    def _usage(self, rec: RequestRecord) -> None:
        events = self.usage_event
        if not events:
            rec.fail(
                "no_usage", "the stream had no usage message (stream_options.include_usage ignored)"
            )
            return
        at = max(events.rfind(_USAGE[0]), events.rfind(_USAGE[1]))
        start = events.rfind(b"data:", 0, at)
        stop = events.find(b"\n\n", at)
        line = events[start + 5 : stop if stop >= 0 else len(events)].strip()
        try:
            usage = orjson.loads(line)["usage"]
            rec.output_tokens = int(usage.get("completion_tokens") or 0)
            rec.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            rec.success = True
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            rec.fail("bad_response", f"unparsable usage message: {line[:120]!r}")

    def _abort(self, kind: str, message: str) -> None:
        rec, fut = self.rec, self.fut
        self.rec, self.fut, self.state = None, None, IDLE
        if rec is not None:
            rec.end = perf_counter()
            if rec.chunks:
                rec.latency = self.last_t - rec.start
            rec.fail(kind, message)
        self.close()
        if fut is not None and not fut.done():
            fut.set_result(None)


@dataclass(frozen=True)
class HandParsedTarget(Target):
    """A Target whose connections use the hand-written framing."""

    async def connect(self, timeout: float) -> HandParsedConn:  # type: ignore[override]
        loop = asyncio.get_running_loop()
        _, conn = await asyncio.wait_for(
            loop.create_connection(HandParsedConn, self.host, self.port), timeout
        )
        return conn
