"""Nothing a server does hangs the benchmark client or passes for a measurement (issue 23, items 1
and 2): against a real hostile server on 127.0.0.1 (tests/hostile_server.py), each trickle, silence
and lie ends the request with its reason, a level with its deadline, a probe with its own; each
junk stream is a failed request, not a success. Deadlines are small here (config); the stall
timeout is large, so the deadline under test - not the old stall guard - decides. Outcomes are
asserted, never durations."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.hostile_server import HostileServer
from tools.bench.deadlines import Deadlines
from tools.bench.schema import Workload
from tools.bench.sweep import BenchError, SweepOutcome, SweepSpec, run_sweep
from tools.servers import readiness

FAST = Deadlines(
    head_s=0.5, first_token_s=1.5, pace_tok_s=1000.0, floor_s=2.0, probe_s=1.0, slack=4.0
)
STALL_S = 60.0  # far beyond every deadline above: the old guard never decides here


@pytest.fixture
async def server() -> AsyncIterator[HostileServer]:
    srv = HostileServer()
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


async def sweep(
    srv: HostileServer,
    n: int = 2,
    levels: tuple[int, ...] = (1,),
    deadlines: Deadlines = FAST,
    model: str = "hostile",
    processes: int = 0,
) -> SweepOutcome:
    wl = Workload(model=model, input_len=8, max_tokens=8, requests_per_level=n, warmup_requests=0)
    spec = SweepSpec(
        url=srv.url,
        levels=list(levels),
        workload=wl,
        processes=processes,
        stall_timeout_s=STALL_S,
        tokenize_path=None,
        deadlines=deadlines,
    )
    return await run_sweep(spec)


def failed_with(out: SweepOutcome, kind: str) -> None:
    """Every level failed, every request with `kind`, and the notes say so."""
    assert out.points, "no level was measured"
    for p in out.points:
        assert p["level_failed"], p["errors"]
        assert p["errors"] == {kind: p["num_prompts"]}, p["errors"]
        assert p["error_samples"][kind]
    assert any("every request failed" in n and kind in n for n in out.notes), out.notes


async def test_the_hostile_server_serves_a_whole_stream(server: HostileServer) -> None:
    out = await sweep(server)  # the baseline: the same server in `ok` mode is measured
    p = out.points[0]
    assert not p["level_failed"] and p["completed"] == 2 and p["total_output_tokens"] == 16


# --- 1. deadlines -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "kind"),
    [
        ("trickle_head", "head_timeout"),  # a header byte every 50 ms, never the blank line
        ("keepalive", "ttft_timeout"),  # `: keepalive` comments forever
        ("silent", "ttft_timeout"),  # accepts, reads, never answers
        ("chunk_lie", "ttft_timeout"),  # a chunk of 1 MiB announced, comments inside it forever
        ("past_max", "over_max_tokens"),  # tokens forever, past max_tokens
        ("length_lie", "deadline"),  # Content-Length 1 MB, a whole stream, then silence
    ],
)
async def test_a_server_that_keeps_the_request_open_fails_it_with_the_reason(
    server: HostileServer, mode: str, kind: str
) -> None:
    server.mode = mode
    failed_with(await sweep(server), kind)


async def test_an_open_level_has_the_same_deadlines(server: HostileServer) -> None:
    server.mode = "keepalive"
    wl = Workload(model="hostile", input_len=8, max_tokens=8, requests_per_level=3)
    spec = SweepSpec(
        url=server.url,
        levels=[1],
        rates=[20.0],
        workload=wl.model_copy(update={"warmup_requests": 0}),
        processes=0,
        stall_timeout_s=STALL_S,
        tokenize_path=None,
        deadlines=Deadlines(**{**FAST.to_job(), "level_s": 30.0}),
    )
    failed_with(await run_sweep(spec), "ttft_timeout")
    server.mode = "slow_ok"  # a valid level past its deadline: cut, what was in flight failed
    spec.deadlines = Deadlines(**{**FAST.to_job(), "level_s": 0.5})
    server.gap_s = 0.2
    p = (await run_sweep(spec)).points[0]
    assert p["level_failed"] and p["num_prompts"] == 3 and "level_deadline" in p["errors"]


async def test_tokens_slower_than_the_pace_allows_pass_the_total_deadline(
    server: HostileServer,
) -> None:
    # 8 tokens 0.4 s apart: 3.2 s, past max(floor 2, first token 1.5 + 8 / 1000 tok/s)
    server.mode, server.gap_s = "slow_ok", 0.4
    failed_with(await sweep(server), "deadline")


async def test_a_level_past_its_deadline_is_cut_and_failed(server: HostileServer) -> None:
    # each request is whole and within its own deadlines (0.16 s), the level's 1 s is not
    server.mode, server.gap_s = "slow_ok", 0.02
    out = await sweep(server, n=20, deadlines=Deadlines(**{**FAST.to_job(), "level_s": 1.0}))
    p = out.points[0]
    assert p["level_failed"] and p["num_prompts"] == 20
    assert p["errors"].get("level_deadline", 0) >= 1
    assert "ran past its deadline of 1 s" in p["error_samples"]["level_deadline"]
    assert any("level_deadline" in n for n in out.notes)


async def test_a_level_deadline_holds_in_a_client_process_too(server: HostileServer) -> None:
    server.mode = "silent"
    dl = Deadlines(**{**FAST.to_job(), "first_token_s": 30.0, "floor_s": 30.0, "level_s": 1.0})
    out = await sweep(server, deadlines=dl, processes=1)
    failed_with(out, "level_deadline")


async def test_a_level_that_gets_no_token_stops_sending_and_ends_the_sweep(
    server: HostileServer,
) -> None:
    # with the default deadlines each of these requests would wait 600 s for its first token
    server.mode = "keepalive"
    out = await sweep(server, n=10, levels=(1, 4))
    assert len(out.points) == 1  # C=4 was not run
    p = out.points[0]
    assert p["level_failed"] and p["num_prompts"] == 10
    assert p["errors"] == {"ttft_timeout": 2, "abandoned": 8}
    assert "got no token before their deadlines" in p["error_samples"]["abandoned"]
    assert any("the levels after it were not run (4)" in n for n in out.notes), out.notes


async def test_a_server_that_dies_mid_level_fails_the_level_and_the_sweep_goes_on(
    server: HostileServer,
) -> None:
    server.mode, server.gap_s, server.die_after = "slow_ok", 0.01, 3
    out = await sweep(server, n=6, levels=(1, 2))
    assert [p["max_concurrency"] for p in out.points] == [1, 2]
    first = out.points[0]
    assert first["level_failed"] and first["completed"] == 3
    assert set(first["errors"]) <= {"disconnect", "connect"}
    assert out.points[1]["errors"] == {"connect": 6}


async def test_a_trickled_models_list_is_one_clear_error(server: HostileServer) -> None:
    server.models = "trickle"
    with pytest.raises(BenchError, match=r"/v1/models did not answer within 1 s"):
        await sweep(server, model="")


async def test_a_trickled_server_info_is_not_waited_for(server: HostileServer) -> None:
    server.info = "trickle"
    out = await sweep(server)  # /server_info is optional: a trickle means "not the simulator"
    assert out.points[0]["completed"] == 2 and "time_scale" not in out.points[0]


async def test_readiness_probes_have_a_total_deadline(
    server: HostileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readiness, "MODELS_S", 0.5)
    monkeypatch.setattr(readiness, "COMPLETION_S", 0.5)
    server.models = "trickle"
    server.mode = "keepalive"
    async with httpx.AsyncClient(base_url=server.url, timeout=5.0) as client:
        assert await readiness.model_name(client) is None
        assert await readiness.completion_ok(client, "hostile") is False
        server.mode = "past_max"
        assert await readiness.completion_ok(client, "hostile") is False
        server.models, server.mode = "ok", "ok"
        assert await readiness.model_name(client) == "hostile"
        assert await readiness.completion_ok(client, "hostile") is True


# --- 2. junk streams are failures --------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "kind", "says"),
    [
        ("junk_json", "bad_response", "not a JSON message"),
        ("choices_5", "bad_response", "without a choices list"),
        ("error_event", "stream_error", "CUDA error"),
        ("error_mid", "stream_error", "engine overloaded"),
        ("no_done", "incomplete", "without `data: [DONE]`"),
        ("chunk_short", "bad_response", "bad HTTP response"),
    ],
)
async def test_a_junk_stream_is_a_failed_request_with_its_reason(
    server: HostileServer, mode: str, kind: str, says: str
) -> None:
    server.mode = mode
    out = await sweep(server)
    failed_with(out, kind)
    assert says in out.points[0]["error_samples"][kind]


# --- the checks cut into reads anywhere ---------------------------------------------------------
def _events(*lines: bytes) -> bytes:
    return b"".join(line + b"\n\n" for line in lines)


TOKEN = b'data: {"choices":[{"text":"a","finish_reason":null}]}'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}'


@pytest.mark.parametrize(
    ("events", "kind"),
    [
        (_events(TOKEN, b": keepalive", b"id: 7", TOKEN, USAGE, b"data: [DONE]"), ""),
        (_events(TOKEN, b"data: {not json", TOKEN, USAGE, b"data: [DONE]"), "bad_response"),
        (_events(TOKEN, b'data: {"choices": 5}', USAGE, b"data: [DONE]"), "bad_response"),
        (_events(TOKEN, b"event: error\ndata: {}", b"data: [DONE]"), "stream_error"),
        (_events(TOKEN, b"garbage", TOKEN, USAGE, b"data: [DONE]"), "bad_response"),
        (_events(b'data: {"choices":[{"index":0}]}', USAGE, b"data: [DONE]"), "bad_response"),
        (_events(*[TOKEN] * 6, USAGE, b"data: [DONE]"), "over_max_tokens"),  # 2 + 3 allowed
        # llama-cpp-python finishes a UTF-8 character that max_tokens split: a few past it
        (_events(*[TOKEN] * 4, USAGE, b"data: [DONE]"), ""),
        (_events(TOKEN, TOKEN, USAGE), "incomplete"),
    ],
    ids=[
        "valid",
        "not-json",
        "choices-5",
        "event-error",
        "not-sse",
        "no-text",
        "past-max",
        "overshoot-a-character",
        "no-done",
    ],
)
async def test_the_stream_checks_hold_wherever_the_reads_cut(events: bytes, kind: str) -> None:
    from tests.test_bench_http import SSE_HEAD, chunked, start

    response = SSE_HEAD + chunked(events)
    for cut in range(len(SSE_HEAD), len(response)):
        conn, rec, fut = start()
        rec.max_tokens = 2
        conn.data_received(response[:cut])
        if not fut.done():
            conn.data_received(response[cut:])
        await fut
        assert rec.success == (kind == ""), (cut, rec.error_kind, rec.error)
        assert rec.error_kind == kind, (cut, rec.error)


def test_a_deadline_must_be_positive() -> None:
    with pytest.raises(ValueError, match="deadline head_s must be a positive number, got 0"):
        Deadlines(head_s=0)
    for bad in (float("inf"), float("nan"), True):  # unbounded, no number, a TOML boolean
        with pytest.raises(ValueError, match="deadline level_s must be a positive number"):
            Deadlines(level_s=bad)
