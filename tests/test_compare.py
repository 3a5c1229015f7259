"""compare: ratios, winners, crossovers and the geometric mean; the warnings that keep a
comparison honest; the tool resolving ids and reading vLLM result files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from state.run import Run
from tools.base import ToolBox, ToolContext
from tools.bench.comparison import compare, render_comparison
from tools.bench.results import build_result, save
from tools.bench.schema import BenchResult, ClientInfo, ServerRef, Workload
from tools.compare import Compare
from tools.domain import stats
from tools.domain.config import lab_config

BASE = "python -m sim --tp 8 --disable-custom-all-reduce --attention-backend flashinfer"


def result(
    rid: str,
    tput: dict[int, float],
    command: str | None = BASE,
    flags: dict | None = None,
    workload: Workload | None = None,
    failed: tuple[int, ...] = (),
) -> BenchResult:
    points = [
        {"max_concurrency": c, "output_throughput": v, "completed": 10, "level_failed": c in failed}
        for c, v in tput.items()
    ]
    server = ServerRef(name="s", command=command, flags=flags or {}, engine="sim", url="http://x")
    return build_result(
        result_id=rid,
        server=server,
        workload=workload or Workload(model="m"),
        client=ClientInfo(),
        levels=list(tput),
        points=points,
        run_id="r",
    )


def test_ratios_winners_crossover_and_geomean() -> None:
    base = result("b001-base", {1: 92.6, 10: 500.0, 100: 773.0})
    eagle = result(
        "b002-eagle",
        {1: 96.1, 10: 400.0, 100: 354.0},
        command=BASE + " --speculative-algorithm EAGLE3",
        flags={"--speculative-algorithm": "EAGLE3"},
    )
    cmp = compare([base, eagle])
    assert cmp.baseline == "b001-base"
    assert cmp.ratios["b002-eagle"][1] == pytest.approx(96.1 / 92.6)
    assert cmp.winners == {1: "b002-eagle", 10: "b001-base", 100: "b001-base"}
    assert cmp.crossovers["b002-eagle"] == [  # nothing measured twice: no floor to clear
        "between C=1 and C=10: b002-eagle ahead at C<=1, b001-base at C>=10 (noise floor "
        "unknown at C=1: not established)"
    ]
    expected = ((96.1 / 92.6) * (400 / 500) * (354 / 773)) ** (1 / 3)
    assert cmp.geomean["b002-eagle"] == pytest.approx(expected)
    assert not cmp.warnings  # one flag under test differs: fair, one-factor
    assert any("noise floor unknown" in n for n in cmp.notes)
    text = render_comparison(cmp)
    assert "crossover b002-eagle vs b001-base: between C=1 and C=10" in text
    assert "geomean ratio b002-eagle / b001-base: 0." in text


def test_baseline_choice_and_failed_levels() -> None:
    a = result("b001", {1: 100.0, 10: 900.0})
    b = result("b002", {1: 110.0, 10: 0.0}, failed=(10,))
    cmp = compare([a, b], baseline="b002")
    assert cmp.baseline == "b002"
    assert cmp.ratios["b001"] == {1: pytest.approx(100 / 110)}  # no ratio against a failed level
    assert cmp.winners[10] == "b001"
    assert any("every request failed at C=10" in w for w in cmp.warnings)


def test_workloads_that_differ_are_not_comparable() -> None:
    a = result("b001", {1: 100.0})
    b = result("b002", {1: 120.0}, workload=Workload(model="m", max_tokens=128))
    cmp = compare([a, b])
    assert any("workloads differ (max_tokens 512 vs 128)" in w for w in cmp.warnings)


def test_unfair_and_multi_factor_launches() -> None:
    a = result("b001", {1: 100.0})
    other_tp = result("b002", {1: 150.0}, command=BASE.replace("--tp 8", "--tp 4"))
    assert any("UNFAIR" in w and "--tp 8 vs 4" in w for w in compare([a, other_tp]).warnings)
    # a flag changed that the experiment did not ask for: unfair as well
    sneaky = result(
        "b003",
        {1: 120.0},
        command=BASE + " --cuda-graph-max-bs 64 --mem-fraction-static 0.8",
        flags={"--cuda-graph-max-bs": 64},
    )
    warn = compare([a, sneaky]).warnings
    assert any("--mem-fraction-static (absent) vs 0.8 (not a flag under test)" in w for w in warn)
    two = result(
        "b004",
        {1: 120.0},
        command=BASE + " --cuda-graph-max-bs 64 --enable-flashinfer-allreduce-fusion",
        flags={"--cuda-graph-max-bs": 64, "--enable-flashinfer-allreduce-fusion": True},
    )
    cmp = compare([a, two])
    assert not cmp.warnings
    assert any("not a one-factor comparison - 2 flags differ" in n for n in cmp.notes)
    unknown = compare([a, result("b005", {1: 1.0}, command=None)])
    assert any("server command of b005 unknown" in n for n in unknown.notes)


def test_a_crossover_needs_a_margin_over_the_one_sweep_floor() -> None:
    """Issue 49, item 14: compare declared a crossover on a 1.3 % edge against a 0.8 % floor. The
    floor is one launch's A/A pair: an edge must clear twice it, and 2 %, to set a policy."""
    aa = [[{1: 1000.0, 100: 500.0}, {1: 1004.0, 100: 502.0}]]  # 0.8 % apart
    base = result("b001", {1: 1000.0, 100: 500.0})
    flags = {"--speculative-algorithm": "EAGLE3"}
    command = BASE + " --speculative-algorithm EAGLE3"
    thin = result("b003", {1: 1013.0, 100: 400.0}, command=command, flags=flags)
    cmp = compare([base, thin], repeats=aa)
    assert cmp.noise[1] == pytest.approx(0.008, abs=0.0002)
    (line,) = cmp.crossovers["b003"]
    assert line.endswith(
        "(an edge of 1.3 % at C=1 against a one-sweep floor of 0.8 %: a crossover needs 2x the "
        "floor and at least 2 %: not established)"
    ), line
    clear = result("b004", {1: 1030.0, 100: 400.0}, command=command, flags=flags)
    (line,) = compare([base, clear], repeats=aa).crossovers["b004"]
    assert line == "between C=1 and C=100: b004 ahead at C<=1, b001 at C>=100"  # 3 % clears


