"""Workloads against the simulator as a real process (ideal mode): open-loop request rates that
are kept, goodput under an SLO, a ShareGPT file's lengths, a duration-bound closed level, and
compare refusing to mix workloads."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent.cli.bench import main as bench_main
from state.run import Run
from tests.test_bench_datasets import sharegpt
from tests.test_bench_sim import make_ctx, sim  # noqa: F401 - the simulator fixture
from tools.base import ToolBox, ToolContext
from tools.bench.level_traffic import CLOSED_POOL_PER_C
from tools.compare import Compare
from tools.domain.config import ConfigError, load_config
from tools.run_benchmark import RunBenchmark, RunBenchmarkInput, workload_of


def bench(argv: list[str], out: Path) -> dict[str, Any]:
    assert bench_main([*argv, "--json", str(out)]) == 0
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_request_rates_are_kept_and_goodput_follows_the_slo(
    sim: tuple[str, list[str]],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, _ = sim
    argv = ["--url", url, "--request-rate", "5,20,80", "--duration", "3", "--max-tokens", "32"]
    result = bench([*argv, "--slo", "ttft_ms=200"], tmp_path / "r.json")
    assert result["request_rates"] == [5.0, 20.0, 80.0]
    assert result["workload"]["traffic"] == "rate" and result["workload"]["burstiness"] == 1.0
    assert result["workload"]["slo_ms"] == {"ttft": 200.0}
    for p, rate in zip(result["points"], [5, 20, 80], strict=True):
        assert p["request_rate"] == rate and p["num_prompts"] == 3 * rate
        assert p["achieved_request_rate"] == pytest.approx(rate, rel=0.05)
        assert p["completed"] == p["num_prompts"]
        assert p["request_goodput"] == pytest.approx(p["request_throughput"])  # all under 200
        assert p["slo_attainment"] == 1.0
    table = capsys.readouterr().out
    assert "rate/s" in table and "goodput" in table and "SLO met" in table

    in_process = [*argv[:3], "5", "--duration", "2", "--slo", "ttft_ms=1", "--processes", "0"]
    p = bench(in_process, tmp_path / "s.json")["points"][0]
    assert p["achieved_request_rate"] == pytest.approx(5, rel=0.05)
    # the sim's TTFT is 5 ms: no request meets 1 ms
    assert p["request_goodput"] == 0.0 and p["slo_attainment"] == 0.0


def test_a_sharegpt_file_sets_the_lengths_unless_fixed(
    sim: tuple[str, list[str]],  # noqa: F811
    tmp_path: Path,
) -> None:
    url, _ = sim
    data = f"sharegpt:{sharegpt(tmp_path / 'sg.json', 8)}"
    argv = ["--url", url, "--dataset", data, "--concurrency", "2", "--requests-per-level", "8"]
    result = bench([*argv, "--warmup", "0"], tmp_path / "d.json")
    point = result["points"][0]
    assert sorted(point["output_lens"]) == [10 * k for k in range(1, 9)]  # the replies' lengths
    assert sorted(point["input_lens"]) == [2 + k for k in range(1, 9)]  # "question k why..."
    assert result["workload"]["lengths"] == "data" and result["workload"]["dataset_digest"]
    assert not result["notes"]  # 8 prompts were enough: nothing sent twice

    fixed = bench([*argv, "--max-tokens", "6"], tmp_path / "f.json")
    assert fixed["points"][0]["output_lens"] == [6] * 8
    assert "has 8 prompts and this sweep sent 10: 2 were sent again" in fixed["notes"][0]


def test_a_duration_bound_closed_level_with_chat_prompts(
    sim: tuple[str, list[str]],  # noqa: F811
    tmp_path: Path,
) -> None:
    url, _ = sim
    argv = ["--url", url, "--dataset", "chat", "--concurrency", "2", "--duration", "1"]
    result = bench(argv, tmp_path / "c.json")
    point = result["points"][0]
    # stopped by the clock, not by running out of its 2 x 64 prepared requests (the note that
    # says so is absent); each stream sends its first request at the start and every request
    # sent is answered, so a loaded machine measures fewer requests, never none
    assert not any("prepared requests finished before" in n for n in result["notes"])
    assert 2 <= point["completed"] == point["num_prompts"] < 2 * CLOSED_POOL_PER_C
    assert len(set(point["output_lens"])) > 1  # the dataset's answer lengths (its first two differ)


def test_bad_workload_options_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    url = "http://127.0.0.1:1"
    cases = [
        (["--request-rate", "5", "--concurrency", "1"], "not allowed with argument"),
        (["--request-rate", "0"], "request rates must be positive numbers"),
        (["--burstiness", "0.5"], "--burstiness applies to --request-rate levels"),
        (["--slo", "ttft=1"], "KEY=MS with KEY one of ttft_ms, tpot_ms, e2el_ms"),
        (["--dataset", "sonnet"], "unknown dataset 'sonnet'"),
        (["--duration", "0"], "--duration must be positive"),
    ]
    for argv, message in cases:
        assert bench_main(["--url", url, *argv]) == 2, argv
        assert message in capsys.readouterr().err, argv
    assert bench_main(["--url", url, "--dataset", "jsonl:/no/such.jsonl"]) == 1
    assert "cannot read dataset /no/such.jsonl" in capsys.readouterr().err


@pytest.fixture
def tool(sim: tuple[str, list[str]], tmp_path: Path) -> tuple[ToolContext, ToolBox]:  # noqa: F811
    """A run with the simulator started in it, and the run_benchmark and compare tools."""
    url, command = sim
    ctx, _ = make_ctx(tmp_path, url, command)
    return ctx, ToolBox([RunBenchmark(), Compare()])


async def test_the_tool_takes_the_same_options_and_compare_refuses_mixed_workloads(
    tool: tuple[ToolContext, ToolBox],
) -> None:
    ctx, box = tool
    common = {"max_tokens": 8, "slo": {"ttft_ms": 500}}
    res, _ = await box.call(
        ctx, "run_benchmark", {**common, "request_rate": [10], "duration_s": 2, "label": "r"}
    )
    assert not res.is_error, res.text
    saved = json.loads(Path(res.data["path"]).read_text())
    assert saved["points"][0]["request_rate"] == 10 and saved["request_rates"] == [10]
    assert saved["points"][0]["request_goodput"] > 0
    res, _ = await box.call(
        ctx, "run_benchmark", {**common, "concurrency": [20], "requests_per_level": 20}
    )
    assert not res.is_error, res.text
    cmp, _ = await box.call(ctx, "compare", {"results": ["b001", "b002"]})
    assert cmp.is_error and cmp.text.count("\n") == 0, cmp.text
    assert "workloads differ (traffic rate vs concurrency; duration_s 2 vs None)" in cmp.text
    for inp, message in [
        ({"request_rate": [5], "concurrency": [1]}, "give `concurrency` or `request_rate`"),
        ({"dataset": "hf:x"}, "unknown dataset 'hf:x'"),
        ({"slo": {"ttft": 5}}, "slo"),
        ({"request_rate": [0]}, "greater than 0"),
    ]:
        res, _ = await box.call(ctx, "run_benchmark", inp)
        assert res.is_error and message in res.text, (inp, res.text)


async def test_the_tool_sends_a_shared_prefix_and_resets_the_cache_as_the_profile_says(
    tool: tuple[ToolContext, ToolBox],
) -> None:
    ctx, box = tool
    ctx.config.bench.shared_prefix = 500  # [bench] shared_prefix = 500: the call's default
    inp = {"concurrency": [1], "requests_per_level": 3, "input_len": 64, "max_tokens": 4}
    res, _ = await box.call(ctx, "run_benchmark", inp)
    assert not res.is_error, res.text
    saved = json.loads(Path(res.data["path"]).read_text())
    assert saved["workload"]["shared_prefix"] == 500
    assert saved["workload"]["cache_reset"] == "/flush_cache"  # the sim profile's reset
    assert saved["points"][0]["total_input_tokens"] == 3 * (500 + 64)
    assert not any("not reset" in n for n in saved["notes"])
    res, _ = await box.call(ctx, "run_benchmark", {**inp, "shared_prefix": 0})  # the call wins
    cmp, _ = await box.call(ctx, "compare", {"results": ["b001", "b002"]})
    assert cmp.is_error and "shared_prefix 500 vs 0" in cmp.text


def test_bench_config_sets_multi_turn_for_its_own_dataset(tmp_path: Path) -> None:
    toml = tmp_path / "agent.toml"
    toml.write_text(
        '[bench]\nmulti_turn = true\ndataset = "jsonl:talks.jsonl"\nshared_prefix = 64\n'
    )
    config = load_config(toml)
    ctx = ToolContext(run=Run.create(tmp_path / "runs", "r"), config=config)
    wl = workload_of(ctx, RunBenchmarkInput(), None)
    assert wl.multi_turn and wl.shared_prefix == 64 and wl.dataset == "jsonl:talks.jsonl"
    assert not workload_of(ctx, RunBenchmarkInput(dataset="chat"), None).multi_turn
    assert not workload_of(ctx, RunBenchmarkInput(), [5.0]).multi_turn  # rates: open loops
    for body, message in [
        ("multi_turn = true", "multi_turn needs conversations: dataset = 'sharegpt:FILE'"),
        ('multi_turn = true\ndataset = "jsonl:t.jsonl"\nrequest_rate = [5]', "drop request_rate"),
        ("shared_prefix = -5", "bench.shared_prefix: Input should be greater than or equal to 0"),
    ]:
        toml.write_text(f"[bench]\n{body}\n")
        with pytest.raises(ConfigError, match=re.escape(message)) as err:
            load_config(toml)
        assert "\n" not in str(err.value)
