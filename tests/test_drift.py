"""Machine drift: the simulator slows down on a schedule (sim/drift.py), and a run whose baseline's
own sweeps moved more than the noise floor says so - in report.md, on the final screen and in
recommendation.json (stats.drift, results.drift) - while a run whose did not says nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.report import build, gather
from agent.report.render import to_markdown
from agent.view.standing import final_lines, standing
from sim import drift as sim_drift
from sim.flags import FlagError, parse_server_args
from sim.space import DEFAULT_BASE_FLAGS
from state.events import read_events
from tests.served_sim import served_sim
from tests.test_recommend import BASE, FA3, bench, call
from tests.test_recommend import ctx as ctx  # the fixture: an A/A pair 2 % apart, FA3 above
from tools.base import ToolContext
from tools.bench import results
from tools.domain import stats
from tools.domain.config import lab_config

# --- the schedule --------------------------------------------------------------------------------


def test_a_schedule_of_steps_and_ramps() -> None:
    s = sim_drift.parse("0:1.0,60:0.5,120~1.0")
    assert [s.speed(t) for t in (0, 59.9, 60, 90, 120, 500)] == [1.0, 1.0, 0.5, 0.75, 1.0, 1.0]
    first_ramp = sim_drift.parse("60~0.5")  # a first ramp starts from full speed at second 0
    assert [first_ramp.speed(t) for t in (-1, 0, 30, 60, 99)] == [1.0, 1.0, 0.75, 0.5, 0.5]
    assert sim_drift.parse("30:2").speed(10) == 1.0  # before the first point: full speed


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("fast", "'fast' is not SECOND:SPEED or SECOND~SPEED"),
        ("0:1,0:0.5", "second 0 does not follow 0"),
        ("10:1,5:0.5", "second 5 does not follow 10"),
        ("0:0", "speed 0 at second 0 is below 0.01"),
        ("0:-1", "'0:-1' is not SECOND:SPEED"),
    ],
)
def test_a_bad_schedule_is_one_line(text: str, said: str) -> None:
    with pytest.raises(FlagError) as err:
        parse_server_args(["--drift", text])
    assert said in str(err.value) and "\n" not in str(err.value)


def test_drift_flags_that_make_no_sense(tmp_path: Path) -> None:
    cases = [
        (["--drift-start", "5"], "--drift-start needs --drift"),
        (["--drift", "0:0.5", "--ideal-itl-ms", "3"], "not with --ideal"),
        (["--drift", f"@{tmp_path / 'none.txt'}"], "cannot read"),
    ]
    for argv, said in cases:
        with pytest.raises(FlagError, match=said):
            parse_server_args(argv)


# --- the simulator slows down -------------------------------------------------------------------

SIM = [sys.executable, "-m", "sim", *DEFAULT_BASE_FLAGS, "--time-scale", "4", "--noise", "0"]
SIM += ["--seed", "1", "--load-seconds", "0", "--log-interval", "8"]


def generate(url: str, tokens: int = 64) -> None:
    model = httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["id"]
    body = {"model": model, "prompt": "hello " * 16, "max_tokens": tokens, "ignore_eos": True}
    httpx.post(f"{url}/v1/completions", json=body, timeout=120).raise_for_status()


def server_info(url: str) -> dict[str, Any]:
    info: dict[str, Any] = httpx.get(f"{url}/server_info", timeout=30).json()
    return {**info["sim"], "throughput": info["internal_states"][0]["last_gen_throughput"]}


def test_the_box_slows_down_when_its_schedule_says_so(tmp_path: Path) -> None:
    schedule = tmp_path / "drift.txt"
    schedule.write_text("0:1.0\n")
    with served_sim([*SIM, "--drift", f"@{schedule}"], "drift") as url:
        generate(url)
        full = server_info(url)
        schedule.write_text("0:0.4\n")  # a neighbour's job starts: the box runs at 40 %
        deadline = time.monotonic() + 60
        while server_info(url)["speed"] != 0.4:
            assert time.monotonic() < deadline, "the schedule file was not read again"
            generate(url, tokens=2)  # the engine's steps are what read the schedule
        generate(url)
        slow = server_info(url)
    # one stream's decode steps take 1 / 0.4 as long: the modelled throughput (the engine's own
    # "gen throughput", in model time, so whatever the machine's load) is 0.4 of what it was
    assert full["speed"] == 1.0 and full["drift"] == f"@{schedule}"
    assert slow["throughput"] / full["throughput"] == pytest.approx(0.4, rel=0.01)


def test_a_ramp_since_a_shared_start() -> None:
    # a ramp from 1.0 to 0.5 over 1000 s, started 500 s ago: this launch runs at about 0.75
    start = time.time() - 500
    argv = [*SIM, "--drift", "0:1,1000~0.5", "--drift-start", f"{start:.3f}"]
    with served_sim(argv, "ramp") as url:
        generate(url, tokens=2)
        info = server_info(url)
    assert info["drift"] == "0:1,1000~0.5" and 0.72 < info["speed"] < 0.75


# --- the drift figure ----------------------------------------------------------------------------


def test_the_drift_figure_names_the_sweeps_that_moved_most() -> None:
    series = [{1: 100.0, 10: 400.0}, {1: 102.0, 10: 396.0}, {1: 60.0, 10: 250.0}]
    d = stats.drift(series)
    assert d is not None and (d.earlier, d.later, d.levels) == (1, 2, (1, 10))
    assert d.change == pytest.approx((60 * 250 / (102 * 396)) ** 0.5 - 1)
    assert d.size == pytest.approx(1 / (d.change + 1) - 1)  # the faster over the slower
    assert d.beyond(0.2) and not d.beyond(0.9) and not d.beyond(None)
    # an unpaired gain the baseline's own move (64 %) could make by itself, and one it could not
    assert d.explains(1.5, 0.05) and not d.explains(1.8, 0.05) and not d.explains(1.5, None)
    assert stats.drift(series[:1]) is None
    # a failed level (0.0) is not a move of the box; the objective's level is read alone
    assert stats.drift([{1: 100.0, 10: 0.0}, {1: 50.0, 10: 400.0}]).levels == (1,)  # type: ignore[union-attr]
    at10 = stats.drift(series, "level", 10)
    assert at10 is not None and at10.levels == (10,)


# --- what a run says -----------------------------------------------------------------------------


def said(ctx: ToolContext) -> tuple[dict[str, Any], str, list[str]]:
    """recommendation.json, report.md and the final screen's lines of the run."""
    rec = json.loads((ctx.run.path / "recommendation.json").read_text())
    f = gather(ctx.run.path, read_events(ctx.run.events_path).events, "finished")
    return rec, to_markdown(build(f)), final_lines(ctx.run.path, f)