def test_noise_floor_from_repeats_marks_small_differences() -> None:
    a1 = result("b001", {1: 100.0, 10: 800.0})
    a2 = result("b002", {1: 103.0, 10: 808.0})  # the same launch again: an A/A pair
    c = result(
        "b003",
        {1: 101.0, 10: 900.0},
        command=BASE + " --cuda-graph-max-bs 64",
        flags={"--cuda-graph-max-bs": 64},
    )
    aa = [[{1: 100.0, 10: 800.0}, {1: 103.0, 10: 808.0}]]
    cmp = compare([a1, c], repeats=aa)
    assert cmp.noise == stats.level_floors(aa)
    assert cmp.noise[1] == pytest.approx(2 * 3 / 101.5)
    assert cmp.within_noise["b003"] == [1]  # +1 % at C=1 is inside a 5.9 % floor; +12.5 % is not
    assert any("within the noise floor at C=1" in w for w in cmp.warnings)
    assert "1.010~" in render_comparison(cmp)
    # the summary: the geomean ratio against the floor of the geomean over both levels
    v = cmp.versus["b003"]
    assert v.ratio == pytest.approx((101 / 100 * 900 / 800) ** 0.5)
    assert v.floor == stats.objective_floor(aa, [1, 10])
    assert v.wins and cmp.winner == "b003"
    assert cmp.data()["noise_floor"] == {"b003": v.floor}
    text = render_comparison(cmp)
    assert (
        f"geomean ratio b003 / b001: {v.ratio:.3f} (noise floor {stats.percent(v.floor)}: win)"
        in (text)
    )
    # the results of one configuration compared together: the A/A pair is found among them, and
    # the baseline's figure is their mean
    both = compare([a1, a2, c])
    assert both.noise == cmp.noise
    mean = {1: 101.5, 10: 804.0}
    assert both.geomean["b003"] == pytest.approx(stats.geomean_ratio({1: 101.0, 10: 900.0}, mean))
    assert "geomean ratio b003 / b001+b002" in render_comparison(both)
    # a crossover whose sides lie inside the noise is not established
    d = result(
        "b004",
        {1: 101.0, 10: 795.0},
        command=BASE + " --cuda-graph-max-bs 64",
        flags={"--cuda-graph-max-bs": 64},
    )
    within = compare([a1, d], repeats=aa)
    assert within.crossovers["b004"][0].endswith("(within the noise floor: not established)")
    assert within.versus["b004"].verdict == "within noise" and within.winner == "b001"
    only = compare([a1, d], repeats=[[{1: 100.0, 250: 1.0}, {1: 103.0, 250: 2.0}]])
    assert set(only.noise) == {1}  # levels outside the comparison are not shown


