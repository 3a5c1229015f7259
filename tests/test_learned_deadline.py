"""The first-token deadline learned from what the run measured (issue 49, item 8): once this
server or the run's baseline has served every level of a sweep with the same workload, a server
that then answers with keep-alive comments only is cut at max(floor_s, slack x the slowest p99
TTFT measured there), not at the static first_token_s. Against the hostile server on 127.0.0.1
(tests/hostile_server.py) through the run_benchmark tool; outcomes and the deadlines recorded
are asserted, never durations."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from state.run import Run
from tests.hostile_server import HostileServer
from tools.base import ToolBox, ToolContext
from tools.bench.deadlines import Deadlines
from tools.bench.schema import ServerRef, Workload
from tools.domain.config import load_config
from tools.learned_deadline import served_ttft_s
from tools.run_benchmark import RunBenchmark

STATIC_S = 20.0  # the configured first-token deadline; the learned one is the floor, 1 s


def context(tmp_path: Path, concurrency: str = "[1]") -> ToolContext:
    path = tmp_path / "agent.toml"
    path.write_text(
        f"[bench]\nconcurrency = {concurrency}\ninput_len = 8\nmax_tokens = 8\n"
        "requests_per_level = 2\nwarmup_requests = 0\n\n"
        f"[bench.deadlines]\nfirst_token_s = {STATIC_S}\nfloor_s = 1\nslack = 4\n"
    )
    return ToolContext(run=Run.create(tmp_path / "runs", "r1"), config=load_config(path))


async def bench(ctx: ToolContext, url: str, **more: Any) -> dict[str, Any]:
    """One run_benchmark call; the result file it wrote."""
    before = set((ctx.run.path / "results").glob("*.json"))
    await ToolBox([RunBenchmark()]).call(ctx, "run_benchmark", {"url": url, **more})
    (path,) = set((ctx.run.path / "results").glob("*.json")) - before
    return dict(json.loads(path.read_text()))


async def test_keepalives_after_the_first_successes_are_cut_at_the_learned_deadline(
    tmp_path: Path,
) -> None:
    ctx = context(tmp_path)
    # the first 2 completions served whole, then `: keepalive` comments forever, never a token
    async with HostileServer(mode="keepalive", healthy_first=2) as server:
        first = await bench(ctx, server.url)  # served: the first token in milliseconds
        second = await bench(ctx, server.url)
    assert first["points"][0]["completed"] == 2
    assert first["client"]["deadlines"]["first_token_s"] == STATIC_S  # nothing served before
    point = second["points"][0]
    assert point["level_failed"] and point["errors"].get("ttft_timeout"), point["errors"]
    assert "no token within 1 s" in point["error_samples"]["ttft_timeout"]
    assert second["client"]["deadlines"]["first_token_s"] == 1.0


async def test_a_level_never_served_keeps_the_static_deadline(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    async with HostileServer() as server:
        await bench(ctx, server.url)  # C=1 served
        result = await bench(ctx, server.url, concurrency=[1, 2])  # C=2: never served
    assert result["client"]["deadlines"]["first_token_s"] == STATIC_S


def event(
    server: str | None, flags: dict[str, Any], ttft_ms: dict[int, float], **more: Any
) -> dict[str, Any]:
    points = {
        str(lv): {"p99_ttft_ms": t, "completed": 10, "level_failed": False}
        for lv, t in ttft_ms.items()
    }
    return {"server": server, "flags": flags, "url": "", "workload": Workload().model_dump(),
            "points": points, **more}  # fmt: skip


def test_the_slowest_ttft_of_this_server_or_the_baseline_decides() -> None:
    wl = Workload()
    cand = ServerRef(name="cand", flags={"--x": 1})
    base = {"--x": 0}
    seen = [
        event("cand", {"--x": 1}, {1: 50.0, 10: 400.0}),
        event("other", {"--x": 2}, {1: 9000.0, 10: 9000.0}),  # neither: not counted
        event("b0", {"--x": 0}, {10: 700.0}),  # the baseline's flags
    ]
    assert served_ttft_s(seen, cand, wl, [1, 10], base) == pytest.approx(0.7)
    assert served_ttft_s(seen, cand, wl, [1, 10], None) == pytest.approx(0.4)
    assert served_ttft_s(seen, cand, wl, [1, 10, 100], base) is None  # C=100 never served
    other_workload = wl.model_copy(update={"input_len": 4096})  # a longer prompt: not the same
    assert served_ttft_s(seen, cand, other_workload, [1, 10], base) is None
    failed = event("cand", {"--x": 1}, {100: 10.0})
    failed["points"]["100"]["level_failed"] = True  # a failed level served nothing
    assert served_ttft_s([*seen, failed], cand, wl, [100], base) is None


def test_the_learned_deadline_is_bounded_by_the_floor_and_the_static_one() -> None:
    dl = Deadlines(first_token_s=600.0, floor_s=120.0, slack=4.0)
    assert dl.served(0.05).first_token_s == 120.0  # the floor
    assert dl.served(60.0).first_token_s == 240.0  # slack x the slowest p99 TTFT
    assert dl.served(1000.0).first_token_s == 600.0  # never above the static deadline


async def test_a_duet_side_served_before_gets_the_learned_deadline(tmp_path: Path) -> None:
    """The duet's sweep of each server is built as run_benchmark's (tools/duet.py `_spec`): the
    side this run measured at the duet's levels gets the learned deadline, the other not."""
    from tools.duet import Duet

    ctx = context(tmp_path)
    for name, port in (("base", 30001), ("cand", 30002)):
        ctx.run.append("server_started", name=name, host="local", port=port, flags={"--x": name})
    workload = Workload(input_len=8, max_tokens=8)
    ctx.run.append(
        "benchmark", **event("base", {"--x": "base"}, {1: 20.0}, workload=workload.model_dump())
    )
    specs = {
        name: await Duet()._spec(
            ctx, ServerRef(name=name, flags={"--x": name}, port=port), "local", workload, [1], 0
        )
        for name, port in (("base", 30001), ("cand", 30002))
    }
    assert specs["base"].deadlines.first_token_s == 1.0  # max(floor 1, 4 x 20 ms)
    assert specs["cand"].deadlines.first_token_s == STATIC_S  # never served


