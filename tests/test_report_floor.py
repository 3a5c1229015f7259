"""The share of the bandwidth floor in the report's per-level table (agent/report/outcome.py),
beside tok/s: each level's point's `floor_share` (tools/bench/floor.py), the mean over the
sweeps that carry it, the box it was computed for in the words under the table, and no column
where no level has one (an unknown device)."""

from __future__ import annotations

from pathlib import Path

from agent.report import gather, render_files
from agent.session import Limits, start
from state.events import read_events
from tests.conftest import plain_config
from tests.report_session import bench_in_run
from tests.test_report_energy import level_rows

BOX = "floor: 8 x H100 NVL at 3900 GB/s each (the simulator's box); weights 520 GB"


def make_run(tmp: Path, floors: bool) -> tuple[str, Path]:
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
    assert "of floor: the level's output tok/s over its memory-bandwidth floor" in md
    assert "Computed for 8 x H100 NVL at 3900 GB/s" in md
    assert "<th>of floor</th>" in (folder / "report.html").read_text().replace(' class="r"', "")


def test_no_column_where_the_box_is_not_known(tmp_path: Path) -> None:
    md, _ = make_run(tmp_path, floors=False)
    header, *_ = level_rows(md)
    assert "of floor" not in header and "memory-bandwidth floor" not in md
