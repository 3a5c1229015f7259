"""One formula per figure: one set of benchmark results (real result files and events in a run
folder) fed to compare, recommend, the report and the watch/final view - they must state the same
noise floor, the same geometric-mean ratio and the same winner (issue 11)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from agent.brains.autopilot.brain import reading_of_run
from agent.report import gather, write_report
from agent.session import Limits, start
from agent.view.console import PlainPrinter
from agent.view.watch import watch_view
from state.events import read_events
from state.run import Run
from tests.autopilot_world import lab
from tests.report_session import BASE, bench_in_run
from tools.base import ToolBox, ToolContext
from tools.compare import Compare
from tools.domain import stats
from tools.recommend import Recommend

CG256 = {**BASE, "--cuda-graph-max-bs": 256}
LEVELS = (1, 10, 100)


@pytest.fixture
def run(tmp_path: Path) -> Run:
    """The baseline twice (the A/A pair), a candidate twice (screen and re-validation)."""
    config = lab()
    config = config.model_copy(
        update={"bench": config.bench.model_copy(update={"concurrency": list(LEVELS)})}
    )
    run = start("beat baseline", config, "autopilot", tmp_path, None, Limits())
    bench_in_run(run, "b001-base", BASE, {1: 90.0, 10: 360.0, 100: 520.0})
    bench_in_run(run, "b002-base", BASE, {1: 92.0, 10: 366.0, 100: 531.0})
    bench_in_run(run, "b003-cg256", CG256, {1: 95.0, 10: 380.0, 100: 560.0})
    bench_in_run(run, "b004-cg256", CG256, {1: 96.0, 10: 377.0, 100: 566.0})
    return run


async def test_compare_recommend_report_and_view_state_the_same_figures(run: Run) -> None:
    ctx = ToolContext(run=run, config=lab())
    # compare: every result of both configurations, the baseline first
    ids = ["b001-base", "b002-base", "b003-cg256", "b004-cg256"]
    cmp, _ = await ToolBox([Compare()]).call(ctx, "compare", {"results": ids})
    assert not cmp.is_error, cmp.text
    compared_floor = cmp.data["noise_floor"]["b003-cg256"]
    compared_ratio = cmp.data["geomean_ratio"]["b003-cg256"]
    assert cmp.data["winner"] == "b003-cg256"

    # recommend
    rec_result, _ = await ToolBox([Recommend()]).call(ctx, "recommend", {"config": CG256})
    assert not rec_result.is_error, rec_result.text
    rec = json.loads((run.path / "recommendation.json").read_text())
    assert rec["verdict"] == "win" and rec["config"]["--cuda-graph-max-bs"] == 256
    # the A/A pair moved beyond the pooled floor (drift), but far less than the gain: it stands
    assert rec["drift"]["size"] < rec["geomean_ratio"] - 1

    # the report (as the run writes it at its end) and its figures
    run.append("run_finished", status="finished", exit_code=0, reason="done", session_minutes=1.0)
    write_report(run)
    md = (run.path / "report.md").read_text()
    figures = gather(run.path, read_events(run.events_path).events)
    assert figures.winner is not None and figures.versus is not None

    # the view: `agent watch` on the finished run, and `agent run`'s plain final lines
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    watch_view(run.events_path, console, once=True)
    watched = console.file.getvalue()  # type: ignore[attr-defined]
    plain = io.StringIO()
    printer = PlainPrinter(plain, run.path)
    printer(read_events(run.events_path).events[-1])

    # one noise floor ...
    floor = figures.floor
    expected = stats.objective_floor(
        [[{1: 90.0, 10: 360.0, 100: 520.0}, {1: 92.0, 10: 366.0, 100: 531.0}],
         [{1: 95.0, 10: 380.0, 100: 560.0}, {1: 96.0, 10: 377.0, 100: 566.0}]],
        LEVELS,
    )  # fmt: skip
    assert floor == pytest.approx(expected)
    assert compared_floor == pytest.approx(floor)
    assert rec["noise_floor"] == pytest.approx(floor, abs=1e-5)
    printed = stats.percent(floor)
    for text in (cmp.text, rec_result.text, md, watched, plain.getvalue()):
        assert f"noise floor {printed}" in text or f"**{printed}**" in text
    # ... one geometric-mean ratio ...
    ratio = figures.versus.ratio
    assert ratio == pytest.approx(
        stats.geomean_ratio({1: 95.5, 10: 378.5, 100: 563.0}, {1: 91.0, 10: 363.0, 100: 525.5})
    )
    assert compared_ratio == pytest.approx(ratio)
    assert rec["geomean_ratio"] == pytest.approx(ratio, abs=1e-5)
    for text in (md, watched, plain.getvalue()):
        assert f"{ratio:.3f}x" in text
    assert f"geomean ratio {ratio:.3f}" in rec_result.text
    assert f"{ratio:.3f} (noise floor {printed}: win)" in cmp.text
    # ... one winner
    assert figures.winner.name == "b004-cg256"  # the configuration's latest label
    assert figures.winner.runs[0].id == "b003-cg256"
    assert "**Deploy b004-cg256**" in md
    assert "winner b004-cg256" in watched and "winner b004-cg256" in plain.getvalue()
    # the autopilot: its History of the same run gives the same floor, ratio and best
    reading = reading_of_run(run.path)
    assert reading.floors[1] == pytest.approx(floor)
    autopilot_ratio, _ = reading.compare(CG256, BASE, LEVELS)
    assert autopilot_ratio == pytest.approx(ratio)
    assert reading.h.key(reading.incumbent) == reading.h.key(CG256)
    assert stats.beats(autopilot_ratio, reading.floors[1])