async def test_a_baseline_that_moved_beyond_the_floor_is_drift(ctx: ToolContext) -> None:
    # the A/A pair (b001, b002: 2 % apart) and, later, the baseline again at 60 % of its speed
    bench(ctx.run, "b005", BASE, {1: 54.0, 10: 216.0, 100: 312.0})
    result = await call(ctx, {"config": FA3})
    rec, report, screen = said(ctx)
    d = rec["drift"]
    runs = [results.of_event(e, ctx.run.path) for e in ctx.run.state.results]
    base = [r for r in runs if r.id in ("b001", "b002", "b005")]
    floor = stats.objective_floor(results.repeats(runs), [1, 10, 100])
    assert floor is not None and rec["noise_floor"] == pytest.approx(floor, abs=1e-5)
    slowest = (54.0 * 216.0 * 312.0) ** (1 / 3)
    fastest = (92.0 * 370.0 * 530.0) ** (1 / 3)
    assert d["from"]["results"] == ["b002"] and d["to"]["results"] == ["b005"]
    assert d["change"] == pytest.approx(slowest / fastest - 1, abs=1e-4)
    assert d["size"] == pytest.approx(fastest / slowest - 1, abs=1e-4) and d["size"] > floor
    assert d["to"]["finished"] == base[-1].created and "only paired comparisons" in d["note"]
    moved = f"{100 * d['change']:+.1f} %"  # -41.4 %
    assert f"drift: the baseline moved {d['change']:+.1%} between its own sweeps" in result.text
    top = report[: report.index("## ")]  # the warning comes before any section
    assert "**Drift:**" in top and moved in top and "(b002, finished" in top and "(b005" in top
    assert f"{100 * d['size']:.1f} % above the slower, more than the noise floor" in top
    assert f"({stats.percent(floor)})" in top and "only paired comparisons" in top
    assert f"The machine drifted ({100 * d['size']:.1f} %" in report  # and among the caveats
    assert any(line.startswith("drift: ") and moved in line for line in screen)


