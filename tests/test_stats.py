"""tools/domain/stats.py: one formula per figure - the noise floor, the geometric-mean ratio,
SLO met, beats - and tools.bench.results.repeats, the sweeps every caller passes to it."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from tools.bench.results import build_result, repeats, sweep_of
from tools.bench.schema import BenchResult, ClientInfo, ServerRef, Workload
from tools.domain import stats


def test_the_floor_is_twice_the_rms_of_consecutive_differences() -> None:
    runs = [[{1: 100.0, 10: 500.0}, {1: 102.0, 10: 490.0}, {1: 99.0, 10: 500.0}]]
    d1 = [2 / 101, 3 / 100.5]  # C=1: sweep 1 vs 2, 2 vs 3 (consecutive pairs, not all pairs)
    d10 = [10 / 495, 10 / 495]
    floors = stats.level_floors(runs)
    assert floors[1] == pytest.approx(2 * math.sqrt(sum(d * d for d in d1) / 2))
    assert floors[10] == pytest.approx(2 * 10 / 495)
    # the objective pools the levels; the geomean over n levels averages their noise by sqrt(n)
    pooled = math.sqrt(sum(d * d for d in d1 + d10) / 4)
    assert stats.objective_floor(runs, [1, 10]) == pytest.approx(2 * pooled / math.sqrt(2))
    assert stats.objective_floor(runs, [1, 10], "peak") == pytest.approx(2 * pooled)
    assert stats.objective_floor(runs, [10], "level") == pytest.approx(floors[10])


def test_failed_levels_and_unknown_floor() -> None:
    # a failed level (0.0) is no evidence of noise: it is left out of the differences
    runs = [[{1: 100.0, 10: 0.0}, {1: 104.0, 10: 500.0}]]
    assert set(stats.level_floors(runs)) == {1}
    assert stats.objective_floor(runs, [10]) is None
    assert stats.objective_floor([[{1: 100.0}]], [1]) is None  # one sweep: unknown
    assert stats.level_floors([[{1: 100.0}, {1: 100.0}]]) == {1: stats.NOISE_MIN}
    assert stats.percent(None).startswith("unknown") and stats.percent(0.0213) == "2.1 %"
    # a failed level fails the geometric mean and the ratio; a baseline's failed level is skipped
    assert stats.geomean([100.0, 0.0]) == 0.0
    assert stats.geomean_ratio({1: 100.0, 10: 0.0}, {1: 100.0, 10: 500.0}) == 0.0
    assert stats.geomean_ratio({1: 110.0, 10: 500.0}, {1: 100.0, 10: 0.0}) == pytest.approx(1.1)
    assert stats.geomean_ratio({1: 1.0}, {2: 1.0}) is None
    assert stats.mean_sweep([{1: 100.0, 10: 0.0}, {1: 110.0, 10: 500.0}]) == {1: 105.0, 10: 250.0}


def test_beats_and_verdicts() -> None:
    assert stats.beats(1.05, 0.02) and not stats.beats(1.01, 0.02)
    assert not stats.beats(1.5, None)  # unknown floor: measure the baseline twice first
    assert not stats.beats(None, 0.02)
    runs = [[{1: 100.0, 10: 500.0}, {1: 101.0, 10: 505.0}]]
    base = {1: 100.5, 10: 502.5}
    win = stats.versus({1: 110.0, 10: 560.0}, base, runs)
    assert win.verdict == "win" and win.levels == (1, 10)
    assert stats.versus({1: 100.6, 10: 503.0}, base, runs).verdict == "within noise"
    assert stats.versus({1: 80.0, 10: 400.0}, base, runs).verdict == "below the baseline"
    assert stats.versus({1: 120.0}, {1: 100.0}, []).verdict == "noise floor unknown"
    only_one = stats.versus({1: 120.0, 10: 600.0}, base, runs, "level", 10)
    assert only_one.floor == stats.level_floors(runs)[10]


def test_slo_met_needs_the_metric() -> None:
    slo = SimpleNamespace(ttft_p99_ms=100.0, tpot_p99_ms=None)
    assert stats.slo_met({"p99_ttft_ms": 80.0}, slo)
    assert not stats.slo_met({"p99_ttft_ms": 120.0}, slo)
    assert not stats.slo_met({}, slo)  # not measured: no evidence it met the SLO
    assert not stats.slo_met({"p99_ttft_ms": 10.0, "level_failed": True}, slo)
    both = SimpleNamespace(ttft_p99_ms=100.0, tpot_p99_ms=20.0)
    assert not stats.slo_met({"p99_ttft_ms": 10.0}, both)


def result(
    rid: str, command: str, tput: dict[int, float], created: str, **point: object
) -> BenchResult:
    r = build_result(
        result_id=rid,
        server=ServerRef(command=command),
        workload=Workload(model="m"),
        client=ClientInfo(),
        levels=list(tput),
        points=[{"max_concurrency": c, "output_throughput": v, **point} for c, v in tput.items()],
    )
    return r.model_copy(update={"created": created})


def test_repeats_groups_sweeps_of_one_configuration_in_measured_order() -> None:
    a2 = result("b003", "python -m sim", {1: 101.0}, "2026-01-01T00:03:00Z")
    a1 = result("b001", "python -m sim --port 1", {1: 100.0}, "2026-01-01T00:01:00Z")
    b = result("b002", "python -m sim --x 1", {1: 150.0}, "2026-01-01T00:02:00Z")
    failed = result("b004", "python -m sim --x 1", {1: 0.0}, "2026-01-01T00:04:00Z",
                    level_failed=True)  # fmt: skip
    cut = result("b005", "python -m sim --x 1", {1: 9.0}, "2026-01-01T00:05:00Z", interrupted=True)
    got = repeats([a2, a1, b, failed, cut])  # --port is not part of what a configuration is
    assert got == [[{1: 100.0}, {1: 101.0}], [{1: 150.0}, {1: 0.0}]]
    assert sweep_of(failed) == {1: 0.0} and sweep_of(cut) == {}


def test_repeats_pair_only_sweeps_measured_the_same_way() -> None:
    """A screen sends fewer requests per level than a full sweep: more of it is ramp-up and
    drain, so its gap to a full sweep is bias, not noise - it pairs only with screens."""
    full1 = result("b001", "python -m sim", {1: 100.0}, "2026-01-01T00:01:00Z", num_prompts=30)
    screen = result("b002", "python -m sim", {1: 80.0}, "2026-01-01T00:02:00Z", num_prompts=10)
    full2 = result("b003", "python -m sim", {1: 102.0}, "2026-01-01T00:03:00Z", num_prompts=30)
    assert repeats([full1, screen, full2]) == [[{1: 100.0}, {1: 102.0}], [{1: 80.0}]]
