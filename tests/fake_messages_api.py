"""A faulty Anthropic Messages API on loopback: a real HTTP server (a thread, so that an in-process
run and an `agent run` child can both talk to it) that plays scripted replies as server-sent
events and, on cue, does what a real API and a real network do to a client.

Faults, one per request, in the order given (`faults`), each `times` in a row:
  Cut(events)        the SSE stream ends cleanly after `events` events: no message_stop
  Drop(events)       a length is promised, `events` events sent, then the connection closed
  Reset(events)      as Drop, but an abortive close (TCP RST)
  Malformed(events)  `events` events, then a junk `data:` line, then the rest of the stream
  Status(code, ...)  an error response (400 prompt too long, 413, 429, 500, 529...), JSON body
An `outage` (a fault and a number of seconds) answers every request with the fault until that
much time has passed since the first faulty one. `after`: the first requests that get no fault.
`context_chars`: a request whose messages are
longer than this is refused with 400 "prompt is too long" (what the API says past the context).
A compaction summary request (it ends with the compaction prompt) is answered with a summary and
does not use up a scripted reply. count_tokens is answered with a size estimate.

`python -m tests.fake_messages_api SCENARIO.json` serves a scenario until killed (benchmarks).
"""

from __future__ import annotations

import http.server
import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.brains.sse import render_sse

COMPACTION_MARK = "The conversation is about to be compacted"
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass(kw_only=True)  # Status(529, 1000) must not read as times=529, code=1000
class Fault:
    times: int = 1  # how many requests in a row get it

    def kind(self) -> str:
        return type(self).__name__.lower()


@dataclass(kw_only=True)
class Cut(Fault):
    events: int = 3


@dataclass(kw_only=True)
class Drop(Fault):
    events: int = 3


@dataclass(kw_only=True)
class Reset(Fault):
    events: int = 3


@dataclass(kw_only=True)
class Stall(Fault):
    """`events` sent, then the connection held open with nothing more for `seconds` (or until
    the server closes)."""

    events: int = 3
    seconds: float = 600.0


@dataclass(kw_only=True)
class Malformed(Fault):
    events: int = 2
    junk: str = "event: content_block_delta\ndata: {not json\n\n"


@dataclass(kw_only=True)
class Status(Fault):
    code: int = 529
    message: str = ""
    retry_after: float | None = None


def message(
    n: int, stop: str, *content: dict[str, Any], model: str = "claude-sonnet-4-6"
) -> dict[str, Any]:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 1000, "output_tokens": 50},
    }


def tool_use(n: int, name: str = "todoread", **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": inp}


def text(words: str) -> dict[str, Any]:
    return {"type": "text", "text": words}


def sse_events(payload: bytes) -> list[bytes]:
    return [e + b"\n\n" for e in payload.split(b"\n\n") if e]


def cut_inside_input(reply: dict[str, Any], partial_json: str) -> bytes:
    """The stream of `reply` with its last block, a tool_use, cut inside its input: the deltas
    carry only `partial_json`, as the API streams a call that reached max_tokens midway."""
    last = len(reply["content"]) - 1
    out = []
    for event in sse_events(render_sse(reply)):
        body = json.loads(event.split(b"data: ", 1)[1])
        if body["type"] == "content_block_delta" and body["index"] == last:
            continue
        if body["type"] == "content_block_stop" and body["index"] == last:
            for i in range(0, len(partial_json), 8):
                delta = {"type": "input_json_delta", "partial_json": partial_json[i : i + 8]}
                data = {"type": "content_block_delta", "index": last, "delta": delta}
                out.append(f"event: content_block_delta\ndata: {json.dumps(data)}\n\n".encode())
        out.append(event)
    return b"".join(out)


class QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a run stopped mid-request) is not the server's error."""


