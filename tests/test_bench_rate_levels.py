"""Open-loop levels are keyed by their rate, not their request count: compare pairs two sweeps at
the same rates whatever their durations or request counts, and names the levels by rate."""

from __future__ import annotations

from pathlib import Path

from state.run import Run
from tools.base import ToolBox, ToolContext
from tools.bench.comparison import compare, render_comparison
from tools.bench.results import build_result, by_rate, save
from tools.bench.schema import BenchResult, ClientInfo, Point, ServerRef, Workload
from tools.compare import Compare
from tools.domain.config import lab_config

BASE = "python -m sim --tp 8"
RATE = Workload(model="m", traffic="rate")


def rate_result(rid: str, tput: dict[float, float], per_rate: int, flag: str = "") -> BenchResult:
    """A rate sweep: each level sends per_rate x rate requests (its max_concurrency, as saved)."""
    points: list[dict[str, float]] = [
        {
            "max_concurrency": round(rate * per_rate),
            "request_rate": rate,
            "output_throughput": v,
            "completed": 10,
        }
        for rate, v in tput.items()
    ]
    flags = {"--speculative-algorithm": "EAGLE3"} if flag else {}
    server = ServerRef(name="s", command=BASE + flag, flags=flags, engine="sim", url="http://x")
    result = build_result(
        result_id=rid,
        server=server,
        workload=RATE,
        client=ClientInfo(),
        levels=[round(rate * per_rate) for rate in tput],
        points=points,
        run_id="r",
    )
    result.request_rates = list(tput)
    return result


def test_rate_points_pair_by_rate_and_are_named_by_it() -> None:
    # 10 s levels against 20 s levels: request counts 50/200 vs 100/400, rates 5 and 20 req/s
    base = rate_result("b001", {5: 1000.0, 20: 3000.0}, per_rate=10)
    eagle = rate_result(
        "b002", {5: 1200.0, 20: 2700.0}, per_rate=20, flag=" --speculative-algorithm EAGLE3"
    )
    cmp = compare([base, eagle])
    assert cmp.ratios["b002"] == {5000: 1.2, 20000: 0.9}  # one level per rate, both measured
    assert [cmp.name(c) for c in cmp.levels] == ["rate 5/s", "rate 20/s"]
    # named by rate; one sweep each gives no floor, so the crossover is not established (the
    # compare tool's margin, issue 49 item 14e)
    assert cmp.crossovers["b002"] == [
        "between rate 5/s and rate 20/s: b002 ahead at rate<=5/s, b001 at rate>=20/s "
        "(noise floor unknown at rate 5/s: not established)"
    ]
    text = render_comparison(cmp)
    assert text.splitlines()[1].split()[0] == "rate/s", text
    assert [line.split()[0] for line in text.splitlines()[2:4]] == ["5", "20"], text
    assert cmp.data()["level_names"] == {"5000": "rate 5/s", "20000": "rate 20/s"}


def test_closed_levels_keep_their_concurrency_and_name() -> None:
    closed = rate_result("b001", {5: 1000.0}, per_rate=10)
    closed.points[0] = Point.model_validate(
        {"max_concurrency": 10, "request_rate": "inf", "output_throughput": 1.0}
    )
    assert by_rate(closed) is closed and closed.points[0].name == "C=10"
    assert closed.points[0].rate is None


async def test_the_compare_tool_finds_a_rate_sweeps_noise_floor(tmp_path: Path) -> None:
    ctx = ToolContext(run=Run.create(tmp_path / "runs", "r"), config=lab_config())
    results = ctx.run.path / "results"
    save(rate_result("b001", {5: 1000.0, 20: 3000.0}, per_rate=10), results)
    save(rate_result("b002", {5: 1010.0, 20: 2970.0}, per_rate=20), results)  # an A/A repeat
    res, _ = await ToolBox([Compare()]).call(ctx, "compare", {"results": ["b001", "b002"]})
    assert not res.is_error, res.text
    assert "noise floor per level: rate 5/s" in res.text, res.text
    assert "within the noise floor at rate 5/s, rate 20/s" in res.text, res.text
