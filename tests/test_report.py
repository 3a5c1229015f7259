"""The report of a recorded session: report.md, report.html with the chart embedded, every
section, from the result files or - for a session replayed elsewhere - from the events alone."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from agent.cli.report import main
from agent.report import gather, write_report
from agent.report.chart import crossing_points
from state.events import read_events
from state.run import Run
from tests.report_session import write_session
from tools.bench.schema import Recommendation
from tools.domain import stats

SECTIONS = [
    "## Conclusion",
    "## Throughput by concurrency",
    "## All configurations measured",
    "## Ablation",
    "## Failed and crashed configurations",
    "## Noise floor",
    "## Setup",
    "## Reproduce",
    "## Cost",
    "## Caveats",
]
PNG = b"\x89PNG\r\n\x1a\n"


def section(md: str, title: str) -> str:
    start = md.index(title)
    end = md.find("\n## ", start + 1)
    return md[start : end if end > 0 else len(md)]


def rows(md: str, first_cell: str, title: str | None = None) -> list[list[str]]:
    out = []
    for line in (section(md, title) if title else md).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            out.append(cells)
    return out


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = write_session(tmp_path_factory.mktemp("runs") / "campaign")
    assert main([str(folder)]) == 0
    return folder


def test_every_section_in_order_conclusion_first(full: Path) -> None:
    md = (full / "report.md").read_text()
    positions = [md.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    assert md.startswith("# Campaign report: beat baseline")


def test_conclusion_states_the_command_the_gain_and_the_policy(full: Path) -> None:
    md = (full / "report.md").read_text()
    conclusion = md[md.index("## Conclusion") : md.index("## Throughput")]
    # a policy of two ranges: two servers, each with its command, and the rule that routes
    assert "**Deploy two servers and route by concurrency** (crossover at C=2)" in conclusion
    assert "Server for **C=1**: **eagle** (--speculative-algorithm EAGLE3," in conclusion
    assert "Server for **C>=2**: **cg256** (--cuda-graph-max-bs 256):" in conclusion
    assert "--speculative-num-draft-tokens 4 --port 30000\n```" in conclusion
    assert "--cuda-graph-max-bs 256 --enable-flashinfer-allreduce-fusion --port 30001" in conclusion
    assert (
        "**Routing:** one server per range; a router in front of them counts the requests in "
        "flight (the new one included) and sends each request to the server whose range holds "
        "that count (C=1: eagle; C>=2: cg256)" in conclusion
    )
    rec = json.loads((full / "recommendation.json").read_text())
    ratio = rec["geomean_ratio"]
    assert f"{ratio:.3f}x ({(ratio - 1) * 100:+.1f} %)" in conclusion
    assert f"({rec['value']:,.1f} vs {rec['baseline_value']:,.1f})" in conclusion
    assert f"noise floor {stats.percent(rec['noise_floor'])}" in conclusion
    assert "Concurrency policy" not in conclusion  # said by the servers above


def test_per_level_table_has_throughput_latency_and_ratio(full: Path) -> None:
    md = (full / "report.md").read_text()
    at_250 = {r[1].strip("*"): r for r in rows(md, "250", "## Throughput")}
    assert set(at_250) == {"baseline", "cg256", "eagle"}
    # the baseline was measured twice (x1.0 and x1.004): the table shows their mean
    assert at_250["baseline"][2] == f"{(551.0 + round(551.0 * 1.004, 2)) / 2:,.1f}"
    assert at_250["cg256"][3] == "1.066x" and at_250["cg256"][1] == "**cg256**"
    assert at_250["eagle"][3] == "0.538x"
    assert at_250["eagle"][4:6] == ["310.0", "590.0"]  # TTFT p50/p99 from the result file
    assert (
        rows(md, "1", "## Throughput")[2][1] == "**eagle**"
    )  # eagle is fastest at one stream only


def test_the_chart_is_a_png_beside_the_md_and_embedded_in_the_html(full: Path) -> None:
    md = (full / "report.md").read_text()
    assert "![output throughput vs concurrency](report-throughput.png)" in md
    png = (full / "report-throughput.png").read_bytes()
    assert png.startswith(PNG) and len(png) > 20_000
    html = (full / "report.html").read_text()
    embedded = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert embedded and base64.b64decode(embedded.group(1)) == png
    assert "report-throughput.png" not in html  # self-contained: nothing to fetch
    assert "<h2>Conclusion</h2>" in html and "<table>" in html
    assert "<strong>Deploy two servers and route by concurrency</strong>" in html


def test_ablation_failures_noise_reproduce_and_cost(full: Path) -> None:
    md = (full / "report.md").read_text()
    ablation = {r[0]: r for r in rows(md, "`--cuda-graph-max-bs`")}
    row = ablation["`--cuda-graph-max-bs`"]
    assert row[1:5] == ["128", "256", "1.008x", "1.008x"]
    backend = rows(md, "`--attention-backend`")[0]
    assert backend[5] == "triton: 0.923x (alone)"
    spec = rows(md, "`--speculative-algorithm`")[0]
    assert spec[5] == "EAGLE3: 0.672x (eagle)"
    failed = rows(md, "eagle-cg64")[0]
    assert failed[2] == "out of memory while capturing CUDA graphs"
    assert "CUDA out of memory" in failed[3]
    assert "give the noise floor of the objective: **0.5 %** (over C=1,2,5,10,30,70,100,250)" in md
    assert rows(md, "250", "## Noise floor") == [["250", "0.9 %"]]
    assert "agent bench --url http://127.0.0.1:30000 --concurrency 1,2,5,10,30,70,100,250" in md
    assert "agent replay" in md and "agent run --goal 'beat baseline' --config" in md
    model = "model API cost (the campaign's brain)"
    cost = {r[0]: r[1] for r in rows(md, "server launches") + rows(md, model)}
    assert cost["server launches"] == "7 (1 failed to start)"
    assert cost[model] == "$0.41"
    assert "At C=1,2,5,10,30,70,100 the difference is within the noise floor." in md
    assert "b008 (triton): 3 failed requests (C=10: 3)." in md
    assert "2 of 4 configurations were measured by one sweep only (triton, eagle)" in md


def test_caveats_name_a_level_whose_noise_floor_is_huge(tmp_path: Path) -> None:
    folder = write_session(tmp_path / "noisy", noisy=True)  # the A/A pair: 551 vs 220 at C=250
    assert main([str(folder)]) == 0
    md = (folder / "report.md").read_text()
    f = gather(folder, read_events(folder / "events.jsonl").events)
    base, cg256 = 330.6 / 385.7, 2.95 / 588.525  # each pair: |a - b| / mean(a, b)
    assert f.level_floors[250] == pytest.approx(2 * ((base**2 + cg256**2) / 2) ** 0.5, rel=1e-3)
    assert f"The noise floor at C=250 is {stats.percent(f.level_floors[250])} (over 10%)" in md
    assert list(f.noisy_levels) == [250]


def test_a_replayed_session_without_result_files_renders_from_the_events(tmp_path: Path) -> None:
    folder = write_session(tmp_path / "bare", files=False)
    assert not list((folder / "results").iterdir())
    assert not (folder / "recommendation.json").exists()
    assert main([str(folder)]) == 0
    md = (folder / "report.md").read_text()
    assert all(s in md for s in SECTIONS)
    # the recommendation comes from the recommend tool's result, the latencies from the events
    assert "Server for **C=1**: **eagle** (--speculative-algorithm EAGLE3" in md
    assert "Server for **C>=2**: **cg256** (--cuda-graph-max-bs 256)" in md
    eagle = next(r for r in rows(md, "250", "## Throughput") if r[1] == "eagle")
    assert eagle[4:6] == ["310.0", "590.0"]
    assert "Some result files are missing" in md
    assert (folder / "report.html").read_text().count("data:image/png;base64,") == 1


def test_an_older_recommendation_json_loads_as_the_typed_record(tmp_path: Path) -> None:
    """write_session's recommendation.json is an older one (no candidate, levels, notes...):
    it loads, parsed once, with an unknown key kept; one that is not a recommendation falls
    back to the recommend tool's result in the events."""
    folder = write_session(tmp_path / "old")
    path = folder / "recommendation.json"
    old = json.loads(path.read_text())
    path.write_text(json.dumps({**old, "from_a_newer_writer": 1}))
    events = read_events(folder / "events.jsonl").events
    rec = gather(folder, events).m.recommendation
    assert isinstance(rec, Recommendation) and rec.candidate is None and rec.notes == []
    assert [p.command for p in rec.policy] == [p["command"] for p in old["policy"]]
    assert rec.policy[1].to_concurrency is None and rec.crossover == [2]
    assert rec.model_extra == {"from_a_newer_writer": 1}
    path.write_text(json.dumps({**old, "policy": "two servers"}))  # not a recommendation
    rec = gather(folder, events).m.recommendation
    assert rec is not None and [p.from_concurrency for p in rec.policy] == [1, 2]
    assert rec.model_extra == {}  # the events' copy


def test_a_run_without_benchmarks_still_gets_a_report(tmp_path: Path, make_run: object) -> None:
    run, _ = make_run()  # type: ignore[operator]
    write_report(run, "stopped")
    md = (run.path / "report.md").read_text()
    assert "No benchmark finished" in md and "status **stopped**" in md
    assert not (run.path / "report-throughput.png").exists()
    assert "## Cost" in md and "## Caveats" in md


def test_write_report_never_raises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_session(tmp_path / "r")
    (folder / "report.md").mkdir()  # a folder where the file must go: the write fails
    run = Run.open(folder)
    try:
        write_report(run)
    finally:
        run.close()
    assert "report: not written:" in capsys.readouterr().err


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nope", "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agent report: no run 'nope'") and err.count("\n") == 1


def test_crossing_points_sit_between_the_levels_where_the_order_flips() -> None:
    spec = {1: 96.0, 2: 140.0, 10: 250.0, 100: 300.0}
    base = {1: 92.0, 2: 150.0, 10: 380.0, 100: 560.0}
    assert crossing_points(spec, base) == [pytest.approx(2**0.5)]
    assert crossing_points(base, base) == []
