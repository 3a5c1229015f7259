"""[cost]: $ per million output tokens, one formula (tools/domain/cost.py), in the report for every
configuration at every level it served, on a Pareto chart of its own, in recommendation.json for
the configuration deployed - and, without a price, one line that says how to get them. The model
API's own cost of the campaign stands beside it, named apart."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent.report import gather, render_files
from agent.report.pareto import COST_FILE, cost_figure, report_curves
from agent.session import Limits, start
from state.events import read_events
from tests.conftest import plain_config
from tests.report_session import bench_in_run
from tests.test_report import rows, section
from tests.test_report_charts import BASE, EAGLE, FA3, LEVELS, split_sweep
from tools.base import ToolBox, ToolContext
from tools.domain.config import ConfigError, load_config
from tools.domain.cost import HINT, CostConfig, usd_per_mtok
from tools.recommend import Recommend

# every result of tests/report_session.py's command asks for --tp 8
GPUS = 8


def test_the_formula_by_hand() -> None:
    per_gpu = CostConfig(usd_per_gpu_hour=2.0)
    # 8 GPUs x $2 = $16 an hour; 90 tok/s is 324,000 tokens an hour: $16 / 0.324 Mtok
    assert usd_per_mtok(per_gpu, 8, 90.0) == pytest.approx(49.382716, rel=1e-6)
    assert usd_per_mtok(per_gpu, 1, 1000.0) == pytest.approx(0.555556, rel=1e-5)
    box = CostConfig(usd_per_box_hour=20.0)  # the box's price, however many GPUs it uses
    assert usd_per_mtok(box, 8, 500.0) == usd_per_mtok(box, 1, 500.0) == pytest.approx(11.111111)
    assert usd_per_mtok(per_gpu, 8, 0.0) is None  # nothing served: no figure, not infinity


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("usd_per_gpu_hour = -2.5", "cost.usd_per_gpu_hour: Input should be greater than 0"),
        ("usd_per_gpu_hour = 0", "cost.usd_per_gpu_hour: Input should be greater than 0"),
        ('usd_per_box_hour = "cheap"', "cost.usd_per_box_hour: Input should be a valid number"),
        ("usd_per_box_hour = true", "cost.usd_per_box_hour: Input should be a valid number"),
        ("usd_per_gpu_hour = inf", "cost.usd_per_gpu_hour: Input should be a finite number"),
        ("usd_per_gpu_hr = 2.5", "unknown key 'cost.usd_per_gpu_hr' (did you mean"),
        ("usd_per_gpu_hour = 2.5\nusd_per_box_hour = 20", "exactly one of usd_per_gpu_hour"),
        ("", "set exactly one of usd_per_gpu_hour and usd_per_box_hour"),
    ],
)
def test_a_bad_cost_table_is_one_line_naming_the_key(
    tmp_path: Path, table: str, message: str
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(f"[cost]\n{table}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_cost_table_loads_and_survives_the_resolved_copy(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text("[cost]\nusd_per_box_hour = 31.5\n")
    config = load_config(path)
    assert config.cost == CostConfig(usd_per_box_hour=31.5)
    run = start("beat baseline", config, "autopilot", tmp_path / "runs", None, Limits())
    run.close()
    assert load_config(run.path / "config.toml").cost == config.cost  # what resume reads
    assert load_config(None).cost is None  # the lab has no price


def campaign(folder: Path, cost: CostConfig | None) -> tuple[Path, dict[str, Any]]:
    """A real run folder: the split sweeps of tests/test_report_charts.py, a configuration only
    screened at two levels, the recommend tool's recommendation.json, then the report."""
    config = plain_config(cost=cost)
    run = start("beat baseline", config, "autopilot", folder, None, Limits())
    split_sweep(run, "baseline-L01", BASE, dict.fromkeys(LEVELS, 1.0))
    split_sweep(run, "noise-L01", BASE, dict.fromkeys(LEVELS, 1.004))
    split_sweep(run, "validate-L02-fa3", FA3, dict.fromkeys(LEVELS, 1.1))
    split_sweep(run, "validate-L03-fa3-EAGLE3", EAGLE, {c: 1.3 if c == 1 else 0.7 for c in LEVELS})
    triton = {"--attention-backend": "triton"}
    bench_in_run(run, "screen-L04-triton", triton, {1: 80.0, 2: 140.0}, label="screen-L04-triton")
    tool = ToolBox([Recommend()]).call(
        ToolContext(run=run, config=config), "recommend", {"config": FA3}
    )
    result, _ = asyncio.run(tool)
    assert not result.is_error, result.text
    run.close()
    render_files(gather(run.path, read_events(run.path / "events.jsonl").events), run.path)
    return run.path, json.loads((run.path / "recommendation.json").read_text())


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    path, rec = campaign(tmp_path_factory.mktemp("priced"), CostConfig(usd_per_gpu_hour=2.0))
    return path, rec, (path / "report.md").read_text()


