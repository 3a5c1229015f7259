"""Speculation against the floor (issue 48, tools/bench/server_metrics.speculation_of): a level's
acceptance length, the share of its tokens that came from accepted drafts and the acceptance rate,
from the spec-decode counters' growth over the level - by the names the engine profiles give
(tools/servers/profiles/vllm.toml, sim.toml) - or from SGLang's acceptance-length gauge; and the
table's share of the floor per verification step, which explains a speculative share past 100 %.

vLLM's page is made by prometheus_client, the library vLLM 0.32 serves /metrics with, from the
counters vllm/v1/spec_decode/metrics.py (SpecDecodingProm) registers, under the labels
vllm/v1/metrics/loggers.py gives them (model_name, engine): the exact text a vLLM server writes."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from sim.space import DEFAULT_BASE_FLAGS
from sim.truth import model_of
from tests.served_sim import served_sim
from tests.test_compare import result
from tests.test_server_metrics import SCALE, spec
from tools.bench.schema import BenchResult, Point
from tools.bench.server_metrics import Reading, Series, read, speculation_of
from tools.bench.sweep import run_sweep
from tools.bench.table import sweep_table
from tools.servers.profiles import SGLANG, VLLM


def with_points(points: list[dict[str, Any]]) -> BenchResult:
    """A result of these points (tests.test_compare's, their figures replaced)."""
    base = result("b1", {int(p["max_concurrency"]): 1.0 for p in points})
    return base.model_copy(update={"points": [Point.model_validate(p) for p in points]})


def vllm_page(drafts: float, draft_tokens: float, accepted: float) -> str:
    """vLLM's /metrics with two engines, each with half the counts, and the gauges it always
    serves."""
    registry = CollectorRegistry()
    labels = ["model_name", "engine"]
    running = Gauge("vllm:num_requests_running", "Running.", labels, registry=registry)
    counters = {
        name: Counter(name, doc, labels, registry=registry)
        for name, doc in (
            ("vllm:spec_decode_num_drafts", "Number of spec decoding drafts."),
            ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens."),
            ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens."),
        )
    }
    for engine in ("0", "1"):
        running.labels("tiny", engine).set(2)
        counters["vllm:spec_decode_num_drafts"].labels("tiny", engine).inc(drafts / 2)
        counters["vllm:spec_decode_num_draft_tokens"].labels("tiny", engine).inc(draft_tokens / 2)
        counters["vllm:spec_decode_num_accepted_tokens"].labels("tiny", engine).inc(accepted / 2)
    return generate_latest(registry).decode()


def test_vllm_s_counters_give_the_level_s_acceptance_and_speculative_share() -> None:
    page = vllm_page(1000, 2000, 700)
    assert "vllm:spec_decode_num_draft_tokens_total{" in page  # the sample names it serves
    names = VLLM.profile.metrics
    assert "vllm:spec_decode_num_draft_tokens_total" in names.spec_draft_tokens
    series = Series()
    series.add(0.0, read(page, names), None)
    series.add(0.5, read(vllm_page(1200, 2400, 850), names), None)  # between: no effect
    series.add(9.0, read(vllm_page(1400, 2800, 1000), names), None)
    spec_ = speculation_of(series)
    assert spec_ == {
        "drafts": 400.0,  # verification steps in the level
        "accepted": 300.0,
        "accept_length": 1.75,  # 1 + 300 / 400
        "token_share": pytest.approx(300 / 700, abs=1e-4),  # 300 of the 700 tokens were drafts
        "draft_tokens": 800.0,
        "accept_rate": 0.375,  # 300 of 800 proposed
    }
    assert series.dump()["speculation"] == spec_  # type: ignore[index]


def test_no_drafts_no_counters_or_a_flat_gauge_say_nothing() -> None:
    page = vllm_page(1000, 2000, 700)
    series = Series()
    series.add(0.0, read(page, VLLM.profile.metrics), None)
    series.add(9.0, read(page, VLLM.profile.metrics), None)
    assert speculation_of(series) is None  # nothing drafted in the level
    plain = Series()
    plain.add(0.0, Reading(source="vllm", running=1.0), None)
    assert speculation_of(plain) is None and "speculation" not in (plain.dump() or {})


def test_sglang_s_gauge_gives_the_acceptance_length_and_the_share_it_implies() -> None:
    series = Series()
    for t, length in ((0.0, 2.8), (0.5, 3.2), (1.0, None)):
        series.add(t, Reading(source="sglang", running=1.0), length)
    assert speculation_of(series) == {
        "accept_length": 3.0,
        "token_share": pytest.approx(2 / 3, abs=1e-4),
    }
    assert SGLANG.profile.metrics.accept_length == ["sglang:spec_accept_length"]


def test_the_table_explains_a_share_past_the_floor_per_verification_step() -> None:
    point = Point(max_concurrency=1, completed=10, output_throughput=370.0)
    point = point.model_copy(
        update={
            "floor_tok_s": 209.0,
            "floor_share": 370.0 / 209.0,  # EAGLE-3 on an H100: 177 % of the floor
            "server_metrics": {
                "t": [0.0],
                "speculation": {"accept_length": 2.1, "token_share": 0.524},
            },
        }
    )
    table = sweep_table(with_points([point.model_dump()]))
    head, row = table.splitlines()[1:3]
    assert "accept len" in head and "spec tokens" in head and "of floor a step" in head
    assert "177%" in row and "2.10" in row and "52%" in row and "84%" in row  # 177 % / 2.1


async def test_the_simulator_s_eagle_level_reads_its_own_acceptance() -> None:
    """A real sweep of the simulator with EAGLE-3: the level's acceptance length from vLLM's
    counters it serves is its modelled one (sim.truth's tau), the share of drafted tokens follows
    from it, and the table shows the share of the floor per verification step."""
    eagle = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"]
    eagle += ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    command = [sys.executable, "-m", "sim", *DEFAULT_BASE_FLAGS, "--seed", "1", "--noise", "0"]
    with served_sim([*command, "--time-scale", str(SCALE), *eagle], "spec-floor") as url:
        out = await run_sweep(spec(url, [4], max_tokens=256))
    point = Point.model_validate(out.points[0])
    spec_ = (point.model_extra or {})["server_metrics"]["speculation"]
    flags = dict(zip(eagle[::2], eagle[1::2], strict=True))
    tau = model_of(flags).tau()
    assert spec_["accept_length"] == pytest.approx(tau, rel=0.15)
    assert spec_["token_share"] == pytest.approx(1 - 1 / spec_["accept_length"], abs=1e-3)
    assert 0 < spec_["accept_rate"] <= 1
    assert out.physics is not None and "of floor a step" in sweep_table(with_points(out.points))
