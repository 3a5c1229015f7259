"""The latency/throughput and Pareto charts: the front, GPUs per configuration, the files
`agent bench --json` writes beside the result, and the report's section."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agent.report.pareto import chart_files, pareto_front, per_user
from tests.report_session import write_session
from tools.bench.results import gpus_used
from tools.bench.schema import BenchResult, ClientInfo, ServerRef, Workload

PNG = b"\x89PNG\r\n\x1a\n"


def result(
    command: str | None, points: list[dict[str, Any]], gpus: int | None = None
) -> BenchResult:
    return BenchResult(
        id="b001",
        created="2026-01-01T00:00:00Z",
        config_hash="x",
        server=ServerRef(command=command, gpus=gpus),
        workload=Workload(slo_ms={"ttft": 200.0}),
        client=ClientInfo(),
        levels=[p["max_concurrency"] for p in points],
        points=points,  # type: ignore[arg-type]
    )


def point(c: int, tput: float, failed: bool = False) -> dict[str, Any]:
    return {
        "max_concurrency": c,
        "output_throughput": tput,
        "request_throughput": tput / 100,
        "request_goodput": tput / 200,
        "achieved_concurrency": float(c),
        "median_ttft_ms": 50.0 * c,
        "median_tpot_ms": 10.0 + c,
        "level_failed": failed,
    }


def test_the_front_keeps_what_nothing_beats_on_both_axes() -> None:
    pts = [(1.0, 10.0), (2.0, 8.0), (3.0, 9.0), (0.5, 5.0), (3.0, 2.0)]
    assert pareto_front(pts) == [(1.0, 10.0), (3.0, 9.0)]
    assert pareto_front([]) == []
    assert per_user(point(4, 400.0)) == 100.0


def test_gpus_come_from_the_flag_the_command_or_default_to_one() -> None:
    assert gpus_used(result("python -m sglang.launch_server --tp 8 --dp 2", [])) == 16
    assert gpus_used(result("vllm serve m --tensor-parallel-size 4", [])) == 4
    assert gpus_used(result(None, [])) == 1
    assert gpus_used(result("vllm serve m --tensor-parallel-size 4", [], gpus=3)) == 3
    # pipeline parallelism counts, as the planner counts it (tools.domain.gpus, one function)
    assert (
        gpus_used(result("vllm serve m --tensor-parallel-size 2 --pipeline-parallel-size 2", []))
        == 4
    )


def test_chart_files_are_pngs_and_nothing_served_draws_nothing() -> None:
    files = chart_files([("a", result(None, [point(1, 90.0), point(10, 600.0)]))])
    assert [name for name, _ in files] == ["latency", "pareto"]
    assert all(png.startswith(PNG) and len(png) > 10_000 for _, png in files)
    assert chart_files([("a", result(None, [point(1, 90.0, failed=True)]))]) == []


def test_the_report_draws_them_from_the_result_files(tmp_path: Path) -> None:
    from agent.cli.report import main as report_main

    folder = write_session(tmp_path / "campaign")
    assert report_main([str(folder)]) == 0
    md = (folder / "report.md").read_text()
    assert "## Latency, throughput and the Pareto front" in md
    for name in ("report-latency.png", "report-pareto.png"):
        assert f"]({name})" in md and (folder / name).read_bytes().startswith(PNG)
    html = (folder / "report.html").read_text()
    assert len(re.findall("data:image/png;base64,", html)) == 3  # throughput, latency, Pareto
