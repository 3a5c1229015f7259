"""The share of the bandwidth floor in the report's per-level table (agent/report/outcome.py),
beside tok/s: each level's point's `floor_share` (tools/bench/floor.py), the mean over the
sweeps that carry it, the box it was computed for in the words under the table, and no column
where no level has one (an unknown device)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agent.report import gather, render_files
from agent.report.chart import plot
from agent.report.outcome import chart_curves
from agent.session import Limits, start
from state.events import read_events
from tests.conftest import plain_config
from tests.report_session import bench_in_run
from tests.test_report_energy import level_rows
from tools.base import ToolBox, ToolContext
from tools.recommend import Recommend

BOX = "floor: 8 x H100 NVL at 3900 GB/s each (the simulator's box); weights 520 GB"


def make_run(tmp: Path, floors: bool, recommend: bool = False) -> tuple[str, Path]:
    run = start("beat baseline", plain_config(), "autopilot", tmp, None, Limits())
    base, fa3 = {"--attention-backend": "flashinfer"}, {"--attention-backend": "fa3"}
    floor = {1: 900.0, 10: 3900.0}

    def sweep(label: str, flags: dict[str, str], tput: dict[int, float]) -> None:
        extra = {c: {"floor_tok_s": floor[c], "floor_share": v / floor[c]} for c, v in tput.items()}
        bench_in_run(
            run, label, flags, tput, extra=extra if floors else None, notes=[BOX] if floors else []
        )

    sweep("baseline-L01", base, {1: 90.0, 10: 400.0})
    sweep("noise-L01", base, {1: 92.0, 10: 402.0})
    sweep("validate-L02-fa3", fa3, {1: 110.0, 10: 500.0})
    if recommend:
        ctx = ToolContext(run=run, config=plain_config())
        result, _ = asyncio.run(ToolBox([Recommend()]).call(ctx, "recommend", {"config": fa3}))
        assert not result.is_error, result.text
        (run.path / "recommend.txt").write_text(result.text)
    run.close()
    f = gather(run.path, read_events(run.path / "events.jsonl").events)
    render_files(f, run.path)
    return (run.path / "report.md").read_text(), run.path


def test_the_share_of_the_floor_beside_tok_s(tmp_path: Path) -> None:
    md, folder = make_run(tmp_path, floors=True)
    header, *rows = level_rows(md)
    assert header[:4] == ["C", "configuration", "tok/s", "of floor"]
    cells = {(r[0], r[1].strip("*")): r[3] for r in rows if r[0].isdigit()}
    assert cells[("1", "candidate: fa3")] == "12%"  # 110 of 900
    assert cells[("1", "baseline")] == f"{(90 / 900 + 92 / 900) / 2:.0%}"  # its sweeps' mean
    assert cells[("10", "candidate: fa3")] == "13%"
    assert "of floor: the level's output tok/s over its floor" in md
    assert "Computed for 8 x H100 NVL at 3900 GB/s" in md
    assert "<th>of floor</th>" in (folder / "report.html").read_text().replace(' class="r"', "")


def test_no_column_where_the_box_is_not_known(tmp_path: Path) -> None:
    md, _ = make_run(tmp_path, floors=False)
    header, *_ = level_rows(md)
    assert "of floor" not in header and "memory-bandwidth floor" not in md
    assert "Headroom against physics" not in md


def test_recommendation_json_has_each_level_s_share_of_the_floor(tmp_path: Path) -> None:
    """The deployed configuration's and the baseline's, as the report has them; and the line
    the recommend tool gives the model."""
    _, folder = make_run(tmp_path, floors=True, recommend=True)
    rec = json.loads((folder / "recommendation.json").read_text())
    assert rec["verdict"] == "win"
    assert rec["floor_share"] == {"1": round(110 / 900, 4), "10": round(500 / 3900, 4)}
    assert rec["baseline_floor_share"]["1"] == round((90 / 900 + 92 / 900) / 2, 4)
    assert "of the bandwidth floor: C=1 12%, C=10 13%" in (folder / "recommend.txt").read_text()
    _, bare = make_run(tmp_path / "bare", floors=False, recommend=True)
    assert "floor_share" not in json.loads((bare / "recommendation.json").read_text())


def test_the_chart_writes_the_winner_s_share_at_its_points(tmp_path: Path) -> None:
    for floors, want in ((True, ["12%\nof floor", "13%"]), (False, [])):
        run = start(
            "beat baseline", plain_config(), "autopilot", tmp_path / str(floors), None, Limits()
        )
        extra = {1: {"floor_tok_s": 900.0, "floor_share": 110 / 900}}
        extra[10] = {"floor_tok_s": 3900.0, "floor_share": 500 / 3900}
        base = {"--attention-backend": "flashinfer"}
        bench_in_run(run, "baseline-L01", base, {1: 90.0, 10: 400.0})
        bench_in_run(run, "noise-L01", base, {1: 91.0, 10: 401.0})
        fa3 = {"--attention-backend": "fa3"}
        bench_in_run(
            run, "validate-L02-fa3", fa3, {1: 110.0, 10: 500.0}, extra=extra if floors else None
        )
        run.close()
        f = gather(run.path, read_events(run.path / "events.jsonl").events)
        texts = [t.get_text() for t in plot(chart_curves(f), [], "t").axes[0].texts]
        assert [t for t in texts if "%" in t] == want
