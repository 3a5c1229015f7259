"""The server's /metrics over each level (tools/bench/server_metrics.py): the parser on each
engine's real text (llama.cpp's as a real llama-server 0.3.36 served it with --metrics; vLLM's
and SGLang's written from the names their sources register), the simulator's series through a
real sweep (the running count rises with the concurrency, the acceptance length of EAGLE), and a
server without /metrics, or whose /metrics never answers, measured all the same with a note."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from sim.space import DEFAULT_BASE_FLAGS
from tests.foreign_server import ForeignServer
from tests.served_sim import served_sim
from tools.bench import server_metrics
from tools.bench.schema import Point, Workload
from tools.bench.server_metrics import MetricsError, Reading, acceptance, read
from tools.bench.sweep import SweepSpec, run_sweep

DATA = Path(__file__).parent / "data" / "metrics"
SCALE = 10  # the simulator's physics 10x faster than the box it models


def text(engine: str) -> str:
    return (DATA / f"{engine}.txt").read_text()


# ------------------------------------------------------------------------------------ parsing


def test_vllm_gauges_are_summed_over_engines_and_the_kv_use_averaged() -> None:
    r = read(text("vllm"))
    assert (r.source, r.running, r.waiting) == ("vllm", 22.0, 4.0)
    assert r.kv_cache == pytest.approx(0.6)
    assert r.spec == (200.0, 280.0)  # drafts, accepted: both engines
    start = Reading(source="vllm", spec=(0.0, 0.0))
    assert acceptance(start, r) == pytest.approx(1 + 280 / 200)
    assert acceptance(None, r) is None  # one reading is no interval


def test_sglang_gauges_and_its_acceptance_gauge() -> None:
    r = read(text("sglang"))
    assert (r.source, r.running, r.waiting) == ("sglang", 64.0, 7.0)
    assert r.kv_cache == pytest.approx(0.85)
    assert r.spec is None and acceptance(None, r) == pytest.approx(3.1)


def test_a_real_llama_servers_metrics() -> None:
    r = read(text("llamacpp"))
    assert (r.source, r.running, r.waiting) == ("llamacpp", 0.0, 0.0)
    assert r.kv_cache is None  # this build serves no KV-cache gauge
    assert r.spec == (0.0, 0.0)
    assert acceptance(r, r) is None  # nothing drafted in the interval: no acceptance


def test_the_old_vllm_kv_gauge_is_read_too() -> None:
    body = '# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{engine="0"} 0.25\n'
    assert read(body).kv_cache == 0.25


@pytest.mark.parametrize(
    "body",
    [
        "<html>not found</html>",
        "# TYPE up gauge\nup 1\n",  # Prometheus text, but none of the engines' gauges
        "",
    ],
)
def test_a_body_without_engine_gauges_is_refused(body: str) -> None:
    with pytest.raises(MetricsError):
        read(body)


# ----------------------------------------------------------------------------- the simulator


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    command = [sys.executable, "-m", "sim", *DEFAULT_BASE_FLAGS, "--seed", "1", "--noise", "0"]
    with served_sim([*command, "--time-scale", str(SCALE)], "srvmetrics") as url:
        yield url


def spec(url: str, levels: list[int], **kw: Any) -> SweepSpec:
    wl = Workload(input_len=64, max_tokens=kw.pop("max_tokens", 128), warmup_requests=1)
    return SweepSpec(url=url, levels=levels, workload=wl, processes=0, **kw)


async def test_the_sims_series_rises_with_the_concurrency(sim: str) -> None:
    out = await run_sweep(spec(sim, [1, 16]))
    assert not any(n.startswith(server_metrics.NO_METRICS) for n in out.notes), out.notes
    by_level = {p["max_concurrency"]: p["server_metrics"] for p in out.points}
    for level, series in by_level.items():
        assert series["source"] == "sglang" and series["t"], level
        assert len(series["running"]) == len(series["t"]) == len(series["kv_cache"])
        assert series["t"] == sorted(series["t"]) and series["t"][0] >= 0
        assert all(0 <= k <= 1 for k in series["kv_cache"] if k is not None)
        assert "spec_acceptance" not in series  # no speculation: no column
    assert max(by_level[1]["running"]) <= 1  # a closed loop of one
    assert max(by_level[16]["running"]) > max(by_level[1]["running"])
    # what the result file keeps: the point as the schema reads it, the series whole
    assert Point.model_validate(out.points[1]).model_extra["server_metrics"] == by_level[16]


async def test_eagle_serves_an_acceptance_length() -> None:
    command = [sys.executable, "-m", "sim", *DEFAULT_BASE_FLAGS, "--seed", "1", "--noise", "0"]
    eagle = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"]
    eagle += ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    with served_sim([*command, "--time-scale", str(SCALE), *eagle], "srvmetrics-eagle") as url:
        out = await run_sweep(spec(url, [4], max_tokens=256))
    accepted = [a for a in out.points[0]["server_metrics"]["spec_acceptance"] if a is not None]
    assert accepted and all(1 <= a <= 4 for a in accepted)  # tokens per step, bonus counted


async def test_the_ideal_sim_serves_its_requests_in_flight() -> None:
    """Ideal mode has no scheduler: every request runs at once, none waits, no KV is modelled."""
    command = [sys.executable, "-m", "sim", "--ideal-ttft-ms", "5", "--ideal-itl-ms", "20"]
    with served_sim([*command, "--load-seconds", "0", "--seed", "1"], "srvmetrics-ideal") as url:
        out = await run_sweep(spec(url, [4], max_tokens=64))
    assert not any(n.startswith(server_metrics.NO_METRICS) for n in out.notes), out.notes
    series = out.points[0]["server_metrics"]
    assert 1 <= max(series["running"]) <= 4 and set(series["waiting"]) == {0}
    assert "kv_cache" not in series


# --------------------------------------------------------------- servers without /metrics


@pytest.fixture
async def foreign() -> AsyncIterator[str]:
    server = ForeignServer("llama")  # answers /metrics with 404, as llama-server without --metrics
    url = await server.start()
    yield url
    await server.stop()


async def test_a_server_without_metrics_is_measured_with_a_note(foreign: str) -> None:
    out = await run_sweep(spec(foreign, [1, 2], max_tokens=8))
    assert [p["failed"] for p in out.points] == [0, 0]
    assert all("server_metrics" not in p for p in out.points)
    notes = [n for n in out.notes if n.startswith(server_metrics.NO_METRICS)]
    assert len(notes) == 1 and "HTTP 404" in notes[0], out.notes  # once, not per level
    assert "--metrics" not in notes[0]  # the hint is for llama-server's 501 only
    assert "(llama-server serves them with --metrics)" in server_metrics.note("x answered HTTP 501")


async def test_metrics_that_never_answer_do_not_hold_up_the_level() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(3600)  # reads nothing, answers nothing

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sampler = server_metrics.Sampler(f"http://127.0.0.1:{port}/metrics")
    try:
        sampler.start()
        await asyncio.sleep(0.3)
        async with asyncio.timeout(30):  # stop() drops the scrape in flight
            assert await sampler.stop() is None
        assert sampler.problem is None  # no answer is a gap, not a verdict
    finally:
        server.close()