def test_without_a_repeat_the_floor_is_unknown_and_nothing_wins() -> None:
    a = result("b001", {1: 100.0})
    c = result("b002", {1: 150.0}, command=BASE + " --x 1", flags={"--x": 1})
    cmp = compare([a, c])
    assert cmp.versus["b002"].floor is None and cmp.winner == "b001"
    assert "noise floor unknown (no configuration measured twice): noise floor unknown" in (
        render_comparison(cmp)
    )


def make_ctx(tmp_path: Path) -> ToolContext:
    run = Run.create(tmp_path / "runs", "r")
    return ToolContext(run=run, config=lab_config())


async def test_compare_tool_resolves_ids_paths_and_vllm_files(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    results = ctx.run.path / "results"
    save(result("b001-baseline", {1: 92.0, 10: 600.0}), results)
    save(
        result(
            "b002-fa3",
            {1: 95.0, 10: 640.0},
            command=BASE.replace("flashinfer", "fa3"),
            flags={"--attention-backend": "fa3"},
        ),
        results,
    )
    vllm = {
        "date": "20250101-000000",
        "backend": "openai",
        "model_id": "m",
        "num_prompts": 100,
        "max_concurrency": 10,
        "duration": 10.0,
        "completed": 100,
        "failed": 0,
        "total_input_tokens": 51200,
        "total_output_tokens": 6000,
        "output_throughput": 600.0,
        "request_throughput": 10.0,
        "mean_ttft_ms": 50.0,
        "p99_ttft_ms": 80.0,
        "mean_e2el_ms": 990.0,
        "errors": [""] * 100,
        "output_lens": [512] * 100,  # the same workload as b001's (compare refuses others)
    }
    (tmp_path / "vllm.json").write_text(json.dumps(vllm))
    box = ToolBox([Compare()])
    res, _ = await box.call(ctx, "compare", {"results": ["b001", "b002-fa3"]})
    assert not res.is_error, res.text
    assert "b002-fa3" in res.text and res.data["winners"] == {"1": "b002-fa3", "10": "b002-fa3"}
    res, _ = await box.call(ctx, "compare", {"results": ["b001", str(tmp_path / "vllm.json")]})
    assert not res.is_error, res.text
    assert res.data["ratios"]["vllm"] == {"10": 1.0}
    assert "server command of vllm unknown" in res.text
    vllm["output_lens"] = [60] * 100
    (tmp_path / "vllm60.json").write_text(json.dumps(vllm))
    res, _ = await box.call(ctx, "compare", {"results": ["b001", str(tmp_path / "vllm60.json")]})
    assert res.is_error and "workloads differ (max_tokens 512 vs 60)" in res.text
    res, _ = await box.call(ctx, "compare", {"results": ["b001", "b009"]})
    assert res.is_error and "no result 'b009'" in res.text and "b002-fa3" in res.text
    res, _ = await box.call(ctx, "compare", {"results": ["b001"]})
    assert res.is_error and "results" in res.text
    res, _ = await box.call(ctx, "compare", {"results": ["b001", "b002"], "baseline": "b002"})
    assert not res.is_error and res.data["baseline"] == "b002-fa3"


async def test_compare_tool_takes_the_noise_floor_from_the_runs_results(tmp_path: Path) -> None:
    """An A/A pair measured in this run gives the floor even when it is not among those compared;
    the ledger's earlier runs do not (another day, another noise)."""
    ctx = make_ctx(tmp_path)
    results = ctx.run.path / "results"
    a1, a2 = result("b001", {1: 100.0}), result("b002", {1: 97.0})
    c = result("b003", {1: 101.0}, command=BASE + " --cuda-graph-max-bs 64",
               flags={"--cuda-graph-max-bs": 64})  # fmt: skip
    for r in (a1, a2, c):
        path = save(r, results)
        ctx.run.append("benchmark", id=r.id, path=str(path), config_hash=r.config_hash,
                       summary=r.summary(), workload=r.workload.model_dump())  # fmt: skip
    res, _ = await ToolBox([Compare()]).call(ctx, "compare", {"results": ["b001", "b003"]})
    assert res.data["level_noise_floor"] == {"1": pytest.approx(2 * 3 / 98.5)}
    assert res.data["within_noise"] == {"b003": [1]}
    assert res.data["verdict"] == {"b003": "within noise"} and res.data["winner"] == "b001"
