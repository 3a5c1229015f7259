"""The report in a reader's words: human labels for the autopilot's results, where the gain is,
one ranking (swept configurations before screened ones), screened ones drawn as points, and an
HTML page that does not break a flag or a percentage across lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.report import gather, render_files
from agent.report.chart import plot
from agent.report.measured import human_label
from agent.report.outcome import CHART_FILE, chart_curves, crossover_marks
from agent.session import Limits, start
from state.events import read_events
from state.run import Run
from tests.conftest import plain_config
from tests.report_session import bench_in_run

LEVELS = [1, 2, 5, 10, 30, 70, 100, 250]
BASE_TPUT = [90.0, 150.0, 270.0, 360.0, 470.0, 520.0, 540.0, 530.0]
FA3 = {"--attention-backend": "fa3"}


def sweep(scale: dict[int, float] | float = 1.0, levels: list[int] = LEVELS) -> dict[int, float]:
    out = dict(zip(LEVELS, BASE_TPUT, strict=True))
    return {c: round(out[c] * (scale if isinstance(scale, float) else scale[c]), 2) for c in levels}


def autopilot_run(run: Run) -> None:
    """Results labelled as the autopilot labels them: the baseline and its A/A repeat, a full
    sweep that wins at C <= 10 only, and a screen at three levels with a higher ratio."""
    base: dict[str, Any] = {"--attention-backend": "flashinfer"}
    bench_in_run(run, "baseline-L01", base, sweep())
    bench_in_run(run, "noise-L01", base, sweep(1.004))
    low = {c: 1.15 if c <= 10 else 0.99 for c in LEVELS}
    bench_in_run(run, "validate-L02-fa3", FA3, sweep(low))
    bench_in_run(
        run, "screen-L03-triton", {"--attention-backend": "triton"}, sweep(1.2, [1, 10, 250])
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    run = start("beat baseline", plain_config(), "autopilot", tmp_path_factory.mktemp("r"), None,
                Limits())  # fmt: skip
    autopilot_run(run)
    render_files(gather(run.path, read_events(run.events_path).events), run.path)
    run.close()
    return run.path, (run.path / "report.md").read_text()


def test_autopilot_labels_read_as_words() -> None:
    assert human_label("noise-L01") == "baseline repeat"
    assert human_label("baseline-L01") == "baseline"
    assert human_label("validate-L14-fa3") == "candidate: fa3"
    assert human_label("screen-L04-fa3-64") == "screened: fa3-64"
    assert human_label("challenger-L11-fa3-EAGLE3-3-1-4") == "challenger: fa3-EAGLE3-3-1-4"
    assert human_label("my own label") == "my own label"  # Claude's or a person's: as written


def test_the_conclusion_says_where_the_gain_is(report: tuple[Path, str]) -> None:
    _, md = report
    conclusion = md[md.index("## Conclusion") : md.index("## Throughput")]
    assert "**Deploy candidate: fa3** (--attention-backend fa3)" in conclusion
    assert (
        "**Where the gain is:** all of the gain is at C <= 10 (1.15x the baseline); "
        "at C >= 30 it is 0.99x the baseline." in conclusion
    )


def test_configurations_are_ranked_swept_before_screened(report: tuple[Path, str]) -> None:
    _, md = report
    table = md[md.index("## All configurations measured") : md.index("## Ablation")]
    names = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")]
    assert names[2:] == [
        "candidate: fa3 (winner) `validate-L02-fa3`",
        "baseline `noise-L01`",
        "screened: triton `screen-L03-triton`",  # 1.2x over three levels: after the sweeps
    ]


def test_screened_configurations_are_points_not_lines(make_run: Any) -> None:
    run, _ = make_run()
    autopilot_run(run)
    f = gather(run.path, read_events(run.events_path).events)
    curves = chart_curves(f)
    roles = {label.split(" (")[0]: role for label, _, role in curves}
    assert roles["screened: triton"] == "screened"
    lines = {
        str(line.get_label()): line for line in plot(curves, crossover_marks(f), "t").axes[0].lines
    }
    screened = next(v for k, v in lines.items() if k.startswith("screened: triton"))
    assert screened.get_linestyle() == "None" and screened.get_marker() == "D"
    swept = next(v for k, v in lines.items() if k.startswith("winner: candidate: fa3"))
    assert swept.get_linestyle() == "-"
    assert (run.path / CHART_FILE).exists() is False  # plot() draws, writes nothing


def test_html_keeps_flags_and_percentages_whole(report: tuple[Path, str]) -> None:
    folder, md = report
    html = (folder / "report.html").read_text()
    assert '<span class="nw">--attention-backend fa3</span>' in html
    assert "(+" in html and "\u00a0%)" in html and " %)" not in html
    assert '<span class="nw">C &lt;= 10</span>' in html
    assert ".nw { white-space: nowrap; }" in html
    cost = md[md.index("## Cost") :]
    assert "| what | how much |" in cost and "|  |  |" not in cost


def test_a_configuration_is_named_by_what_it_is_not_by_its_pairs(make_run: Any) -> None:
    """The winner launched again in pairs with the baseline keeps its name: "paired" says why a
    launch was made (the baseline has pairs too), not which configuration it is."""
    run, _ = make_run()
    base: dict[str, Any] = {"--attention-backend": "flashinfer"}
    bench_in_run(run, "baseline-L01", base, sweep())
    bench_in_run(run, "validate-L02-fa3", FA3, sweep(1.1))
    bench_in_run(run, "pair-L03", base, sweep(1.01))
    bench_in_run(run, "pair-L04-fa3", FA3, sweep(1.12))
    names = {c.name for c in gather(run.path, read_events(run.events_path).events).measured}
    assert names == {"baseline", "candidate: fa3"}


def test_a_legend_names_every_flag_whole(make_run: Any) -> None:
    """Two configurations that differ only in their last flags read differently in the chart's
    legend: long flag lists wrap after a flag, never cut."""
    run, _ = make_run()
    base: dict[str, Any] = {"--attention-backend": "flashinfer"}
    bench_in_run(run, "baseline-L01", base, sweep())
    many = {**FA3, "--speculative-algorithm": "EAGLE3", "--speculative-num-draft-tokens": 8}
    bench_in_run(run, "validate-L02-x", {**many, "--speculative-num-steps": 3}, sweep(1.2))
    bench_in_run(run, "validate-L03-y", {**many, "--speculative-num-steps": 1}, sweep(1.1))
    labels = [
        label for label, _, _ in chart_curves(gather(run.path, read_events(run.events_path).events))
    ]
    for steps in (3, 1):
        label = next(x for x in labels if f"--speculative-num-steps {steps})" in x)
        assert "--speculative-num-draft-tokens 8," in label and "…" not in label
        assert all(len(line) <= 72 for line in label.splitlines()[1:])
