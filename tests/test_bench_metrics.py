"""The metrics of a level on synthetic timings, against vLLM's formulas (restated with numpy as
vllm/benchmarks/serve.py writes them: np.mean(x or 0), np.std, np.median, np.percentile)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tools.bench.metrics import compute_point, level_failed, mean_std, percentile
from tools.bench.request_record import RequestRecord
from tools.bench.results import build_result, save
from tools.bench.schema import ClientInfo, Point, ServerRef, Workload
from tools.bench.timescale import point_to_model_time, to_model_time


def rec(start: float, ttft: float, itl: list[float], out: int, prompt: int = 100) -> RequestRecord:
    latency = ttft + sum(itl)
    return RequestRecord(
        start=start,
        end=start + latency + 0.001,
        ttft=ttft,
        latency=latency,
        itl=list(itl),
        output_tokens=out,
        prompt_tokens=prompt,
        chunks=len(itl) + 1,
        success=True,
    )


def failed(start: float, kind: str = "http_500") -> RequestRecord:
    r = RequestRecord(start=start, end=start + 0.01)
    r.fail(kind, "boom")
    return r


def extra(point: Point) -> dict[str, Any]:
    """A Point's untyped keys (vLLM's and ours that no tool reads as a field)."""
    return point.model_extra or {}


def vllm_reference(records: list[RequestRecord], dur: float, pcts: list[float]) -> dict[str, float]:
    ok = [r for r in records if r.success]
    ttfts = [r.ttft for r in ok]
    e2els = [r.latency for r in ok]
    tpots = [(r.latency - r.ttft) / (r.output_tokens - 1) for r in ok if r.output_tokens > 1]
    itls = [g for r in ok for g in r.itl]
    out = {
        "completed": len(ok),
        "request_throughput": len(ok) / dur,
        "output_throughput": sum(r.output_tokens for r in ok) / dur,
        "total_token_throughput": sum(r.output_tokens + r.prompt_tokens for r in ok) / dur,
    }
    for name, xs in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        out[f"mean_{name}_ms"] = float(np.mean(xs or 0)) * 1000
        out[f"std_{name}_ms"] = float(np.std(xs or 0)) * 1000
        out[f"median_{name}_ms"] = float(np.median(xs or 0)) * 1000
        for p in pcts:
            out[f"p{int(p)}_{name}_ms"] = float(np.percentile(xs or 0, p)) * 1000
    return out


def test_percentile_and_std_match_numpy() -> None:
    rng = random.Random(3)
    for n in (1, 2, 3, 10, 101):
        xs = sorted(rng.expovariate(1.0) for _ in range(n))
        for p in (0, 1, 50, 90, 99, 99.9, 100):
            assert percentile(xs, p) == pytest.approx(float(np.percentile(xs, p)), rel=1e-12)
        mean, std = mean_std(xs)
        assert mean == pytest.approx(float(np.mean(xs)))
        assert std == pytest.approx(float(np.std(xs)))
    assert percentile([], 50) == 0.0 and mean_std([]) == (0.0, 0.0)


def test_point_matches_vllm_on_random_timings() -> None:
    rng = random.Random(7)
    records = []
    for i in range(60):
        n_chunks = rng.randint(1, 40)
        records.append(
            rec(
                i * 0.05,
                rng.uniform(0.02, 0.3),
                [rng.uniform(0.005, 0.02) for _ in range(n_chunks - 1)],
                out=n_chunks * rng.choice([1, 1, 2, 4]),
                prompt=rng.randint(50, 600),
            )
        )
    records += [failed(1.0), failed(2.0, "disconnect")]
    dur = 7.5
    point = compute_point(records, dur, level=8, max_tokens=160)
    ref = vllm_reference(records, dur, [50, 90, 99])
    flat = point.model_dump()
    for key, value in ref.items():
        assert flat[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
    assert point.failed == 2 and point.num_prompts == 62
    assert point.errors == {"disconnect": 1, "http_500": 1}
    assert point.level_failed  # 2 of 62 (3 %) failed: more than 1 %, a failed measurement


def test_multi_token_chunks_give_tpot_per_token_and_itl_per_chunk() -> None:
    # a speculative engine: 10 chunks of 3 tokens each, 30 ms apart, first after 100 ms
    r = rec(0.0, 0.100, [0.030] * 9, out=30)
    point = compute_point([r], duration=0.4, level=1, max_tokens=30)
    assert point.mean_itl_ms == pytest.approx(30.0)
    assert point.mean_tpot_ms == pytest.approx(270.0 / 29)  # (e2el - ttft) / (tokens - 1)
    assert extra(point)["chunks"] == 10 and extra(point)["tokens_per_chunk"] == pytest.approx(3.0)
    assert point.output_throughput == pytest.approx(30 / 0.4)
    assert point.early_eos == 0


def test_early_eos_is_counted_and_single_token_outputs_have_no_tpot() -> None:
    records = [
        rec(0.0, 0.05, [0.01] * 9, out=10),
        rec(0.0, 0.05, [0.01] * 3, out=4),
        rec(0.1, 0.05, [], out=1),
    ]
    point = compute_point(records, duration=1.0, level=2, max_tokens=10)
    assert point.early_eos == 2
    # tpot only from requests with more than one token (vLLM): (0.09/9 + 0.03/3) / 2
    assert point.mean_tpot_ms == pytest.approx(10.0)
    assert extra(point)["output_lens"] == [10, 4, 1]


def test_achieved_concurrency_is_littles_law() -> None:
    records = [rec(0.0, 0.1, [0.1] * 9, out=10) for _ in range(4)]  # four 1 s requests at once
    point = compute_point(records, duration=2.0, level=4, max_tokens=10)
    assert point.achieved_concurrency == pytest.approx(2.0)


def test_a_level_where_every_request_failed_is_kept_and_marked() -> None:
    point = compute_point(
        [failed(0.0), failed(0.1, "connect")], duration=0.2, level=2, max_tokens=8
    )
    assert point.level_failed and point.completed == 0 and point.failed == 2
    assert point.output_throughput == 0.0 and point.mean_ttft_ms == 0.0
    assert point.errors == {"connect": 1, "http_500": 1}
    assert extra(point)["error_samples"]["http_500"] == "boom"


def test_goodput_counts_requests_within_every_slo() -> None:
    records = [
        rec(0.0, 0.05, [0.01] * 9, out=10),
        rec(0.0, 0.5, [0.01] * 9, out=10),
        rec(0.0, 0.05, [0.05] * 9, out=10),
    ]
    assert extra(compute_point(records, 2.0, 3, 10))["request_goodput"] is None
    point = compute_point(records, 2.0, 3, 10, slo_ms={"ttft": 100, "tpot": 20})
    assert extra(point)["request_goodput"] == pytest.approx(1 / 2.0)


def test_peak_buckets_follow_vllm() -> None:
    # two requests: one streams 5 chunks in the first second, the other 3 in the second second
    records = [rec(0.0, 0.1, [0.1] * 4, out=5), rec(1.1, 0.1, [0.1] * 2, out=3)]
    point = compute_point(records, duration=1.5, level=2, max_tokens=5)
    assert extra(point)["max_output_tokens_per_s"] == 5.0
    assert extra(point)["max_concurrent_requests"] == 1


def test_client_cpu_per_chunk() -> None:
    records = [rec(0.0, 0.1, [0.01] * 99, out=100) for _ in range(2)]
    point = compute_point(records, duration=2.0, level=2, max_tokens=100, cpu_seconds=0.002)
    assert extra(point)["client_cpu_us_per_chunk"] == pytest.approx(10.0)
    assert point.client_cpu_percent == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("ok", "bad", "verdict"),
    [(100, 1, False), (99, 1, False), (98, 2, True), (297, 3, False), (10, 1, True), (0, 0, True)],
)
def test_a_level_fails_when_more_than_one_percent_of_its_requests_fail(
    ok: int, bad: int, verdict: bool
) -> None:
    records = [rec(i * 0.01, 0.05, [0.01] * 3, out=4) for i in range(ok)]
    records += [failed(float(i)) for i in range(bad)]
    point = compute_point(records, duration=2.0, level=4, max_tokens=4)
    assert point.level_failed is verdict
    assert level_failed(ok, bad) is verdict


def test_the_point_is_typed_and_its_dump_is_what_the_result_file_holds(tmp_path: Path) -> None:
    # percentiles without 99: the typed p99 fields are not computed, so the flat dict the sweep
    # hands on (exclude_unset) leaves them out; the result file has them at 0.0 as it always had
    records = [rec(0.0, 0.05, [0.01] * 9, out=10), rec(0.1, 0.06, [0.02] * 3, out=4)]
    records.append(failed(0.2))
    point = compute_point(records, 1.0, 2, 10, percentiles=(50, 90), cpu_seconds=0.01)
    assert isinstance(point, Point)
    assert point.completed == 2 and point.failed == 1 and point.errors == {"http_500": 1}
    assert point.client_cpu_percent == pytest.approx(1.0) and point.level_failed
    flat = point.model_dump(exclude_unset=True)
    assert "p99_ttft_ms" not in flat and "interrupted" not in flat
    assert list(flat)[:3] == ["max_concurrency", "num_prompts", "duration"]
    assert extra(point)["request_rate"] == "inf" and point.name == "C=2"

    result = build_result(
        result_id="b001",
        server=ServerRef(url="http://127.0.0.1:1"),
        workload=Workload(model="m", max_tokens=10),
        client=ClientInfo(),
        levels=[2],
        points=[flat],
    )
    written = json.loads(save(result, tmp_path).read_text())["points"][0]
    assert written == point.model_dump(mode="json")
    assert written["p99_ttft_ms"] == 0.0 and written["interrupted"] is False
    assert list(written) == list(point.model_dump())  # the typed keys first, then the rest


def test_an_empty_level_dumps_zeros_and_nulls_where_it_did() -> None:
    point = compute_point([failed(0.0)], duration=0.0, level=1, max_tokens=8)
    flat = point.model_dump(mode="json")
    # nothing completed: the typed figures are 0.0, the optional ones None (JSON null)
    assert flat["mean_ttft_ms"] == 0.0 and flat["p99_itl_ms"] == 0.0
    assert flat["output_throughput"] == 0.0 and flat["achieved_concurrency"] == 0.0
    assert flat["client_cpu_percent"] is None and flat["request_goodput"] is None


def test_a_typed_point_in_model_time_is_the_flat_points_conversion() -> None:
    # the sweep scales the typed Point (point_to_model_time); results, trials and the tests of
    # timescale.py know the dict version (to_model_time): both give the same keys and values
    records = [rec(0.0, 0.05, [0.01] * 9, out=10), rec(0.1, 0.06, [0.02] * 3, out=4)]
    point = compute_point(records, 1.0, 2, 10, slo_ms={"ttft": 100}, cpu_seconds=0.01)
    before = point.model_dump(exclude_unset=True)
    scaled = point_to_model_time(point, 20.0)
    assert scaled.model_dump(exclude_unset=True) == to_model_time(before, 20.0)
    assert scaled.mean_ttft_ms == pytest.approx(20 * point.mean_ttft_ms)
    assert scaled.output_throughput == pytest.approx(point.output_throughput / 20)
    assert extra(scaled)["time_scale"] == 20.0 and "time_scale" not in extra(point)
    assert point.model_dump(exclude_unset=True) == before  # the measured point is not changed
    assert point_to_model_time(point, 1.0) is point
