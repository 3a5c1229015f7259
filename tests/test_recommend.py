"""recommend: the numbers come from the run's own benchmarks, the file is what the issue says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.session import Limits, start
from state.run import Run
from tests.autopilot_world import lab
from tools.base import ToolBox, ToolContext
from tools.bench.results import build_result, save
from tools.bench.schema import ClientInfo, Recommendation, ServerRef, Workload
from tools.domain import stats
from tools.domain.config import ObjectiveConfig
from tools.domain.space import render_flags
from tools.recommend import Recommend

BASE = {
    "--attention-backend": "flashinfer",
    "--cuda-graph-max-bs": 128,
    "--enable-flashinfer-allreduce-fusion": True,
}
FA3 = {**BASE, "--attention-backend": "fa3", "--cuda-graph-max-bs": 256}
SPEC = {
    **FA3,
    "--speculative-algorithm": "EAGLE3",
    "--speculative-num-steps": 3,
    "--speculative-eagle-topk": 4,
    "--speculative-num-draft-tokens": 8,
}
WORKLOAD = {"endpoint": "completions", "input_len": 512, "max_tokens": 128}


LATENCY = {1: 20.0, 10: 50.0, 100: 400.0}  # p99 TTFT ms per level


def bench(
    run: Run,
    rid: str,
    flags: dict[str, Any],
    summary: dict[int, float],
    workload: dict[str, Any] | None = None,
    label: str | None = None,
) -> None:
    """A real result file and the `benchmark` event run_benchmark writes for it (labelled with
    its id unless `label` is given)."""
    command = " ".join(["python -m sim", *render_flags(flags)])
    points = [
        {"max_concurrency": c, "output_throughput": v, "completed": 10,
         "p99_ttft_ms": LATENCY.get(c, 1.0), "p99_tpot_ms": 5.0}
        for c, v in summary.items()
    ]  # fmt: skip
    result = build_result(
        result_id=rid,
        server=ServerRef(name="server", command=command, flags=flags),
        workload=Workload(**(workload or WORKLOAD)),
        client=ClientInfo(),
        levels=list(summary),
        points=points,
        run_id=run.id,
        label=label or "",
    )
    path = save(result, run.path / "results")
    run.append(
        "benchmark",
        id=rid,
        path=str(path),
        config_hash=result.config_hash,
        server="server",
        command=command,
        flags=flags,
        label=label or rid,
        workload=result.workload.model_dump(),
        summary=result.summary(),
    )


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    config = lab()
    run = start("beat baseline", config, "autopilot", tmp_path, None, Limits())
    bench(run, "b001", BASE, {1: 90.0, 10: 360.0, 100: 520.0})
    bench(run, "b002", BASE, {1: 92.0, 10: 370.0, 100: 530.0})
    bench(run, "b003", FA3, {1: 100.0, 10: 380.0, 100: 540.0})
    bench(run, "b004", SPEC, {1: 120.0, 10: 300.0, 100: 280.0})
    return ToolContext(run=run, config=config)


async def call(ctx: ToolContext, inp: dict[str, Any]) -> Any:
    result, _ = await ToolBox([Recommend()]).call(ctx, "recommend", inp)
    return result


async def test_writes_the_recommendation_from_the_measurements(ctx: ToolContext) -> None:
    policy = [
        {"from_concurrency": 1, "to_concurrency": 1, "config": SPEC},
        {"from_concurrency": 10, "to_concurrency": None, "config": FA3},
    ]
    result = await call(ctx, {"config": FA3, "policy": policy, "reason": "fastest"})
    assert not result.is_error, result.text
    rec = json.loads((ctx.run.path / "recommendation.json").read_text())
    assert rec == result.data["recommendation"]
    base = (91.0 * 365.0 * 525.0) ** (1 / 3)
    assert rec["baseline_value"] == pytest.approx(base, rel=1e-4)
    assert rec["value"] == pytest.approx((100.0 * 380.0 * 540.0) ** (1 / 3), rel=1e-4)
    assert rec["gain"] == pytest.approx(rec["value"] / rec["baseline_value"] - 1, abs=1e-4)
    assert rec["config"]["--speculative-algorithm"] is False  # complete, as on the command line
    assert rec["config"]["--cuda-graph-max-bs"] == 256
    assert rec["command"].endswith(
        "--attention-backend fa3 --cuda-graph-max-bs 256 "
        "--enable-flashinfer-allreduce-fusion --port 30999"
    )
    assert rec["crossover"] == [10]
    assert rec["policy"][1]["to_concurrency"] is None and rec["notes"] == []
    # a policy is a server per range: each its command, on consecutive ports
    spec, fa3 = (p["command"] for p in rec["policy"])
    assert fa3 == rec["command"].replace("--port 30999", "--port 31000")
    assert "--speculative-algorithm EAGLE3" in spec and spec.endswith("--port 30999")
    assert "policy: 2 servers, one server per range; a router" in result.text
    assert rec["objective"]["kind"] == "geomean"
    assert result.text.startswith("Recommendation (geometric mean")
    # the figures are the statistics': the A/A pair b001/b002 gives the floor
    aa = [[{1: 90.0, 10: 360.0, 100: 520.0}, {1: 92.0, 10: 370.0, 100: 530.0}]]
    assert rec["noise_floor"] == pytest.approx(stats.objective_floor(aa, [1, 10, 100]), abs=1e-5)
    assert rec["geomean_ratio"] == pytest.approx(rec["gain"] + 1, abs=1e-4)
    assert rec["verdict"] == "win" and rec["candidate"]["config"] == rec["config"]
    assert f"noise floor {stats.percent(rec['noise_floor'])}" in result.text


# the keys recommendation.json always had, in order (the recorded sessions and older runs')
KEYS = ["objective", "config", "command", "policy", "crossover", "verdict", "candidate", "value",
        "baseline_value", "gain", "geomean_ratio", "noise_floor", "levels", "per_level",
        "baseline_per_level", "results", "baseline_results", "reason", "notes"]  # fmt: skip


async def test_the_file_is_one_typed_record_with_the_keys_it_always_had(ctx: ToolContext) -> None:
    policy = [
        {"from_concurrency": 1, "to_concurrency": 1, "config": SPEC},
        {"from_concurrency": 10, "to_concurrency": None, "config": FA3},
    ]
    result = await call(ctx, {"config": FA3, "policy": policy, "reason": "fastest"})
    assert not result.is_error, result.text
    text = (ctx.run.path / "recommendation.json").read_text()
    rec = Recommendation.model_validate_json(text)
    # written as the record dumps: parsed and dumped again, the same bytes
    assert json.dumps(rec.dump(), indent=2, ensure_ascii=False) + "\n" == text
    assert rec.dump() == result.data["recommendation"]
    raw = json.loads(text)
    assert list(raw) == KEYS  # no cost, pairs or drift here: those keys are not written at all
    assert list(raw["objective"])[:2] == ["kind", "level"] and "precision" in raw["objective"]
    assert list(raw["candidate"]) == ["config", "command", "policy", "crossover"]
    assert [list(p) for p in raw["policy"]] == [
        ["from_concurrency", "to_concurrency", "config", "command"]
    ] * 2
    assert rec.policy[1].to_concurrency is None and rec.candidate is not None
    assert rec.candidate.crossover == [10] and rec.gain is not None and rec.paired is None


async def test_a_gain_within_the_noise_keeps_the_baseline(ctx: ToolContext) -> None:
    close = {**BASE, "--cuda-graph-max-bs": 256}
    bench(ctx.run, "b005", close, {1: 91.5, 10: 366.0, 100: 527.0})  # +0.3 %: inside the floor
    result = await call(ctx, {"config": close})
    assert not result.is_error, result.text
    rec = json.loads((ctx.run.path / "recommendation.json").read_text())
    assert rec["verdict"] == "within noise" and 0 < rec["gain"] < rec["noise_floor"]
    assert rec["config"]["--cuda-graph-max-bs"] == 128  # deploy: the baseline
    assert rec["candidate"]["config"]["--cuda-graph-max-bs"] == 256  # what was asked
    assert result.text.startswith("Keep the baseline") and "within the noise floor" in result.text


async def test_without_a_repeat_nothing_is_a_win(tmp_path: Path) -> None:
    run = start("beat baseline", lab(), "autopilot", tmp_path, None, Limits())
    bench(run, "b001", BASE, {1: 90.0, 10: 360.0})
    bench(run, "b002", FA3, {1: 120.0, 10: 480.0})
    result = await call(ToolContext(run=run, config=lab()), {"config": FA3})
    rec = result.data["recommendation"]
    assert rec["noise_floor"] is None and rec["verdict"] == "noise floor unknown"
    assert rec["config"]["--attention-backend"] == "flashinfer"
    assert "sweep the baseline again (A/A)" in result.text


async def test_a_policy_the_numbers_contradict_gets_a_note(ctx: ToolContext) -> None:
    policy = [
        {"from_concurrency": 1, "to_concurrency": 10, "config": SPEC},
        {"from_concurrency": 100, "config": FA3},
    ]
    result = await call(ctx, {"config": FA3, "policy": policy})
    assert any("C=10" in n for n in result.data["recommendation"]["notes"])


@pytest.mark.parametrize(
    ("inp", "message"),
    [
        ({"config": {"--attention-backend": "triton"}}, "no benchmark of"),
        (
            {
                "config": FA3,
                "policy": [
                    {"from_concurrency": 1, "to_concurrency": 10, "config": SPEC},
                    {"from_concurrency": 5, "config": FA3},
                ],
            },
            "overlaps",
        ),
        (
            {
                "config": FA3,
                "policy": [
                    {
                        "from_concurrency": 1,
                        "to_concurrency": 2,
                        "config": {"--attention-backend": "triton"},
                    },
                    {"from_concurrency": 5, "config": FA3},
                ],
            },
            "policy range 1",
        ),
        ({"config": FA3, "objective": {"kind": "level", "level": 5}}, "C=5, which was not"),
        ({"config": FA3, "extra": 1}, "extra"),
    ],
)
async def test_mistakes_get_one_clear_line(
    ctx: ToolContext, inp: dict[str, Any], message: str
) -> None:
    result = await call(ctx, inp)
    assert result.is_error and message in result.text


async def test_objective_override_and_slo(ctx: ToolContext) -> None:
    result = await call(ctx, {"config": SPEC, "objective": {"kind": "level", "level": 1}})
    rec = result.data["recommendation"]
    assert rec["value"] == 120.0 and rec["baseline_value"] == 91.0
    config = ctx.config.model_copy(
        update={"objective": ObjectiveConfig(kind="slo", ttft_p99_ms=100)}
    )
    run = ctx.run
    bench(run, "b005", BASE, {1: 91.0, 10: 365.0, 100: 525.0})
    result = await call(ToolContext(run=run, config=config), {"config": BASE})
    assert not result.is_error, result.text
    rec = result.data["recommendation"]
    assert rec["value"] == pytest.approx(365.0)  # C=100 misses the SLO (p99 TTFT 400 ms)
    assert rec["verdict"] == "baseline"  # the baseline itself: nothing to beat


async def test_other_workloads_are_not_mixed(ctx: ToolContext) -> None:
    bench(
        ctx.run,
        "b006",
        FA3,
        {1: 50.0, 10: 190.0, 100: 270.0},
        workload={**WORKLOAD, "max_tokens": 512},
    )
    result = await call(ctx, {"config": FA3})
    assert result.is_error and "baseline on the same workload" in result.text