def dollars(cell: str) -> float:
    return float(cell.strip("*").removeprefix("$").replace(",", ""))


def test_the_report_prices_every_configuration_at_every_level(
    priced: tuple[Path, dict[str, Any], str],
) -> None:
    folder, _, md = priced
    f = gather(folder, read_events(folder / "events.jsonl").events)
    cost = section(md, "## Cost")
    assert "$2.00 per GPU-hour" in cost
    header = rows(cost, "configuration")[0]
    assert header[:2] == ["configuration", "GPUs"] and header[2:] == [f"C={c}" for c in LEVELS]
    assert {c.name for c in f.measured} == {"baseline", "candidate: fa3", "candidate: fa3-EAGLE3",
                                           "screened: triton"}  # fmt: skip
    for c in f.measured:
        row = next(r for r in rows(cost, c.name) + rows(cost, c.name + " (winner)"))
        assert row[1] == str(GPUS)
        for level, cell in zip(LEVELS, row[2:], strict=True):
            if level not in c.levels:
                assert cell == "-", (c.name, level)
                continue
            hand = 2.0 * GPUS / (c.sweep[level] * 3600) * 1e6
            assert dollars(cell) == pytest.approx(hand, rel=5e-3), (c.name, level)
    # the model API's own cost of the campaign, beside it and named apart
    assert rows(cost, "model API cost (the campaign's brain)")[0][1] == "$0.00"
    assert rows(cost, "serving cost")[0][1].startswith("$2.00 per GPU-hour")
    assert HINT not in md


def test_the_cheapest_at_each_level_is_in_bold(priced: tuple[Path, dict[str, Any], str]) -> None:
    _, _, md = priced
    cost = section(md, "## Cost")
    names = ["baseline", "candidate: fa3 (winner)", "candidate: fa3-EAGLE3", "screened: triton"]
    table = {n: rows(cost, n)[0] for n in names}
    for i, level in enumerate(LEVELS, start=2):
        bold = [n for n in names if table[n][i].startswith("**")]
        # EAGLE-3 serves 1.3x the baseline's tokens at one stream, fa3 1.1x everywhere, all on
        # as many GPUs: the cheapest is the one that serves most
        assert bold == (["candidate: fa3-EAGLE3"] if level == 1 else ["candidate: fa3 (winner)"])
        cells = [dollars(table[n][i]) for n in names if table[n][i] != "-"]
        assert dollars(table[bold[0]][i]) == min(cells)


def test_recommendation_json_has_the_winners_cost_as_the_report_has_it(
    priced: tuple[Path, dict[str, Any], str],
) -> None:
    _, rec, md = priced
    assert rec["verdict"] == "win"
    assert rec["usd_per_hour"] == 2.0 * GPUS
    assert list(rec["usd_per_mtok"]) == [str(c) for c in LEVELS]
    row = rows(section(md, "## Cost"), "candidate: fa3 (winner)")[0]
    for level, cell in zip(LEVELS, row[2:], strict=True):
        assert rec["usd_per_mtok"][str(level)] == pytest.approx(dollars(cell), rel=5e-3)
        hand = 2.0 * GPUS / (rec["per_level"][str(level)] * 3600) * 1e6
        assert rec["usd_per_mtok"][str(level)] == pytest.approx(hand, rel=1e-3)


