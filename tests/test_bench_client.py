"""The load generator against a real server process (benchmarks/client_fake_server.py, whose
request "model" picks a behaviour): errors recorded per request while the sweep goes on, a
stalled stream timed out, an unreachable server refused at once, Ctrl-C keeping what was measured,
the same requests whatever the number of client processes."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.bench.schema import Workload
from tools.bench.sweep import BenchError, Observer, SweepSpec, run_sweep

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fake() -> Iterator[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "client_fake_server.py"),
            "--ttft-ms",
            "5",
            "--itl-ms",
            "2",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


def spec(
    url: str, model: str, levels: list[int], processes: int | None = 0, **kw: object
) -> SweepSpec:
    wl = Workload(
        model=model,
        input_len=16,
        max_tokens=kw.pop("max_tokens", 8),
        requests_per_level=kw.pop("n", 6),
        warmup_requests=1,
    )
    return SweepSpec(url=url, levels=levels, workload=wl, processes=processes, **kw)  # type: ignore[arg-type]


async def test_errors_are_recorded_per_request_and_the_sweep_goes_on(fake: str) -> None:
    for model, kind in (
        ("http500", "http_500"),
        ("html", "not_openai"),
        ("errorevent", "stream_error"),
        ("dropmid", "disconnect"),
    ):
        out = await run_sweep(spec(fake, model, [1, 2]))
        assert [p["max_concurrency"] for p in out.points] == [1, 2], model
        for p in out.points:
            assert p["level_failed"] and p["failed"] == 6 and p["errors"] == {kind: 6}, model
        assert any("every request failed" in n for n in out.notes)


async def test_a_stream_without_usage_is_measured_from_its_chunks_and_says_so(fake: str) -> None:
    out = await run_sweep(spec(fake, "nousage", [2]))
    p = out.points[0]
    assert p["completed"] == 6 and not p["level_failed"] and p["usage_counted"] == 6
    assert p["total_output_tokens"] == 48 and p["output_throughput"] > 0
    assert p["total_input_tokens"] == 6 * 16  # the length sent: 16 words (no /tokenize here)
    assert out.prompts["length"] == "words"
    assert any(n.startswith("usage: counted from chunks at C=2") for n in out.notes)


async def test_ideal_and_speculative_like_streams(fake: str) -> None:
    out = await run_sweep(spec(fake, "ideal", [1, 3]))
    for p in out.points:
        assert p["completed"] == 6 and p["total_output_tokens"] == 48 and p["early_eos"] == 0
        # the server waits 5 ms before the first token; libuv's timers count whole milliseconds
        # from a cached loop time, so the wait can end up to ~1 ms early
        assert p["mean_ttft_ms"] >= 4.0
    multi = await run_sweep(spec(fake, "multi3", [2]))
    p = multi.points[0]
    assert p["total_output_tokens"] == 48 and p["chunks"] == 6 * 3  # 3+3+2 tokens per request
    eos = await run_sweep(spec(fake, "eos5", [2]))
    assert eos.points[0]["early_eos"] == 6 and any("early EOS" in n for n in eos.notes)


async def test_a_keep_alive_connection_closed_as_we_send_is_retried_once(fake: str) -> None:
    out = await run_sweep(spec(fake, "dropsecond", [2], n=8))
    assert out.points[0]["completed"] == 8 and out.points[0]["failed"] == 0


async def test_a_stalled_stream_times_out(fake: str) -> None:
    out = await run_sweep(spec(fake, "stall", [2], n=2, stall_timeout_s=0.5))
    # the fake stalls for an hour: a timeout is the stall timeout's doing (no wall-clock bound
    # here - how fast it fired is a timing claim, and a loaded machine made such bounds flaky)
    assert out.points[0]["errors"] == {"timeout": 2}


async def test_unreachable_server_is_one_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
    with pytest.raises(BenchError, match="connection refused"):
        await run_sweep(spec(f"http://127.0.0.1:{port}", "", [1]))
    with socket.socket() as full:  # a listener that never accepts: connects hang in SYN
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        port = full.getsockname()[1]
        fillers = [socket.socket() for _ in range(4)]
        for f in fillers:
            f.setblocking(False)
            f.connect_ex(("127.0.0.1", port))
        # the SYN would hang for minutes: the message is the connect timeout's own
        with pytest.raises(BenchError, match=r"no connection within 0\.5 s"):
            await run_sweep(spec(f"http://127.0.0.1:{port}", "", [1], connect_timeout_s=0.5))
        for f in fillers:
            f.close()
    with pytest.raises(BenchError, match="scheme"):
        await run_sweep(spec("ftp://127.0.0.1:1", "", [1]))


async def test_model_is_discovered_and_a_non_openai_server_is_named(fake: str) -> None:
    out = await run_sweep(spec(fake, "", [1], n=2))
    assert out.model == "ideal"


class Interrupt(Observer):
    """Cancels the sweep once the second level has finished a few requests."""

    def __init__(self) -> None:
        self.task: asyncio.Task[object] | None = None

    def progress(self, level: int, done: int) -> None:
        if level == 4 and done >= 2 and self.task is not None:
            self.task.cancel()
            self.task = None


@pytest.mark.parametrize("processes", [0, 1])
async def test_ctrl_c_keeps_the_points_measured_so_far(fake: str, processes: int) -> None:
    obs = Interrupt()
    sweep = spec(fake, "ideal", [2, 4, 8], processes, n=40, max_tokens=32)
    task = asyncio.ensure_future(run_sweep(sweep, obs))
    obs.task = task  # type: ignore[assignment]
    out = await task
    assert out.interrupted
    assert [p["max_concurrency"] for p in out.points] == [2, 4]
    assert out.points[0]["completed"] == 40 and "interrupted" not in out.points[0]
    partial = out.points[1]
    assert partial["interrupted"] and 2 <= partial["completed"] < 40 and partial["failed"] == 0


async def test_client_processes_send_the_same_requests(fake: str) -> None:
    one = await run_sweep(spec(fake, "ideal", [5], processes=1, n=23))
    two = await run_sweep(spec(fake, "ideal", [5], processes=2, n=23))
    for out in (one, two):
        p = out.points[0]
        assert p["completed"] == 23 and p["failed"] == 0 and p["max_concurrency"] == 5
        assert p["client_cpu_seconds"] > 0
    assert one.points[0]["total_input_tokens"] == two.points[0]["total_input_tokens"]
    assert two.points[0]["client_processes"] == 2
