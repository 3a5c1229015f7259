"""The simulator's model: calibration to the reference figures, the space and its optimum."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sim import cli
from sim.flags import FlagError
from sim.space import DEFAULT_BASE_FLAGS, default_space, load_space
from sim.truth import baseline_of, enumerate_space, model_of, throughput
from tools.domain import lab_truth
from tools.domain.lab_truth import config_value, optimum
from tools.domain.objective import objective_value

REFERENCE = ["--attention-backend", "flashinfer", "--enable-flashinfer-allreduce-fusion"]
REFERENCE += ["--cuda-graph-max-bs", "128"]
EAGLE3 = ["--speculative-algorithm", "EAGLE3"]
BASE = default_space()["baseline"]
SPEC = "--speculative-algorithm"


def spec(steps: int, topk: int, tokens: int, **more: object) -> dict[str, object]:
    return {
        **BASE,
        SPEC: "EAGLE3",
        "--speculative-num-steps": steps,
        "--speculative-eagle-topk": topk,
        "--speculative-num-draft-tokens": tokens,
        **more,
    }


def truth_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, float]:
    assert cli.main(["truth", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def within(value: float, target: float, rel: float = 0.05) -> bool:
    return abs(value / target - 1) <= rel


def test_calibration_baseline_and_eagle3(capsys: pytest.CaptureFixture[str]) -> None:
    base = truth_json(["--concurrency", "1,250", *REFERENCE], capsys)
    assert within(base["1"], 92.6) and within(base["250"], 773)
    eagle = truth_json(["--concurrency", "1,250", *REFERENCE, *EAGLE3], capsys)
    assert within(eagle["1"], 96.1) and 340 * 0.95 <= eagle["250"] <= 354 * 1.05
    assert eagle["1"] > base["1"]  # speculation pays at one stream, loses at saturation


def test_truth_entry_point_as_a_process() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sim", "truth", "--concurrency", "1,250", "--json", *REFERENCE],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert set(json.loads(out.stdout)) == {"1", "250"}


def test_flags_move_throughput_the_documented_way() -> None:
    levels = [1, 70, 100, 250]
    base = throughput(BASE, levels)
    triton = throughput({**BASE, "--attention-backend": "triton"}, levels)
    assert 1.07 <= base[1] / triton[1] <= 1.13  # flashinfer ~10 % over triton
    low_graphs = throughput({**BASE, "--cuda-graph-max-bs": 64}, levels)
    assert low_graphs[70] < 0.9 * base[70]  # batches above cuda-graph-max-bs run eager
    big_graphs = throughput({**BASE, "--cuda-graph-max-bs": 256}, levels)
    assert big_graphs[250] > 1.04 * base[250] and big_graphs[100] == pytest.approx(base[100])
    no_fusion = {**spec(3, 1, 4), "--enable-flashinfer-allreduce-fusion": False}
    no_fusion_base = {**BASE, "--enable-flashinfer-allreduce-fusion": False}
    assert throughput(no_fusion, [1])[1] < throughput(no_fusion_base, [1])[1]  # fusion made it pay


def test_speculation_crossover_and_best_setting_depend_on_concurrency() -> None:
    space = default_space()
    specs = [c for c in enumerate_space(space) if c[SPEC]]
    levels = [1, 2, 250]
    every = enumerate_space(space)

    def best_of(configs: list[dict[str, Any]], level: int) -> dict[str, Any]:
        return max(configs, key=lambda c: throughput(c, [level])[level])

    best = {lv: best_of(specs, lv) for lv in levels}
    best_any = {lv: best_of(every, lv) for lv in levels}
    assert best_any[1][SPEC] and not best_any[250][SPEC]  # a concurrency policy is needed
    assert throughput(best[250], [250])[250] < 0.75 * throughput(BASE, [250])[250]
    knobs = (
        "--speculative-num-steps",
        "--speculative-eagle-topk",
        "--speculative-num-draft-tokens",
    )
    assert [best[1][k] for k in knobs] != [best[2][k] for k in knobs]


def test_space_size_requires_and_validity() -> None:
    configs = enumerate_space(default_space())
    assert 48 <= len(configs) <= 150
    for c in configs:
        if not c[SPEC]:
            assert c["--speculative-num-steps"] is False and c["--speculative-eagle-topk"] is False
        else:
            model_of(c)  # every enumerated config is a command line the server accepts
    with pytest.raises(FlagError, match="must equal speculative_num_steps"):
        model_of(spec(3, 1, 2))
    assert baseline_of(default_space()) in configs


def test_optimum_is_not_the_baseline_nor_everything_on() -> None:
    space = default_space()
    config, value = optimum(space)
    f0 = config_value(baseline_of(space))
    assert value > 1.03 * f0
    assert config != baseline_of(space)
    assert config[SPEC] is False  # "turn every flag on" (EAGLE-3, biggest tree) is not it
    everything = spec(3, 4, 8, **{"--cuda-graph-max-bs": 256})
    assert config_value(everything) < f0  # it does not even start: CUDA graphs OOM
    assert model_of(everything).failure is not None


def test_space_cli_and_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["truth", "--space", "default", "--json"], lab_truth) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"config", "value"} and out["value"] > 0
    toml = tmp_path / "agent.toml"
    toml.write_text(
        '[search]\n"--attention-backend" = ["flashinfer", "triton"]\n'
        '"--cuda-graph-max-bs" = [128]\n"--enable-flashinfer-allreduce-fusion" = [true]\n'
    )
    space = load_space(toml)
    assert len(enumerate_space(space)) == 2
    assert (
        cli.main(
            [
                "truth",
                "--space",
                str(toml),
                "--objective",
                "level",
                "--level",
                "1",
                "--concurrency",
                "1",
                "--json",
            ],
            lab_truth,
        )
        == 0
    )
    best = json.loads(capsys.readouterr().out)
    assert best["config"]["--attention-backend"] == "flashinfer"
    assert cli.main(["truth", "--space", str(tmp_path / "missing.toml")], lab_truth) == 2
    assert "cannot read space file" in capsys.readouterr().err
    # `python -m sim truth` has no campaign objective to rank with: it says where to go
    assert cli.main(["truth", "--space", "default"]) == 2
    assert "use `agent sim truth`" in capsys.readouterr().err


def test_objectives_are_the_campaigns_and_bad_flags(capsys: pytest.CaptureFixture[str]) -> None:
    config = {"--cuda-graph-max-bs": 256}
    per = throughput(config, [1, 250])
    assert config_value(config, [1, 250]) == pytest.approx(objective_value(per))
    assert config_value(config, [1, 250], "peak") == max(per.values())
    assert config_value(config, [1, 250], "level", level=1) == per[1]
    with pytest.raises(ValueError, match="is not one of"):
        config_value(config, [1], "median")
    # the SLO: a level whose modelled latency is over the limit does not count
    assert config_value(config, [1, 250], "slo", ttft_ms=1e9) == max(per.values())
    assert config_value(config, [1, 250], "slo", ttft_ms=1e-3) == 0.0
    assert (
        cli.main(["truth", "--cuda-graph-max-bs", "256", "--concurrency", "1,250"], lab_truth) == 0
    )
    assert f"geomean: {objective_value(per):.1f}" in capsys.readouterr().out
    assert cli.main(["truth", "--attention-backend", "nope"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert cli.main(["truth", "--speculative-num-steps", "3"]) == 2
    assert "need --speculative-algorithm" in capsys.readouterr().err
    assert DEFAULT_BASE_FLAGS[:1] == ["--model-path"]