def test_the_cost_pareto_chart_has_every_level(priced: tuple[Path, dict[str, Any], str]) -> None:
    folder, _, md = priced
    f = gather(folder, read_events(folder / "events.jsonl").events)
    assert f"]({COST_FILE})" in md and (folder / COST_FILE).stat().st_size > 10_000
    assert f.price is not None
    curves = report_curves(f)
    ax = cost_figure(curves, f.price).axes[0]
    dots = {str(col.get_label()).rsplit(" (", 1)[0]: col for col in ax.collections}
    for cv in curves:
        ys = sorted(float(y) for _, y in dots[cv.label].get_offsets())
        want = sorted(2.0 * GPUS / (p["output_throughput"] * 3600) * 1e6 for p in cv.points)
        assert len(ys) == len(LEVELS) and ys == pytest.approx(want), cv.label
    assert ax.get_ylabel() == r"\$ per million output tokens (\$2.00 per GPU-hour)"  # no mathtext
    assert any(str(ln.get_label()) == "Pareto front" for ln in ax.lines)


def test_without_a_price_one_line_says_how_to_get_one(tmp_path: Path) -> None:
    folder, rec = campaign(tmp_path, None)
    md = (folder / "report.md").read_text()
    cost = section(md, "## Cost")
    assert rows(cost, "serving cost")[0][1] == f"not priced: {HINT}"
    assert md.count(HINT) == 1 and "per GPU-hour" not in md
    assert not rows(cost, "configuration") and not (folder / COST_FILE).exists()
    assert "usd_per_mtok" not in rec and "usd_per_hour" not in rec
    assert rows(cost, "model API cost (the campaign's brain)")[0][1] == "$0.00"


async def test_each_policy_range_is_priced_over_its_levels(tmp_path: Path) -> None:
    from tests.autopilot_world import lab
    from tests.test_recommend import BASE as FLASHINFER
    from tests.test_recommend import FA3 as FA3_256
    from tests.test_recommend import SPEC, bench

    config = lab().model_copy(update={"cost": CostConfig(usd_per_box_hour=36.0)})
    run = start("beat baseline", config, "autopilot", tmp_path, None, Limits())
    bench(run, "b001", FLASHINFER, {1: 90.0, 10: 360.0, 100: 520.0})
    bench(run, "b002", FLASHINFER, {1: 92.0, 10: 370.0, 100: 530.0})
    bench(run, "b003", FA3_256, {1: 100.0, 10: 380.0, 100: 540.0})
    bench(run, "b004", SPEC, {1: 120.0, 10: 300.0, 100: 280.0})
    policy = [
        {"from_concurrency": 1, "to_concurrency": 1, "config": SPEC},
        {"from_concurrency": 10, "to_concurrency": None, "config": FA3_256},
    ]
    box = ToolBox([Recommend()])
    ctx = ToolContext(run=run, config=config)
    result, _ = await box.call(ctx, "recommend", {"config": FA3_256, "policy": policy})
    rec = result.data["recommendation"]
    # $36 an hour for the box (no parallelism flag: one GPU, which a box price ignores anyway)
    assert rec["verdict"] == "win" and rec["usd_per_hour"] == 36.0
    assert rec["usd_per_mtok"] == pytest.approx({"1": 100.0, "10": 26.3158, "100": 18.5185})
    assert rec["policy"][0]["usd_per_mtok"] == pytest.approx({"1": 83.3333})  # 120 tok/s
    assert rec["policy"][1]["usd_per_mtok"] == pytest.approx({"10": 26.3158, "100": 18.5185})
    # a gain within the noise keeps the baseline: the cost is the baseline's (mean 91 tok/s at 1)
    close = {**FLASHINFER, "--cuda-graph-max-bs": 256}
    bench(run, "b005", close, {1: 91.5, 10: 366.0, 100: 527.0})
    result, _ = await box.call(ctx, "recommend", {"config": close})
    rec = result.data["recommendation"]
    assert rec["verdict"] == "within noise"
    assert rec["usd_per_mtok"]["1"] == pytest.approx(36.0 / (91.0 * 3600) * 1e6, abs=1e-4)
    run.close()
