"""The streaming client's parser: whatever way a response is cut into socket reads, it counts the
same `choices` messages and reads the same usage; error responses become error kinds."""

from __future__ import annotations

import asyncio
import json

import pytest

from tools.bench.http import StreamConn, Target
from tools.bench.request_record import RequestRecord


class FakeTransport:
    def __init__(self) -> None:
        self.written = b""
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def chunked(*payloads: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in payloads) + b"0\r\n\r\n"


def sse_response(n: int, tokens_per: int = 1, spaced: bool = False, crlf: bool = False) -> bytes:
    dumps = (
        (lambda o: json.dumps(o)) if spaced else (lambda o: json.dumps(o, separators=(",", ":")))
    )
    nl = "\r\n" if crlf else "\n"
    message = {"choices": [{"text": "x" * tokens_per, "index": 0}], "usage": None}
    events = [f"data: {dumps(message)}{nl}{nl}" for _ in range(n)]
    events.append(": keep-alive comment" + nl + nl)
    usage = {
        "prompt_tokens": 7,
        "completion_tokens": n * tokens_per,
        "total_tokens": 7 + n * tokens_per,
    }
    events.append(f"data: {dumps({'choices': [], 'usage': usage})}{nl}{nl}")
    events.append(f"data: [DONE]{nl}{nl}")
    return SSE_HEAD + chunked(*(e.encode() for e in events))


async def feed(response: bytes, cuts: list[int]) -> RequestRecord:
    conn = StreamConn()
    conn.connection_made(FakeTransport())  # type: ignore[arg-type]
    rec = RequestRecord()
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    conn.send(b"POST / HTTP/1.1\r\n\r\n", rec, fut)
    pos = 0
    for cut in [*cuts, len(response)]:
        if cut > pos:
            conn.data_received(response[pos:cut])
            pos = cut
    if not fut.done():
        conn.connection_lost(None)
    await fut
    return rec


async def test_every_single_cut_gives_the_same_counts() -> None:
    response = sse_response(5)
    for cut in range(1, len(response)):
        rec = await feed(response, [cut])
        assert rec.success, (cut, rec.error)
        assert (rec.chunks, rec.output_tokens, rec.prompt_tokens) == (5, 5, 7), cut
        assert len(rec.itl) == 4


async def test_byte_by_byte_spaced_json_and_crlf_events() -> None:
    for response in (sse_response(4, spaced=True), sse_response(4, crlf=True)):
        rec = await feed(response, list(range(1, len(response))))
        assert rec.success and rec.chunks == 4 and rec.output_tokens == 4


async def test_several_messages_in_one_read_have_zero_gaps_like_vllm() -> None:
    rec = await feed(sse_response(3, tokens_per=2), [])
    assert rec.chunks == 3 and rec.output_tokens == 6
    assert rec.itl == [0.0, 0.0]


@pytest.mark.parametrize(
    ("response", "kind", "message"),
    [
        (
            b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 42\r\n\r\n"
            b'{"error": {"message": "engine is dead!!"}}',
            "http_500",
            "engine is dead!!",
        ),
        (
            b"HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\n"
            b"content-length: 9\r\n\r\nnot found",
            "http_404",
            "not found",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n"
            b"content-length: 13\r\n\r\n<html></html>",
            "not_openai",
            "text/html",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 26\r\n\r\n"
            b'{"choices":[{"text":"x"}]}',
            "not_streaming",
            "not a stream",
        ),
        (
            SSE_HEAD + chunked(b'data: {"error": {"message": "too long"}}\n\n'),
            "stream_error",
            "too long",
        ),
        (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "bad_response", "not an HTTP response"),
    ],
)
async def test_error_responses_become_kinds(response: bytes, kind: str, message: str) -> None:
    rec = await feed(response, [len(response) // 2])
    assert not rec.success
    assert rec.error_kind == kind
    assert message in rec.error


async def test_stream_without_usage_and_close_delimited_body() -> None:
    events = b'data: {"choices":[{"text":"a"}]}\n\ndata: [DONE]\n\n'
    no_usage = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + events
    rec = await feed(no_usage, [])  # no length, no chunking: the body ends when the server closes
    assert rec.error_kind == "no_usage" and rec.chunks == 1


def test_target_parsing() -> None:
    t = Target.parse("http://10.0.0.5:8000/v1/")
    assert (t.host, t.port, t.prefix) == ("10.0.0.5", 8000, "")
    assert Target.parse("localhost:30000").url == "http://localhost:30000"
    assert Target.parse("https://api.example.com/proxy").prefix == "/proxy"
    req = Target.parse("http://h:1/base").request("/v1/completions", b"{}")
    assert req.startswith(b"POST /base/v1/completions HTTP/1.1\r\n") and req.endswith(b"\r\n\r\n{}")
    for bad in ("ftp://x", "http://:80", "http://h:notaport"):
        with pytest.raises(ValueError):
            Target.parse(bad)
