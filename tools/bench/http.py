"""A lean streaming HTTP/1.1 client for OpenAI-compatible SSE, as an asyncio Protocol.

Why not httpx or aiohttp: at C=250 a server streams ~25,000 SSE messages a second, and a client
that parses each with json.loads behind a generic stream iterator spends ~100-200 us of CPU on
every one (docs/benchmark.md has the figures). Here a socket read costs one callback: the HTTP
framing is llhttp's (httptools, the parser of Node.js and uvicorn: servers nobody here wrote
split, close and keep alive in ways a hand-written parser keeps missing), `choices` messages are
counted with bytes.count on the complete events, and only the one usage message of a request (or
an error) is parsed, with orjson.

One connection carries one request at a time (keep-alive between requests), so C connections
are C requests in flight and nothing queues inside the client.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from time import perf_counter
from urllib.parse import urlsplit

import httptools
import orjson

from tools.bench.deadlines import Deadlines
from tools.bench.diagnose import error_message, no_choices
from tools.bench.request_record import RequestRecord

# A message with non-empty choices: `"choices":[{` (vLLM, SGLang: compact JSON) or with a space
# after the colon (json.dumps defaults). An empty list (the usage-only chunk) matches neither.
_CHOICES = b'"choices":[{'
_CHOICES_SP = b'"choices": [{'
_USAGE = (b'"usage":{', b'"usage": {')
# A `choices` message that carries no text (a chat role chunk, llama-cpp-python's last chunk with
# the finish reason): not a token when the tokens are counted from the chunks.
_EMPTY = (
    b'"text":""',
    b'"content":""',
    b'"content":null',
    b'"delta":{}',
    b'"text": ""',
    b'"content": ""',
    b'"content": null',
    b'"delta": {}',
)
_DONE = b"data: [DONE]"
# The finish reason: null in every message but the last (the model stopped or hit max_tokens);
# a stream with null ones and no last one was cut short by the server
_FINISHED = (b'"finish_reason":"', b'"finish_reason": "')
_UNFINISHED = (b'"finish_reason":null', b'"finish_reason": null')
_AT_LENGTH = (b'"finish_reason":"length"', b'"finish_reason": "length"')
_ERROR_BODY_KEEP = 2048
# tokens past max_tokens a stream may carry before it is cut: llama-cpp-python's server finishes
# the UTF-8 character that max_tokens split (its multibyte check skips the length check), up to
# 3 more byte tokens; a server that ignores max_tokens is still cut within a few tokens
OVERSHOOT = 3
_HEADERS_MAX = 65536
# A message that is a JSON object carries a `choices` list; fewer lists than objects means one is
# not a completion chunk (an error, `{"choices": 5}`), looked at one by one (`_unlisted`)
_LISTS = (b'"choices":[', b'"choices": [')
_FIELDS = (b"id:", b"retry:")  # SSE fields with nothing for us
# A request asks for one completion (n=1): each `choices` message carries one choice, of index 0
# (or none). `"index"` appears in no JSON string unescaped (a text "index" only costs a parse).
_INDEX = b'"index"'
_INDEX_0 = (b'"index":0', b'"index": 0')
_NEXT_CHOICE = (b"},{", b"}, {")


class BadURL(ValueError):
    pass


@dataclass(frozen=True)
class Target:
    """Where requests go: scheme, host, port and the path prefix before /v1/..."""

    scheme: str
    host: str
    port: int
    prefix: str = ""

    @classmethod
    def parse(cls, url: str) -> Target:
        parts = urlsplit(url if "://" in url else "http://" + url)
        if parts.scheme not in ("http", "https"):
            raise BadURL(
                f"unsupported URL scheme {parts.scheme!r} in {url!r}: use http:// or https://"
            )
        if not parts.hostname:
            raise BadURL(f"no host in URL {url!r}")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise BadURL(f"bad port in URL {url!r}") from None
        prefix = parts.path.rstrip("/")
        if prefix.endswith("/v1"):  # an OpenAI-style base URL; the endpoint paths carry /v1
            prefix = prefix[:-3]
        return cls(parts.scheme, parts.hostname, port, prefix)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.prefix}"

    def request(self, path: str, body: bytes) -> bytes:
        """The full POST request bytes for one body (built before the clock starts)."""
        host = self.host if ":" not in self.host else f"[{self.host}]"
        head = (
            f"POST {self.prefix}{path} HTTP/1.1\r\nHost: {host}:{self.port}\r\n"
            "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"User-Agent: campaign-agent-bench\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    async def connect(self, timeout: float) -> StreamConn:
        loop = asyncio.get_running_loop()
        ctx = ssl.create_default_context() if self.scheme == "https" else None
        _, conn = await asyncio.wait_for(
            loop.create_connection(StreamConn, self.host, self.port, ssl=ctx), timeout
        )
        return conn


class StreamConn(asyncio.Protocol):
    """One keep-alive connection; `send` one request, await the future it is given.

    httptools calls back while `feed_data` runs; the callbacks only collect (header fields,
    body pieces, the end of the message), and the SSE scan runs once per socket read after it.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.rec: RequestRecord | None = None
        self.fut: asyncio.Future[None] | None = None
        self.last_rx = 0.0
        self.requests = 0  # sent on this connection so far
        self.answered = False  # any byte of the current response received
        self.first_rx = 0.0  # when the current response's first byte came
        self.server_closed = False  # the server ended the connection (EOF or reset), not we
        self._reset()

    def _reset(self) -> None:
        """The per-response state; a fresh llhttp parser for each response."""
        self.parser = httptools.HttpResponseParser(self)
        self.pieces: list[bytes] = []  # body bytes of the current read, before the SSE scan
        self.headers_done = self.complete = self.extra = False
        self.framed = False  # a Content-Length or chunked body (else: until the server closes)
        self.status, self.ctype, self.keep_alive = 0, "", True
        self.first = b""  # the response's first bytes, for the message when it is not HTTP
        self.head_rx = 0  # bytes received before the end of the headers
        self.sse = b""  # SSE text after the last complete event
        self.last_t, self.crlf, self.done_seen, self.empty = 0.0, False, False, 0
        self.finished = self.unfinished = self.at_length = False
        self.usage_event = b""
        self.other_event = b""
        self.error_body = bytearray()
        self.body_rx = 0  # body bytes of the current response

    # --- asyncio callbacks ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.server_closed = not self.closed  # not our own close()
        self.closed = True
        if self.rec is None:
            return
        if self.headers_done and (not self.framed or self.done_seen or _DONE in self.sse):
            # a body delimited by the close, or a stream that ended with `data: [DONE]` and lost
            # only its last framing bytes: the response is whole
            self._finish()
        else:
            self._abort("disconnect", f"server closed the connection ({exc or 'EOF'})")

    def data_received(self, data: bytes) -> None:
        t = perf_counter()
        self.last_rx = t
        if self.rec is None:
            # bytes nobody asked for (after a complete response or an abort): this connection's
            # framing can no longer be trusted, so the next request takes a fresh one
            self.close()
            return
        if not self.answered:
            self.answered, self.first, self.first_rx = True, data[:80], t
        if not self.headers_done:
            self.head_rx += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as err:
            if not self.complete:
                self._abort("bad_response", self._parser_error(err))
                return
            self.extra = True  # junk after a whole response: answer it, then drop the socket
        if self.pieces:
            self._scan(t)
            if self.rec is None:  # the scan gave up on the response
                return
        if self.complete:
            self._finish()
        elif not self.headers_done and self.head_rx > _HEADERS_MAX:
            self._abort("bad_response", "response headers over 64 KiB")

    # --- httptools callbacks (they only collect) -----------------------------------------------
    def on_message_begin(self) -> None:
        if self.complete:
            self.extra = True  # a second response on one request

    def on_header(self, name: bytes, value: bytes) -> None:
        lower = name.lower()
        if lower == b"content-type":
            self.ctype = value.decode("latin-1").lower()
        elif lower in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_headers_complete(self) -> None:
        if self.complete:
            return
        self.headers_done = True
        self.status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()  # llhttp forgets it once complete

    def on_body(self, body: bytes) -> None:
        if not self.complete:
            self.pieces.append(body)

    def on_message_complete(self) -> None:
        self.complete = True

    # --- one request ---------------------------------------------------------------------------
    def send(self, request: bytes, rec: RequestRecord, fut: asyncio.Future[None]) -> None:
        self.rec, self.fut = rec, fut
        self.requests += 1
        self.answered = False
        self._reset()
        assert self.transport is not None
        rec.start = self.last_rx = perf_counter()
        self.transport.write(request)

    def abort(self, kind: str, message: str) -> None:
        """Give up on the request in flight (a deadline, cancellation) and drop the socket."""
        if self.rec is not None:
            self._abort(kind, message)

    def overdue(
        self, now: float, dl: Deadlines, total_s: float, stall_s: float
    ) -> tuple[str, str] | None:
        """Which deadline the request in flight has passed (tools/bench/deadlines.py), if any."""
        rec = self.rec
        if rec is None:
            return None
        if now - self.last_rx > stall_s:
            return "timeout", f"no data from the server for {stall_s:g} s"
        if self.answered and not self.headers_done and now - self.first_rx > dl.head_s:
            return "head_timeout", (
                f"the response head was not complete {dl.head_s:g} s after its first byte "
                f"({self.head_rx} bytes so far)"
            )
        if rec.chunks == 0 and self.status in (0, 200) and now - rec.start > dl.first_token_s:
            got = "nothing" if not self.answered else f"{self.body_rx} body bytes and no token"
            return "ttft_timeout", f"no token within {dl.first_token_s:g} s of the request ({got})"
        if now - rec.start > total_s:
            return "deadline", (
                f"not complete within {total_s:g} s (max_tokens {rec.max_tokens}, "
                f"{rec.chunks} messages so far)"
            )
        return None

    def close(self) -> None:
        was_open, self.closed = not self.closed, True  # before connection_lost can run
        if was_open and self.transport is not None:
            self.transport.close()

    # --- the SSE scan --------------------------------------------------------------------------
    def _scan(self, t: float) -> None:
        payload = self.pieces[0] if len(self.pieces) == 1 else b"".join(self.pieces)
        self.pieces = []
        self.body_rx += len(payload)
        if self.status != 200:
            if len(self.error_body) < _ERROR_BODY_KEEP:
                self.error_body += payload[: _ERROR_BODY_KEEP - len(self.error_body)]
            return
        buf = self.sse + payload if self.sse else payload
        if self.crlf or b"\r" in payload:  # CRLF events; a CR at the end waits for its LF
            self.crlf = True
            buf = buf.replace(b"\r\n", b"\n")
        end = buf.rfind(b"\n\n")
        if end < 0:
            self.sse = buf
            if len(buf) > 4 << 20:
                self._abort("bad_response", "no SSE event boundary in 4 MiB of body")
            return
        events, self.sse = buf[:end], buf[end + 2 :]
        self._events(events, t)

    def _events(self, events: bytes, t: float) -> None:
        """Count and check the complete events of one read (the tail waits for its blank line)."""
        rec = self.rec
        assert rec is not None
        junk = _junk(events)
        if junk is not None and (rec.chunks or "text/event-stream" in self.ctype):
            self._abort(*junk)  # on a body that is no stream at all, _finish says what it is
            return
        n = events.count(_CHOICES) + events.count(_CHOICES_SP)
        if n and not rec.chunks:
            shape = _first_choices(events)  # one message parsed whole per request: its shape
            if shape is not None:
                self._abort(*shape)
                return
        if n and not _one_choice_each(events, n):
            extra = _extra_choices(events)  # parsed only where the counts do not tell
            if extra is not None:
                self._abort(*extra)
                return
        if n:
            if rec.chunks:
                rec.itl.append(t - self.last_t)
            else:
                rec.ttft = t - rec.start
            if n > 1:  # several messages in one read arrive together: gaps of 0, as in vLLM
                rec.itl.extend([0.0] * (n - 1))
            rec.chunks += n
            self.last_t = t
            if b'""' in events or b"{}" in events or b't":null' in events or b't": null' in events:
                self.empty += sum(events.count(e) for e in _EMPTY)
            if rec.max_tokens and rec.chunks - self.empty > rec.max_tokens + OVERSHOOT:
                # every text chunk is at least one token: the server streams past max_tokens
                self._abort(
                    "over_max_tokens",
                    f"the server streamed {rec.chunks - self.empty} text messages for max_tokens "
                    f"{rec.max_tokens}: cut",
                )
                return
        if _USAGE[0] in events or _USAGE[1] in events:
            self.usage_event = events
        elif not n and not self.other_event:
            self.other_event = events[:4096]  # for the diagnosis when no choices ever come
        if _DONE in events:
            self.done_seen = True
        if n and (_FINISHED[0] in events or _FINISHED[1] in events):
            self.finished = True
        if n and (_UNFINISHED[0] in events or _UNFINISHED[1] in events):
            self.unfinished = True
        if n and (_AT_LENGTH[0] in events or _AT_LENGTH[1] in events):
            self.at_length = True

    def _finish(self) -> None:
        if self.status == 200 and self.rec is not None and self.rec.chunks and self.sse.strip():
            tail, self.sse = self.sse, b""  # a last event without its blank line
            self._events(tail, perf_counter())
            if self.rec is None:  # the tail was junk
                return
        rec, fut = self.rec, self.fut
        assert rec is not None and fut is not None
        self.rec, self.fut = None, None
        rec.end = perf_counter()
        if self.status != 200:
            rec.fail(f"http_{self.status}", error_message(bytes(self.error_body)) or "(no body)")
        elif self.sse.strip() and rec.chunks == 0 and not self.other_event:
            self.other_event = self.sse[:4096]  # a body without blank-line framing
        if self.status == 200:
            if rec.chunks:
                rec.latency = self.last_t - rec.start
                if self.done_seen:
                    self._usage(rec)
                else:  # complete only when the protocol says so
                    rec.fail("incomplete", "the stream ended without `data: [DONE]`")
            else:
                rec.fail(*no_choices(self.other_event, self.ctype))
        if not self.keep_alive or self.extra:
            self.close()
        if not fut.done():
            fut.set_result(None)

    def _usage(self, rec: RequestRecord) -> None:
        events = self.usage_event
        if not events:
            self._count_from_chunks(rec)
            return
        at = max(events.rfind(_USAGE[0]), events.rfind(_USAGE[1]))
        start = events.rfind(b"data:", 0, at)
        stop = events.find(b"\n\n", at)
        line = events[start + 5 : stop if stop >= 0 else len(events)].strip()
        try:
            usage = orjson.loads(line)["usage"]
            rec.output_tokens = int(usage.get("completion_tokens") or 0)
            rec.prompt_tokens = int(usage.get("prompt_tokens") or 0) or rec.prompt_tokens
            rec.success = True
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            rec.fail("bad_response", f"unparsable usage message: {line[:120]!r}")
            return
        if rec.max_tokens and rec.output_tokens > rec.max_tokens + OVERSHOOT:
            rec.output_tokens = 0
            rec.fail(
                "over_max_tokens",
                f"usage says {usage.get('completion_tokens')} tokens for max_tokens "
                f"{rec.max_tokens}",
            )

    def _count_from_chunks(self, rec: RequestRecord) -> None:
        """No usage message (llama-cpp-python's server ignores include_usage): one `choices`
        message with text is taken as one token, or max_tokens where the finish reason is
        "length"; the prompt keeps the length it was sent with."""
        tokens = rec.chunks - self.empty
        if self.at_length and rec.max_tokens:
            # the server says it stopped at max_tokens: exact, where a token of no text of its
            # own (a piece of a UTF-8 character, a control byte) is an empty chunk
            tokens = rec.max_tokens
        if self.unfinished and not self.finished:  # else it would pass for an early EOS
            rec.fail(
                "truncated",
                "the stream ended without a finish reason or a usage message: the server cut it "
                "short (llama-cpp-python's server does so to a stream when another request waits, "
                "unless started with --interrupt_requests false)",
            )
            return
        if tokens <= 0:
            rec.fail("no_usage", "the stream had no usage message and no text to count")
            return
        rec.output_tokens, rec.usage_counted, rec.success = tokens, True, True

    def _abort(self, kind: str, message: str) -> None:
        rec, fut = self.rec, self.fut
        self.rec, self.fut = None, None
        if rec is not None:
            rec.end = perf_counter()
            if rec.chunks:
                rec.latency = self.last_t - rec.start
            rec.fail(kind, message)
        self.close()
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _parser_error(self, err: Exception) -> str:
        if not self.first.startswith(b"HTTP/"):
            return f"not an HTTP response: {self.first!r}"
        return f"bad HTTP response ({err})"


