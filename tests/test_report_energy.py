"""Joules per output token in the report's per-level table (agent/report/outcome.py), beside
tok/s: the figure each level's point carries (tools/bench/energy.py), "-" with the reason where
the host reported no power, and no column at all where no level has a figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.report import gather, render_files
from agent.session import Limits, start
from state.events import read_events
from tests.conftest import plain_config
from tests.report_session import bench_in_run
from tools.bench.energy import no_power_note

LEVELS = [1, 10]
NONE_HERE = no_power_note("host gpu reports none (GPU 0 reports power.draw [N/A])")


def make_run(tmp: Path, winner_energy: bool, base_energy: bool) -> tuple[str, Path]:
    run = start("beat baseline", plain_config(), "autopilot", tmp, None, Limits())
    base, fa3 = {"--attention-backend": "flashinfer"}, {"--attention-backend": "fa3"}

    def sweep(label: str, flags: dict[str, Any], tput: dict[int, float], has: bool) -> None:
        extra = {c: {"j_per_token": 1000.0 / v, "power_w": 1000.0} for c, v in tput.items()}
        notes = [] if has else [NONE_HERE]
        bench_in_run(run, label, flags, tput, extra=extra if has else None, notes=notes)

    sweep("baseline-L01", base, {1: 90.0, 10: 400.0}, base_energy)
    sweep("noise-L01", base, {1: 90.5, 10: 401.0}, base_energy)
    sweep("validate-L02-fa3", fa3, {1: 110.0, 10: 500.0}, winner_energy)
    run.close()
    f = gather(run.path, read_events(run.path / "events.jsonl").events)
    render_files(f, run.path)
    return (run.path / "report.md").read_text(), run.path


def level_rows(md: str) -> list[list[str]]:
    table = md.split("## Throughput by concurrency", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("| ").split(" | ") for line in table.splitlines() if line.startswith("| ")]
    return rows


def test_joules_per_token_beside_tok_s(tmp_path: Path) -> None:
    md, folder = make_run(tmp_path, winner_energy=True, base_energy=True)
    header, *rows = level_rows(md)
    assert header[:4] == ["C", "configuration", "tok/s", "J/token"]
    cells = {(r[0], r[1].strip("*")): r[3] for r in rows if r[0].isdigit()}
    assert cells[("1", "candidate: fa3")] == f"{1000 / 110:.3g}"  # the point's figure
    assert cells[("10", "baseline")] == f"{(1000 / 400 + 1000 / 401) / 2:.3g}"  # its sweeps' mean
    assert "J/token: joules per output token" in md and "reported no power" not in md
    assert "<th>J/token</th>" in (folder / "report.html").read_text().replace(' class="r"', "")


def test_a_host_without_power_shows_the_reason(tmp_path: Path) -> None:
    md, _ = make_run(tmp_path, winner_energy=True, base_energy=False)
    header, *rows = level_rows(md)
    assert header[3] == "J/token"
    baseline = [r for r in rows if r[1].strip("*") == "baseline"]
    assert baseline and all(r[3] == "-" for r in baseline)
    why = "host gpu reports none (GPU 0 reports power.draw [N/A])"
    assert f"where the host reported no power: {why}." in md


def test_no_figure_anywhere_is_said_and_no_column(tmp_path: Path) -> None:
    md, _ = make_run(tmp_path, winner_energy=False, base_energy=False)
    header, *_ = level_rows(md)
    assert "J/token" not in header
    assert "No joules per output token: host gpu reports none (GPU 0 reports" in md