async def test_a_win_by_means_that_span_a_drift_is_not_established(ctx: ToolContext) -> None:
    """FA3 swept four times alike (a low floor), then the baseline again at 80 % of its speed:
    FA3 wins by the sweeps' means, which span the drift, and no launch pair measured it against
    the baseline - not established, the baseline deployed, each view saying why."""
    bench(ctx.run, "b005", FA3, {1: 101.0, 10: 383.0, 100: 545.0})
    bench(ctx.run, "b006", FA3, {1: 100.5, 10: 381.0, 100: 542.0})
    bench(ctx.run, "b007", FA3, {1: 100.5, 10: 381.0, 100: 542.0})
    bench(ctx.run, "b008", BASE, {1: 72.0, 10: 288.0, 100: 416.0})
    result = await call(ctx, {"config": FA3})
    rec, report, _ = said(ctx)
    d = rec["drift"]
    assert rec["geomean_ratio"] > 1 + rec["noise_floor"] and "paired" not in rec
    assert d["size"] > rec["noise_floor"]
    assert rec["verdict"] == "not established"
    assert rec["config"]["--attention-backend"] == "flashinfer"  # the baseline is deployed
    assert result.text.startswith("Keep the baseline") and "no launch pair measured" in result.text
    assert (
        "**Keep the baseline.** No configuration is established as better" in report
        and f"moved {d['change']:+.1%} during the run" in report
    )
    f = gather(ctx.run.path, read_events(ctx.run.events_path).events, "finished")
    assert "(not established: the baseline drifted, no launch pairs)" in standing(f)
    # launch pairs on the slower box, which show the gain, decide it: drift or not
    for n, (b, a) in enumerate([(0.8, 0.8 * 1.40), (0.8, 0.8 * 1.42), (0.8, 0.8 * 1.41)]):
        base = {1: 90.0 * b, 10: 360.0 * b, 100: 520.0 * b}
        bench(ctx.run, f"b{9 + 2 * n:03d}", BASE, base, label=f"pair-L{9 + 2 * n:02d}")
        fa3 = {c: v * a / b for c, v in base.items()}
        bench(ctx.run, f"b{10 + 2 * n:03d}", FA3, fa3, label=f"pair-L{10 + 2 * n:02d}-fa3")
    await call(ctx, {"config": FA3})
    rec, _, _ = said(ctx)
    assert rec["paired"]["verdict"] == "win" and rec["verdict"] == "win" and "drift" in rec


async def test_a_baseline_within_the_floor_says_nothing(ctx: ToolContext) -> None:
    result = await call(ctx, {"config": FA3})
    rec, report, screen = said(ctx)
    assert "drift" not in rec and "drift" not in result.text
    assert "drift" not in report.lower() and not any("drift" in line for line in screen)


# --- end to end: a small lab campaign on a box that slows down ---------------------------------

TINY = """
[server]
engine = "sim"
command = {command!r}
port = {port}

[bench]
concurrency = [1, 10]
max_tokens = 16
requests_per_level = 10
warmup_requests = 1

[search]
"--attention-backend" = ["flashinfer", "triton"]

[search.baseline]
"--attention-backend" = "flashinfer"
"""


def test_a_campaign_on_a_box_that_slows_down_reports_the_drift(tmp_path: Path) -> None:
    """The box runs at full speed until the baseline's A/A pair is measured, then at 30 % (set by
    the campaign's progress, not by a clock, so that a slow machine sees the same campaign): the box
    runs at 25 %. The candidate looks worse, the baseline is measured again (more sweeps for the
    floor, or its re-validation on a fresh launch at the end), and its sweeps - up to 4x apart -
    are a drift that the report, the screen and recommendation.json name."""
    from tests.test_lab_campaign import free_port

    schedule = tmp_path / "drift.txt"
    schedule.write_text("0:1.0\n")
    command = f"{lab_config().server.command} --load-seconds 0.3 --drift @{schedule}"
    (tmp_path / "agent.toml").write_text(TINY.format(command=command, port=free_port()))
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    argv = [sys.executable, "-m", "agent.cli", "run", "--goal", "beat baseline"]
    argv += ["--config", "agent.toml", "--runs-dir", "runs"]
    child = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    )
    try:
        switched: datetime | None = None  # when the box slowed down
        deadline = time.monotonic() + 600
        while child.poll() is None and switched is None:
            assert time.monotonic() < deadline, "the campaign did not reach its A/A pair"
            if aa_measured(tmp_path / "runs"):
                schedule.write_text("0:0.25\n")
                switched = datetime.now(UTC)
            time.sleep(0.1)
        out, err = child.communicate(timeout=600)
    except BaseException:
        child.terminate()
        child.communicate(timeout=60)
        raise
    assert switched is not None and child.returncode == 0, out[-3000:] + err[-3000:]
    run = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    rec = json.loads((run / "recommendation.json").read_text())
    assert rec["verdict"] == "baseline", rec  # the candidate measured on the slow box lost
    d = rec["drift"]
    assert d["change"] < -0.4 and d["size"] > rec["noise_floor"]  # about -70 % and 2.3
    # the two sweeps it names: one on the box at full speed, one after it slowed down
    assert d["from"]["results"][0].split("-")[1] in ("baseline", "noise")
    assert finished(d["from"]) < switched < finished(d["to"])
    report = (run / "report.md").read_text()
    assert "**Drift:**" in report and f"{100 * d['change']:+.1f} %" in report
    final = out[out.rfind("] finished: ") :]
    assert "drift: the baseline's geomean output tok/s over C=1,10" in final
    assert "only paired comparisons (measured alternately) should count" in final


def finished(sweep: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(sweep["finished"].replace("Z", "+00:00"))


def aa_measured(runs: Path) -> bool:
    """The run has measured its baseline's A/A pair: a `noise` sweep (the autopilot's label for
    the baseline's second sweep) at every level."""
    levels: set[int] = set()
    for events in runs.glob("*/events.jsonl"):
        for line in events.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line being written
            if e.get("type") == "benchmark" and str(e.get("label", "")).startswith("noise-"):
                levels |= {int(c) for c in e.get("summary") or {}}
    return levels >= {1, 10}