def _junk(events: bytes) -> tuple[str, str] | None:
    """Why complete SSE events are not a completion stream, or None: every line is a comment, a
    `data:` JSON object or [DONE], or a field we ignore; `event: error` is the server's error;
    every object has a `choices` list (or is a usage message). The common case - nothing but
    `data: {...}` and [DONE] lines - is told by counts alone (a JSON text holds no raw newline,
    so `}\n` ends a line); anything else takes the line-by-line look. No message is parsed here
    (`_first_choices` parses one per request, `_unlisted` those without a choices list)."""
    if b"\n" not in events:  # one event of one line: most reads, at any concurrency
        if events[-1:] == b"}" and events.startswith((b"data: {", b"data:{")):
            return None if _LISTS[0] in events or _LISTS[1] in events else _unlisted(events)
        if events in (b"data: [DONE]", b"data:[DONE]"):
            return None
    lines = events.split(b"\n")
    data = events.count(b"\ndata:") + events.startswith(b"data:")
    if len(lines) - lines.count(b"") == data:  # data lines only
        objects = events.count(b"data: {") + events.count(b"data:{")
        closed = events.count(b"}\n") + events.endswith(b"}")
        done = events.count(b"data: [DONE]") + events.count(b"data:[DONE]")
        if objects == closed and objects + done == data:
            return _unlisted(events) if _lists(events) < objects else None
    return _junk_lines(lines, events)


