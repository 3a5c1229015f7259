"""Levels with a minimum length (issue 29, item 4): against the simulator as a real process (ideal
mode: a request never answers faster than its fixed TTFT and ITLs), a closed level goes on past
its count while requests are fast, stops at its cap and says so, and sends its count - no more -
when requests are slower than the minimum. Counts and notes are asserted, never durations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.cli.bench import main as bench_main
from tests.test_bench_sim import make_ctx, sim  # noqa: F401 - the simulator fixture
from tools.base import ToolBox
from tools.bench.level_traffic import MIN_POOL_FACTOR
from tools.bench.results import repeats
from tools.bench.schema import BenchResult, ClientInfo, Point, ServerRef, Workload
from tools.domain.config import ConfigError, load_config
from tools.run_benchmark import RunBenchmark
from tools.servers.profiles import ENGINES

SHORT = ["--input-len", "16", "--warmup", "0"]


def bench(argv: list[str], out: Path) -> dict[str, Any]:
    assert bench_main([*argv, *SHORT, "--json", str(out)]) == 0
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def capped(result: dict[str, Any]) -> list[str]:
    return [n for n in result["notes"] if "requests it may send" in n]


def test_a_minimum_sends_more_than_the_count_while_requests_are_fast(
    sim: tuple[str, list[str]],  # noqa: F811
    tmp_path: Path,
) -> None:
    url, _ = sim
    argv = ["--url", url, "--concurrency", "1", "--requests-per-level", "4", "--max-tokens", "4"]
    # 4 requests of ~10 ms against a minimum of 1 s: the level goes on (up to 16 x 4)
    result = bench([*argv, "--min-level-seconds", "1"], tmp_path / "m.json")
    (point,) = result["points"]
    assert 4 < point["num_prompts"] <= 4 * MIN_POOL_FACTOR
    assert point["completed"] == point["num_prompts"] and point["failed"] == 0
    assert result["workload"]["min_level_s"] == 1.0
    # without the minimum the count alone: exactly 4
    plain = bench(argv, tmp_path / "p.json")
    assert plain["points"][0]["num_prompts"] == 4 and plain["workload"]["min_level_s"] is None
    assert result["config_hash"] == plain["config_hash"]  # the same workload, measured longer


def test_the_cap_ends_a_level_first_and_the_result_says_so(
    sim: tuple[str, list[str]],  # noqa: F811
    tmp_path: Path,
) -> None:
    url, _ = sim
    argv = ["--url", url, "--concurrency", "2", "--requests-per-level", "2", "--max-tokens", "2"]
    # two client processes, one stream each: each sends its share of the 16 x 2 and stops there
    result = bench([*argv, "--min-level-seconds", "1000", "--processes", "2"], tmp_path / "c.json")
    (point,) = result["points"]
    assert point["num_prompts"] == point["completed"] == 2 * MIN_POOL_FACTOR
    assert capped(result) == [
        f"C=2: the level sent all {2 * MIN_POOL_FACTOR} requests it may send ({MIN_POOL_FACTOR} "
        "x its count of 2) before its minimum of 1000 s: a shorter level than asked"
    ]


def test_the_count_still_holds_when_requests_are_slower_than_the_minimum(
    sim: tuple[str, list[str]],  # noqa: F811
    tmp_path: Path,
) -> None:
    url, _ = sim
    # every request takes at least TTFT + 31 ITLs (36 ms): the 5 ms minimum has passed before
    # a stream is free for the 7th, and the count is sent whole however long that takes
    argv = ["--url", url, "--concurrency", "2", "--requests-per-level", "6", "--max-tokens", "32"]
    result = bench([*argv, "--min-level-seconds", "0.005"], tmp_path / "s.json")
    (point,) = result["points"]
    assert point["num_prompts"] == point["completed"] == 6
    assert capped(result) == []


def test_bad_minimums_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "http://127.0.0.1:1"
    assert bench_main(["--url", url, "--min-level-seconds", "-1"]) == 2
    assert "--min-level-seconds must be a number of seconds >= 0, got -1" in capsys.readouterr().err
    assert bench_main(["--url", url, "--min-level-seconds", "five"]) == 2
    assert "--min-level-seconds" in capsys.readouterr().err
    for value, shown in (("-1", "-1"), ('"5"', "'5'"), ("nan", "nan")):
        path = tmp_path / "agent.toml"
        path.write_text(f"[bench]\nmin_level_s = {value}\n")
        with pytest.raises(ConfigError) as err:
            load_config(path)
        line = str(err.value)
        assert "bench.min_level_s" in line and shown in line and "\n" not in line, line


def test_real_engines_default_to_a_minimum_and_the_simulator_to_none() -> None:
    for name in ("llama.cpp", "vllm", "sglang", "llama-cpp-python", "openai"):
        assert ENGINES[name].min_level_s == 5.0, name
    assert ENGINES["sim"].min_level_s is None  # the lab's decisions rest on counts


async def test_run_benchmark_takes_the_config_over_the_profile(
    sim: tuple[str, list[str]],  # noqa: F811
    tmp_path: Path,
) -> None:
    url, command = sim
    box = ToolBox([RunBenchmark()])
    inp = {"concurrency": [1], "requests_per_level": 4, "max_tokens": 4, "input_len": 16}
    ctx, _ = make_ctx(tmp_path / "sim", url, command)  # engine "sim": no minimum, the count
    res, _ = await box.call(ctx, "run_benchmark", inp)
    assert not res.is_error, res.text
    saved = json.loads(Path(res.data["path"]).read_text())
    assert saved["points"][0]["num_prompts"] == 4 and saved["workload"]["min_level_s"] is None
    ctx, _ = make_ctx(tmp_path / "set", url, command)
    ctx.config.bench.min_level_s = 1.0
    res, _ = await box.call(ctx, "run_benchmark", inp)
    assert not res.is_error, res.text
    saved = json.loads(Path(res.data["path"]).read_text())
    assert saved["points"][0]["num_prompts"] > 4 and saved["workload"]["min_level_s"] == 1.0
    assert "at least 1 s per level" in res.text


def _result(rid: str, sent: int, least: float | None) -> BenchResult:
    point = Point(max_concurrency=1, num_prompts=sent, completed=sent, output_throughput=100.0)
    return BenchResult(
        id=rid,
        created=f"2026-12-04T00:00:0{rid[-1]}Z",
        config_hash="h",
        server=ServerRef(),
        workload=Workload(requests_per_level=30, min_level_s=least),
        client=ClientInfo(),
        levels=[1],
        points=[point],
    )


def test_sweeps_with_a_minimum_are_alike_whatever_they_sent() -> None:
    # two sweeps of one rule (30 requests, at least 5 s) that sent 131 and 140: repeats of one
    # measurement, so their difference is noise; without a minimum 131 vs 140 are two shapes
    assert [len(g) for g in repeats([_result("b001", 131, 5.0), _result("b002", 140, 5.0)])] == [2]
    assert [len(g) for g in repeats([_result("b001", 131, None), _result("b002", 140, None)])] == [
        1,
        1,
    ]
