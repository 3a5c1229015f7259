"""A request asks for one completion (n=1): a stream whose messages carry more than one choice, or
a choice of another index, streams completions that are not the one measured, and is a failed
request (`bad_response`), not a measurement (issue 49, item 11). Cut into reads anywhere through
the fake transport, and swept for real against the hostile server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.hostile_server import HostileServer
from tests.test_bench_deadlines import failed_with, sweep
from tests.test_bench_http import SSE_HEAD, chunked, start


def _events(*lines: bytes) -> bytes:
    return b"".join(line + b"\n\n" for line in lines)


USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3}}'
DONE = b"data: [DONE]"


def msg(choices: bytes) -> bytes:
    return b'data: {"id":"c","object":"text_completion","choices":' + choices + b"}"


ONE = msg(b'[{"index":0,"text":"a","finish_reason":null}]')
CHAT = b'data: {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": null}]}'
NO_INDEX = msg(b'[{"text":"a"}]')
THREE = msg(b'[{"index":0,"text":"a"},{"index":0,"text":"b"},{"index":7,"text":"c"}]')
TWO_SPACED = b'data: {"choices": [{"index": 0, "text": "a"}, {"index": 1, "text": "b"}]}'
DUPLICATE = msg(b'[{"index":0,"text":"a"},{"index":0,"text":"b"}]')
TWO_NO_INDEX = msg(b'[{"text":"a"},{"text":"b"}]')
INDEX_7 = msg(b'[{"index":7,"text":"a"}]')
INDEX_1_TOOL_0 = b'data: {"choices":[{"index":1,"delta":{"tool_calls":[{"index":0}]}}]}'
INDEX_STRING = msg(b'[{"index":"0","text":"a"}]')
# text that looks like the markers the counts look for: parsed, and measured
TEXT_LIKE = msg(b'[{"index":0,"text":"}, {\\"index\\":7} index"}]')


@pytest.mark.parametrize(
    ("events", "says"),
    [
        (_events(ONE, ONE, ONE, USAGE, DONE), ""),
        (_events(CHAT, CHAT, CHAT, USAGE, DONE), ""),
        (_events(NO_INDEX, NO_INDEX, NO_INDEX, USAGE, DONE), ""),
        (_events(ONE, TEXT_LIKE, ONE, USAGE, DONE), ""),
        (_events(THREE, THREE, THREE, USAGE, DONE), "3 choices (indexes 0, 0, 7)"),
        (_events(ONE, THREE, ONE, USAGE, DONE), "3 choices (indexes 0, 0, 7)"),
        (_events(ONE, ONE, TWO_SPACED, USAGE, DONE), "2 choices (indexes 0, 1)"),
        (_events(ONE, DUPLICATE, ONE, USAGE, DONE), "2 choices (indexes 0, 0)"),
        (_events(NO_INDEX, TWO_NO_INDEX, NO_INDEX, USAGE, DONE), "2 choices"),
        (_events(ONE, INDEX_7, ONE, USAGE, DONE), "a choice of index 7"),
        (_events(INDEX_7, ONE, ONE, USAGE, DONE), "a choice of index 7"),
        (_events(ONE, INDEX_1_TOOL_0, ONE, USAGE, DONE), "a choice of index 1"),
        (_events(ONE, INDEX_STRING, ONE, USAGE, DONE), "a choice of index '0'"),
    ],
    ids=[
        "one-choice",
        "chat-spaced",
        "no-index",
        "text-like-markers",
        "three-each",
        "three-in-the-middle",
        "two-spaced",
        "duplicate",
        "two-without-index",
        "index-7",
        "index-7-first",
        "index-1-tool-call-0",
        "index-string",
    ],
)
async def test_extra_choices_fail_the_request_wherever_the_reads_cut(
    events: bytes, says: str
) -> None:
    response = SSE_HEAD + chunked(events)
    for cut in range(len(SSE_HEAD), len(response)):
        conn, rec, fut = start()
        rec.max_tokens = 8
        conn.data_received(response[:cut])
        if not fut.done():
            conn.data_received(response[cut:])
        if not fut.done():
            conn.connection_lost(None)
        await fut
        if not says:
            assert rec.success, (cut, rec.error)
            assert (rec.chunks, rec.output_tokens) == (3, 3), cut
        else:
            assert not rec.success, cut
            assert rec.error_kind == "bad_response", (cut, rec.error)
            assert says in rec.error and "n=1" in rec.error, (cut, rec.error)


@pytest.fixture
async def server() -> AsyncIterator[HostileServer]:
    srv = HostileServer(mode="extra_choices")
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


async def test_a_sweep_of_extra_choices_measures_nothing(server: HostileServer) -> None:
    out = await sweep(server)
    failed_with(out, "bad_response")
    assert "3 choices (indexes 0, 0, 7)" in out.points[0]["error_samples"]["bad_response"]