def _lists(events: bytes) -> int:
    return events.count(_LISTS[0]) + events.count(_LISTS[1])


def _junk_lines(lines: list[bytes], events: bytes) -> tuple[str, str] | None:
    """`_junk`, line by line."""
    objects = 0
    error_event = False
    for line in lines:
        if not line or line[:1] == b":":
            continue
        if line[:5] == b"data:":
            payload = line[5:].strip()
            if payload[:1] == b"{" and payload[-1:] == b"}":
                objects += 1
                if error_event:
                    return "stream_error", error_message(payload) or "an `event: error`"
            elif payload != b"[DONE]":
                return "bad_response", f"not a JSON message: {payload[:120]!r}"
        elif line[:6] == b"event:":
            error_event = error_event or line[6:].strip() == b"error"
        elif not line.startswith(_FIELDS):
            return "bad_response", f"not an SSE line: {line[:120]!r}"
    if error_event:
        return "stream_error", "an `event: error` without a message"
    if objects and _lists(events) < objects:
        return _unlisted(events)
    return None


def _unlisted(events: bytes) -> tuple[str, str] | None:
    """The message without a `choices` list: an error, a usage message alone (fine), or junk."""
    for line in events.split(b"\n"):
        if line[:5] != b"data:" or _LISTS[0] in line or _LISTS[1] in line:
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            continue
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return "bad_response", f"unparsable SSE message: {payload[:120]!r}"
        if not isinstance(obj, dict):
            return "bad_response", f"not a JSON object: {payload[:120]!r}"
        if "error" in obj:
            return "stream_error", error_message(payload)
        if not isinstance(obj.get("usage"), dict):
            return "bad_response", f"a message without a choices list: {payload[:120]!r}"
    return None


