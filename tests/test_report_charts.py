"""Every chart of the report from a run whose sweeps are cut into several results, as the autopilot
cuts them (C=1,2 / C=5,10 / C=30,70,100 / C=250): each configuration shows every level it
measured, in every chart, and has one colour across the charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.report import gather, render_files
from agent.report.chart import plot
from agent.report.figures import Figures
from agent.report.outcome import chart_curves, crossover_marks
from agent.report.pareto import latency_figure, pareto_figure, report_curves
from agent.session import Limits, start
from state.events import read_events
from tests.conftest import plain_config
from tests.report_session import bench_in_run

LEVELS = [1, 2, 5, 10, 30, 70, 100, 250]
GROUPS = [[1, 2], [5, 10], [30, 70, 100], [250]]  # the autopilot's groups of one sweep
BASE_TPUT = dict(zip(LEVELS, [90.0, 150.0, 270.0, 360.0, 470.0, 520.0, 540.0, 530.0], strict=True))
BASE: dict[str, Any] = {"--attention-backend": "flashinfer"}
FA3: dict[str, Any] = {"--attention-backend": "fa3"}
EAGLE: dict[str, Any] = {"--attention-backend": "fa3", "--speculative-algorithm": "EAGLE3"}


def split_sweep(run: Any, label: str, flags: dict[str, Any], scale: dict[int, float]) -> None:
    """One sweep over LEVELS as the autopilot measures it: a result per group of levels."""
    for i, group in enumerate(GROUPS):
        summary = {c: round(BASE_TPUT[c] * scale[c], 2) for c in group}
        bench_in_run(run, f"{label}-part{i}", flags, summary, label=label)


@pytest.fixture(scope="module")
def split_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Figures]:
    run = start("beat baseline", plain_config(), "autopilot", tmp_path_factory.mktemp("r"), None,
                Limits())  # fmt: skip
    split_sweep(run, "baseline-L01", BASE, dict.fromkeys(LEVELS, 1.0))
    split_sweep(run, "noise-L01", BASE, dict.fromkeys(LEVELS, 1.004))
    split_sweep(run, "validate-L02-fa3", FA3, dict.fromkeys(LEVELS, 1.1))
    split_sweep(run, "validate-L03-fa3-EAGLE3", EAGLE, {c: 1.3 if c == 1 else 0.7 for c in LEVELS})
    run.close()
    events = read_events(run.path / "events.jsonl").events
    f = gather(run.path, events)
    render_files(f, run.path)
    return run.path, f


def test_the_run_really_has_split_sweeps(split_run: tuple[Path, Figures]) -> None:
    _, f = split_run
    shown = [c for _, c, _ in chart_curves(f)]
    assert len(shown) == 3
    for c in shown:
        assert len(c.runs) >= len(GROUPS) and all(len(r.points) < len(LEVELS) for r in c.runs)
        assert c.levels == LEVELS


def test_the_throughput_chart_shows_every_level(split_run: tuple[Path, Figures]) -> None:
    _, f = split_run
    curves = chart_curves(f)
    lines = {str(ln.get_label()): ln for ln in plot(curves, crossover_marks(f), "t").axes[0].lines}
    for label, _, _ in curves:
        assert list(lines[label].get_xdata()) == LEVELS, label


def annotations(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_the_latency_chart_shows_every_level(split_run: tuple[Path, Figures]) -> None:
    _, f = split_run
    curves = report_curves(f)
    assert [cv.label for cv in curves] == [label for label, _, _ in chart_curves(f)]
    fig = latency_figure(curves)
    ttft, tpot = fig.axes[0], fig.axes[1]
    for ax in (ttft, tpot):
        lines = {str(ln.get_label()): ln for ln in ax.lines}
        for cv in curves:
            assert len(lines[cv.label].get_xdata()) == len(LEVELS), cv.label
        names = annotations(ax)
        for c in LEVELS:  # every level named once per configuration
            assert names.count(f"C={c}") == len(curves)
    # the TTFT of the baseline at C=250 is the mean of its two measurements (40 + C each)
    base = {str(ln.get_label()): ln for ln in ttft.lines}[curves[0].label]
    assert list(base.get_ydata()) == [40.0 + c for c in LEVELS]


def test_the_pareto_chart_shows_every_level(split_run: tuple[Path, Figures]) -> None:
    _, f = split_run
    curves = report_curves(f)
    ax = pareto_figure(curves).axes[0]
    dots = {str(col.get_label()).rsplit(" (", 1)[0]: col for col in ax.collections}
    for cv in curves:
        assert len(dots[cv.label].get_offsets()) == len(LEVELS), cv.label
    assert all(annotations(ax).count(f"C={c}") == len(curves) for c in LEVELS)


def test_a_configuration_has_one_colour_in_every_chart(split_run: tuple[Path, Figures]) -> None:
    from matplotlib.colors import to_hex

    _, f = split_run
    curves = chart_curves(f)
    throughput = {
        str(ln.get_label()): to_hex(ln.get_color())
        for ln in plot(curves, crossover_marks(f), "t").axes[0].lines
    }
    cvs = report_curves(f)
    latency = {
        str(ln.get_label()): to_hex(ln.get_color()) for ln in latency_figure(cvs).axes[0].lines
    }
    pareto = {
        str(col.get_label()).rsplit(" (", 1)[0]: to_hex(col.get_facecolor()[0])
        for col in pareto_figure(cvs).axes[0].collections
    }
    for label, _, _ in curves:
        assert throughput[label] == latency[label] == pareto[label], label
    assert len(set(throughput.values())) == len(curves)  # and no two share one


def test_the_rendered_report_carries_the_three_charts(split_run: tuple[Path, Figures]) -> None:
    folder, _ = split_run
    md = (folder / "report.md").read_text()
    for name in ("report-throughput.png", "report-latency.png", "report-pareto.png"):
        assert f"]({name})" in md and (folder / name).stat().st_size > 10_000