# --- fleet trials and `agent bench` ---------------------------------------------------------
ROOT = Path(__file__).parent.parent
HOSTILE = "--mode keepalive --healthy-first 1"  # readiness's test completion served, then none
FLEET = f"""
[server]
engine = "openai"
command = "PYTHONPATH={ROOT} {sys.executable} -m tests.hostile_server {HOSTILE}"
ready_timeout_s = 30

[search]
"--x" = ["base", "cand"]
[search.baseline]
"--x" = "base"

[bench]
concurrency = [1]
input_len = 8
max_tokens = 8
requests_per_level = 2
warmup_requests = 0
min_level_s = 0

[bench.deadlines]
first_token_s = {STATIC_S}
floor_s = 1
slack = 4
"""


async def test_a_fleet_trial_gets_the_deadline_learned_from_the_baseline(tmp_path: Path) -> None:
    """A trial of the baseline's flags, or of flags a trial measured before, is swept with the
    learned deadline - by the run_trial tool and by the autopilot's controller alike - and the
    trial itself, on its node, cuts a keep-alive-only server there (its result says so)."""
    from agent.brains.autopilot.planner import Experiment
    from agent.fleet.controller import FleetCampaign
    from tests.test_run_trial import FakeFleet
    from tools.fleet.trial import TrialSpec, run_trial
    from tools.run_trial import RunTrial
    from tools.trial_outcome import record_outcome

    (tmp_path / "agent.toml").write_text(FLEET)
    config = load_config(tmp_path / "agent.toml")
    run = Run.create(tmp_path / "runs", "r1")
    ctx = ToolContext(run=run, config=config)
    workload = Workload(input_len=8, max_tokens=8, requests_per_level=2, warmup_requests=0)
    run.append("benchmark", **event("base-T01", {"--x": "base"}, {1: 20.0},
                                    workload=workload.model_dump()))  # fmt: skip
    fleet = FakeFleet()
    ctx.fleet = fleet
    await ToolBox([RunTrial()]).call(ctx, "run_trial", {"flags": {"--x": "base"}})
    cand = {"flags": {"--x": "cand"}, "concurrency": [1, 2]}
    await ToolBox([RunTrial()]).call(ctx, "run_trial", cand)
    controller = FleetCampaign(run, config, fleet)  # type: ignore[arg-type]
    step = Experiment(config={"--x": "cand"}, levels=(1,), purpose="screen", why="a screen")
    await controller.start(step)
    firsts = [spec.deadlines[0].first_token_s for spec, _, _ in fleet.submitted]
    # the baseline's flags; C=2 never served; a candidate at a level the baseline served
    assert firsts == [1.0, STATIC_S, 1.0]

    spec: TrialSpec = fleet.submitted[0][0]
    out = await asyncio.wait_for(run_trial(spec, tmp_path / "fleet" / "n1"), 60)
    assert out.points, (out.reason, out.log_tail)
    (point,) = out.points
    assert point["level_failed"] and point["errors"].get("ttft_timeout"), point["errors"]
    assert "no token within 1 s" in point["error_samples"]["ttft_timeout"]
    record_outcome(ctx, out, spec.flags, spec.groups, "base")
    saved = json.loads(Path(run.state.results[-1]["path"]).read_text())
    assert saved["client"]["deadlines"]["first_token_s"] == 1.0  # what the trial swept with


def test_agent_bench_learns_the_deadline_from_a_result_served_before(tmp_path: Path) -> None:
    """`agent bench --served-before A.json`: the levels A served get the learned first-token
    deadline; the sweep after the server went to keep-alives is cut there and says so."""
    from agent.cli.bench import main

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.hostile_server", "--port", str(port), "--mode",
         "keepalive", "--healthy-first", "2"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None and "listening" in server.stdout.readline()
        common = ["--url", f"http://127.0.0.1:{port}", "--concurrency", "1", "--input-len", "8",
                  "--max-tokens", "8", "--requests-per-level", "2", "--warmup", "0",
                  "--processes", "0", "--deadline-first-token", str(STATIC_S),
                  "--deadline-floor", "1"]  # fmt: skip
        first, second = tmp_path / "a.json", tmp_path / "b.json"
        assert main([*common, "--json", str(first)]) == 0  # served whole
        code = main([*common, "--json", str(second), "--served-before", str(first)])
    finally:
        server.kill()
        server.wait(10)
    assert code == 1  # every level failed
    result = json.loads(second.read_text())
    (point,) = result["points"]
    assert (
        point["errors"].get("ttft_timeout")
        and "no token within 1 s" in (point["error_samples"]["ttft_timeout"])
    )
    assert result["client"]["deadlines"]["first_token_s"] == 1.0
    wrong = main([*common, "--served-before", str(tmp_path / "none.json")])
    assert wrong == 2  # not a result: one line, exit 2


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