def _one_choice_each(events: bytes, n: int) -> bool:
    """True when the counts show that each of the read's `n` choices messages carries one choice
    of index 0 (or one without an index); False when only parsing can tell (`_extra_choices`).
    Every choice of a server that follows the protocol has an index: one `"index"` per message,
    and it is 0; where there is none, a second choice follows a `}`."""
    indexes = events.count(_INDEX)
    if indexes == n:
        zeros = events.count(_INDEX_0[0])
        return zeros == n or zeros + events.count(_INDEX_0[1]) == n
    return indexes == 0 and _NEXT_CHOICE[0] not in events and _NEXT_CHOICE[1] not in events


def _extra_choices(events: bytes) -> tuple[str, str] | None:
    """A message with more than one choice, or a choice whose index is not 0, in a stream asked
    for one completion (n=1): the server streams another completion than the one measured, so
    its tokens are not this request's. None when every message has one choice of index 0."""
    for line in events.split(b"\n"):
        if line[:5] != b"data:" or b'"choices"' not in line:
            continue
        payload = line[5:].strip()
        try:
            choices = orjson.loads(payload).get("choices")
        except (orjson.JSONDecodeError, AttributeError):
            return "bad_response", f"unparsable SSE message: {payload[:120]!r}"
        if not isinstance(choices, list):
            continue  # a message without a choices list is _junk's to judge
        indexes = [c.get("index", 0) if isinstance(c, dict) else None for c in choices]
        if len(choices) > 1:
            return "bad_response", (
                f"a message with {len(choices)} choices (indexes "
                f"{', '.join(map(str, indexes))}) for a request of one completion (n=1): "
                f"{payload[:120]!r}"
            )
        if choices and (type(indexes[0]) is not int or indexes[0] != 0):
            return "bad_response", (
                f"a choice of index {indexes[0]!r} for a request of one completion (n=1): "
                f"{payload[:120]!r}"
            )
    return None


def _first_choices(events: bytes) -> tuple[str, str] | None:
    """The first `choices` message of a request parsed whole: a list of choices, each with a
    text (completions) or a delta (chat); None when it is one."""
    at = min(i for i in (events.find(_CHOICES), events.find(_CHOICES_SP)) if i >= 0)
    start = events.rfind(b"data:", 0, at)
    stop = events.find(b"\n", at)
    payload = events[start + 5 : stop if stop >= 0 else len(events)].strip()
    try:
        choices = orjson.loads(payload)["choices"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return "bad_response", f"unparsable SSE message: {payload[:120]!r}"
    for c in choices:
        if not isinstance(c, dict) or not (
            isinstance(c.get("text"), str) or isinstance(c.get("delta"), dict)
        ):
            return "bad_response", f"a choice without text or delta: {payload[:120]!r}"
    return None
