"""The report's server metrics over time (agent/report/over_time.py) from a run whose sweeps are
cut into several results, as the autopilot cuts them: the baseline and the winner each show every
level they sampled, in order, in their colours of the other charts, with the acceptance length
only where a configuration speculated; and a run whose levels carry no series has no section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from matplotlib.colors import to_hex

from agent.report import gather, render_files
from agent.report.chart import colours
from agent.report.figures import Figures
from agent.report.outcome import chart_curves
from agent.report.over_time import OVER_TIME_FILE, chosen, figure, section
from agent.session import Limits, start
from state.events import read_events
from tests.conftest import plain_config
from tests.report_session import bench_in_run

LEVELS = [1, 2, 5, 10, 30, 70, 100, 250]
GROUPS = [[1, 2], [5, 10], [30, 70, 100], [250]]
TPUT = dict(zip(LEVELS, [90.0, 150.0, 270.0, 360.0, 470.0, 520.0, 540.0, 530.0], strict=True))
SLOTS = 64  # the server runs at most this many: the rest wait
SAMPLES = 4
BOUNDARY = "#999999"  # the levels' boundaries


def series(c: int, accept: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "source": "sglang",
        "every_s": 0.5,
        "t": [0.5 * i for i in range(SAMPLES)],
        "running": [float(min(c, SLOTS))] * SAMPLES,
        "waiting": [float(max(0, c - SLOTS))] * SAMPLES,
        "kv_cache": [min(1.0, c / 100)] * SAMPLES,
    }
    if accept is not None:
        out["spec_acceptance"] = [accept] * SAMPLES
    return out


def split_sweep(run: Any, label: str, flags: dict[str, Any], scale: float, **kw: Any) -> None:
    for i, group in enumerate(GROUPS):
        summary = {c: TPUT[c] * scale for c in group}
        extra = {c: {"server_metrics": series(c, **kw)} for c in group} if kw else None
        bench_in_run(run, f"{label}-part{i}", flags, summary, label=label, extra=extra)


def make_run(tmp: Path, sampled: bool) -> tuple[Path, Figures]:
    run = start("beat baseline", plain_config(), "autopilot", tmp, None, Limits())
    base, eagle = {"--attention-backend": "fa3"}, {"--speculative-algorithm": "EAGLE3"}
    kw: dict[str, Any] = {"accept": None} if sampled else {}
    split_sweep(run, "baseline-L01", base, 1.0, **kw)
    split_sweep(run, "noise-L01", base, 1.004, **kw)
    kw = {"accept": 2.6} if sampled else {}
    split_sweep(run, "validate-L02-EAGLE3", {**base, **eagle}, 1.3, **kw)
    run.close()
    f = gather(run.path, read_events(run.path / "events.jsonl").events)
    render_files(f, run.path)
    return run.path, f


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Figures]:
    return make_run(tmp_path_factory.mktemp("sampled"), sampled=True)


def drawn(ax: Any) -> list[Any]:
    """The data lines of a panel (not the dotted level boundaries)."""
    return [ln for ln in ax.lines if to_hex(ln.get_color()) != BOUNDARY]


def test_the_baseline_and_the_winner_show_every_level_in_order(
    sampled: tuple[Path, Figures],
) -> None:
    _, f = sampled
    rows = chosen(f)
    assert [c for _, c, _, _ in rows] == [f.baseline, f.winner] and f.winner is not f.baseline
    curves = chart_curves(f)
    roles = colours([r for *_, r in curves])
    throughput_colours = dict(zip([lb for lb, *_ in curves], roles, strict=True))
    fig = figure(rows)
    assert len(fig.axes) == 2 * 3  # requests, KV cache, acceptance: one row each
    for i, (label, _, colour, levels) in enumerate(rows):
        assert [lv.name for lv in levels] == [f"C={c}" for c in LEVELS]
        assert colour == throughput_colours[label]  # its colour in the other charts
        requests, kv, accept = fig.axes[3 * i : 3 * i + 3]
        running = [ln for ln in drawn(requests) if ln.get_linestyle() == "-"]  # one per level
        assert len(running) == len(LEVELS)
        xs = [x for ln in running for x in ln.get_xdata()]
        assert len(xs) == SAMPLES * len(LEVELS) and xs == sorted(xs)  # one after the other
        assert list(running[-1].get_ydata()) == [SLOTS] * SAMPLES  # C=250 runs 64, 186 wait
        assert [t.get_text() for t in requests.texts] == [f"C={c}" for c in LEVELS]
        assert {to_hex(ln.get_color()) for ln in running} == {colour}
        assert max(drawn(kv)[-1].get_ydata()) == 100  # a fraction drawn as a percentage
        assert bool(drawn(accept)) == (f.winner is rows[i][1])  # only EAGLE accepted drafts


def test_the_report_has_the_chart_and_a_row_per_level(sampled: tuple[Path, Figures]) -> None:
    folder, _ = sampled
    md = (folder / "report.md").read_text()
    assert "## Server metrics over time" in md and f"]({OVER_TIME_FILE})" in md
    assert (folder / OVER_TIME_FILE).stat().st_size > 10_000
    assert OVER_TIME_FILE not in (folder / "report.html").read_text()  # embedded, not linked
    rows = [line for line in md.splitlines() if line.startswith("| ") and "C=" in line]
    at_250 = [r for r in rows if "| C=250 |" in r]
    assert len(at_250) == 2 and all("| 186 |" in r and "| 100 %" in r for r in at_250)
    assert sum("| 2.60 |" in r for r in rows) == len(LEVELS)  # the winner's acceptance length


def test_no_series_no_section(tmp_path: Path) -> None:
    folder, f = make_run(tmp_path, sampled=False)
    assert section(f) == []
    assert "Server metrics over time" not in (folder / "report.md").read_text()
