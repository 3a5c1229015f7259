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


def start(prompt_tokens: int = 0) -> tuple[StreamConn, RequestRecord, asyncio.Future[None]]:
    """A connection on a fake transport with one request sent."""
    conn = StreamConn()
    conn.connection_made(FakeTransport())  # type: ignore[arg-type]
    rec = RequestRecord(prompt_tokens=prompt_tokens)
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    conn.send(b"POST / HTTP/1.1\r\n\r\n", rec, fut)
    return conn, rec, fut


async def feed(response: bytes, cuts: list[int], prompt_tokens: int = 0) -> RequestRecord:
    conn, rec, fut = start(prompt_tokens)
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


async def test_stream_without_usage_is_counted_from_its_text_chunks() -> None:
    # llama-cpp-python's server: no usage message, a last chunk with no text and the finish reason
    events = (
        b'data: {"choices":[{"text":"a","finish_reason":null}]}\n\n'
        b'data: {"choices":[{"text":"b","finish_reason":null}]}\n\n'
        b'data: {"choices":[{"text":"","finish_reason":"length"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    rec = await feed(SSE_HEAD + chunked(events), [len(SSE_HEAD) + 30], prompt_tokens=64)
    assert rec.success and rec.usage_counted
    assert (rec.chunks, rec.output_tokens, rec.prompt_tokens) == (3, 2, 64)
    chat = (
        b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
        + b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n' * 3
        + b"data: [DONE]\n\n"  # a stream is whole only with it
    )
    rec = await feed(SSE_HEAD + chunked(chat), [])
    assert rec.success and rec.output_tokens == 3 and rec.prompt_tokens == 0


async def test_a_stream_cut_short_without_usage_is_a_failed_request() -> None:
    # llama-cpp-python's server with another request waiting: `[DONE]` after a chunk whose finish
    # reason is null, and no last one - not an early EOS of one token
    events = b'data: {"choices": [{"text": "a", "finish_reason": null}]}\n\ndata: [DONE]\n\n'
    rec = await feed(SSE_HEAD + chunked(events), [])
    assert not rec.success and rec.error_kind == "truncated" and rec.output_tokens == 0
    assert "the server cut it short" in rec.error


async def test_a_stream_stopped_at_the_length_counts_max_tokens() -> None:
    # a token with no text of its own (part of a UTF-8 character) is an empty chunk; the finish
    # reason "length" says how many there were
    events = (
        b'data: {"choices": [{"text": "a", "finish_reason": null}]}\n\n'
        b'data: {"choices": [{"text": "", "finish_reason": null}]}\n\n'
        b'data: {"choices": [{"text": "b", "finish_reason": null}]}\n\n'
        b'data: {"choices": [{"text": "", "finish_reason": "length"}]}\n\ndata: [DONE]\n\n'
    )
    conn, rec, fut = start()
    rec.max_tokens = 3
    conn.data_received(SSE_HEAD + chunked(events))
    await fut
    assert rec.success and rec.usage_counted and rec.output_tokens == 3


async def test_a_usage_message_wins_over_the_sent_length() -> None:
    rec = await feed(sse_response(3), [], prompt_tokens=64)
    assert not rec.usage_counted and rec.prompt_tokens == 7


async def test_a_body_delimited_by_the_close_ends_with_it() -> None:
    events = b'data: {"choices":[{"text":"a"}]}\n\ndata: [DONE]\n\n'
    no_length = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + events
    rec = await feed(no_length, [])  # no length, no chunking: the body ends when the server closes
    assert rec.success and rec.chunks == 1 and rec.usage_counted


async def test_the_final_crlf_in_its_own_read_belongs_to_the_response() -> None:
    # llama-server: `0\r\n` then, a moment later, the last CRLF; the response is whole only then,
    # and the connection stays usable (no stray bytes waiting for the next request)
    response = sse_response(2)
    conn, rec, fut = start()
    conn.data_received(response[:-2])
    assert not fut.done()
    conn.data_received(response[-2:])
    await fut
    assert rec.success and not conn.closed
    rec2, fut2 = RequestRecord(), asyncio.get_running_loop().create_future()
    conn.send(b"POST / HTTP/1.1\r\n\r\n", rec2, fut2)
    conn.data_received(sse_response(1))
    await fut2
    assert rec2.success and rec2.chunks == 1


async def test_keep_alive_and_close_follow_the_response_headers() -> None:
    close = sse_response(1).replace(b"chunked\r\n", b"chunked\r\nconnection: close\r\n", 1)
    http10 = b"HTTP/1.0" + sse_response(1)[8:]
    for response, closed in ((sse_response(1), False), (close, True), (http10, True)):
        conn, rec, fut = start()
        conn.data_received(response)
        await fut
        assert rec.success and conn.closed is closed


async def test_bytes_after_a_whole_response_drop_the_connection() -> None:
    for junk in (b"xyz", b"HTTP/1.1 200 OK\r\n"):  # in the same read
        conn, rec, fut = start()
        conn.data_received(sse_response(1) + junk)
        await fut
        assert rec.success and conn.closed
    conn, rec, fut = start()
    conn.data_received(sse_response(1))
    await fut
    conn.data_received(b"\r\n")  # junk while idle: the next request takes a fresh connection
    assert conn.closed


async def test_a_stream_that_ended_with_done_survives_a_close_before_the_last_bytes() -> None:
    response = sse_response(2)
    rec = await feed(response[:-5], [])  # closed before `0\r\n\r\n`
    assert rec.success and rec.output_tokens == 2
    rec = await feed(response[: len(SSE_HEAD) + 40], [])  # closed mid-stream
    assert rec.error_kind == "disconnect"


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