@dataclass
class FakeMessagesAPI:
    replies: list[dict[str, Any] | bytes]  # a message, or a stream as is (cut_inside_input)
    faults: list[Fault] = field(default_factory=list)
    outage: tuple[Fault, float] | None = None
    context_chars: int | None = None
    after: int = 0  # the faults and the outage begin with the request after this many
    bodies: list[dict[str, Any]] = field(default_factory=list)  # every Messages request
    served: list[str] = field(default_factory=list)  # what each request got: reply, cut, ...
    attempts_at: list[float] = field(default_factory=list)  # time.time() of each request

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.first: float | None = None
        self.closing = threading.Event()  # set by close(): a stalled reply lets go
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if self.path.endswith("/count_tokens"):
                    size = len(json.dumps(body.get("messages", []))) // 4
                    self.reply_json(200, {"input_tokens": size})
                    return
                action, payload = api.decide(body)
                if isinstance(action, Status):
                    self.reply_status(action)
                elif action is None:
                    self.reply_sse(payload)
                else:
                    self.reply_faulty(action, payload)

            def reply_json(
                self, code: int, obj: Any, headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def reply_status(self, fault: Status) -> None:
                kind = ERROR_TYPES.get(fault.code, "api_error")
                words = fault.message or f"fake {fault.code}"
                headers = {"x-should-retry": "true"} if fault.code >= 500 else {}
                if fault.retry_after is not None:
                    headers["retry-after"] = f"{fault.retry_after:g}"
                error = {"type": "error", "error": {"type": kind, "message": words}}
                self.reply_json(fault.code, error, headers)

            def head(self, length: int | None) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                if length is None:
                    self.send_header("connection", "close")
                    self.close_connection = True
                else:
                    self.send_header("content-length", str(length))
                self.end_headers()

            def reply_sse(self, payload: bytes) -> None:
                self.head(len(payload))
                self.wfile.write(payload)

            def reply_faulty(self, fault: Fault, payload: bytes) -> None:
                events = sse_events(payload)
                n = getattr(fault, "events", 0)
                if isinstance(fault, Malformed):
                    whole = b"".join(events[:n]) + fault.junk.encode() + b"".join(events[n:])
                    self.reply_sse(whole)
                    return
                sent = b"".join(events[:n])
                self.head(None if isinstance(fault, Cut | Stall) else len(payload))
                self.wfile.write(sent)
                self.wfile.flush()
                if isinstance(fault, Stall):  # open, silent: the client's deadline must end it
                    until = time.monotonic() + fault.seconds
                    while time.monotonic() < until and not api.closing.is_set():
                        time.sleep(0.05)
                self.close_connection = True
                if isinstance(fault, Reset):  # an abortive close: RST instead of FIN
                    linger = struct.pack("ii", 1, 0)
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                if isinstance(fault, Drop):
                    self.connection.shutdown(socket.SHUT_RDWR)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def decide(self, body: dict[str, Any]) -> tuple[Fault | None, bytes]:
        """What this request gets: a fault (and the stream it cuts), or the next reply."""
        with self.lock:
            now = time.monotonic()
            self.bodies.append(body)
            self.attempts_at.append(time.time())
            summary = COMPACTION_MARK in json.dumps(body["messages"][-1])
            fault: Fault | None = None
            faulty = len(self.bodies) > self.after
            if faulty and self.first is None:
                self.first = now
            if faulty and self.outage is not None and now - (self.first or now) < self.outage[1]:
                fault = self.outage[0]
            elif faulty and self.faults:
                fault = self.faults[0]
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.pop(0)
            elif self.context_chars and len(json.dumps(body["messages"])) > self.context_chars:
                size = len(json.dumps(body["messages"])) // 4
                words = f"prompt is too long: {size} tokens > {self.context_chars // 4} maximum"
                fault = Status(code=400, message=words)
            if summary:
                reply = message(900 + len(self.bodies), "end_turn", text("summary: all well"))
            else:
                reply = self.replies[0] if self.replies else message(999, "end_turn", text("done"))
            self.served.append(fault.kind() if fault else "reply")
            if fault is None and not summary and self.replies:
                self.replies.pop(0)
            return fault, reply if isinstance(reply, bytes) else render_sse(reply)

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()


def load(path: str) -> FakeMessagesAPI:
    """A scenario file: {"replies": [...], "faults": [[kind, {fields}], ...],
    "outage": [[kind, {fields}], seconds], "context_chars": N}."""
    spec = json.loads(Path(path).read_text())
    kinds = {c.__name__.lower(): c for c in (Cut, Drop, Reset, Malformed, Status)}
    faults = [kinds[k](**f) for k, f in spec.get("faults", [])]
    outage = spec.get("outage")
    return FakeMessagesAPI(
        spec["replies"],
        faults,
        (kinds[outage[0][0]](**outage[0][1]), outage[1]) if outage else None,
        spec.get("context_chars"),
        spec.get("after", 0),
    )


if __name__ == "__main__":
    import sys

    api = load(sys.argv[1])
    print(api.url, flush=True)
    api.thread.join()
