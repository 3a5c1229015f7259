"""The benchmark client's deadlines are settings (issue 23, item 1): `agent bench --deadline-*`
and agent.toml's [bench.deadlines] reach the client, each one decides against the hostile server
(tests/hostile_server.py) what the default would not, a bad value is one line naming it, and a
result records the deadlines in force, defaults included.

Outcomes are asserted, never durations. Each "takes effect" test pairs a setting with a server
whose waits are seconds on the other side of it (a deadline under 1.5 s against a 3 s wait, an
allowance of 9 s or more against one of 3 s), so a loaded machine decides the same way.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.cli.bench import DEADLINE_FLAGS
from agent.cli.bench import main as bench_main
from state.run import Run
from tests.hostile_server import HostileServer
from tools.base import ToolBox, ToolContext
from tools.bench.deadlines import Deadlines
from tools.domain.config import BenchDeadlines, ConfigError, load_config
from tools.run_benchmark import RunBenchmark

DEFAULTS = Deadlines().to_job()


@pytest.fixture
async def server() -> AsyncIterator[HostileServer]:
    srv = HostileServer()
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


async def bench(
    srv: HostileServer, tmp_path: Path, *flags: str, n: int = 2
) -> tuple[int, dict[str, Any]]:
    """`agent bench` against the hostile server, in this process (the server runs on this
    test's loop, the command's own loop in a thread): its exit code and result JSON."""
    out = tmp_path / "r.json"
    argv = [
        *("--url", srv.url, "--model", "hostile", "--concurrency", "1"),
        *("--input-len", "8", "--max-tokens", "8", "--requests-per-level", str(n)),
        *("--warmup", "0", "--processes", "0", "--stall-timeout", "60", "--json", str(out)),
        *flags,
    ]
    code = await asyncio.to_thread(bench_main, argv)
    return code, json.loads(out.read_text()) if out.exists() else {}


def errors(result: dict[str, Any]) -> dict[str, int]:
    return dict(result["points"][0]["errors"])


# --- the names ------------------------------------------------------------------------------
def test_the_settings_are_the_clients_deadlines() -> None:
    # agent.toml's table, the flags and the client's Deadlines name the same deadlines
    assert list(BenchDeadlines.model_fields) == list(DEFAULTS)
    assert list(DEADLINE_FLAGS) == list(DEFAULTS)


# --- agent bench ----------------------------------------------------------------------------
async def test_agent_bench_records_the_deadlines_in_force(
    server: HostileServer, tmp_path: Path
) -> None:
    code, result = await bench(server, tmp_path)
    assert code == 0 and result["client"]["deadlines"] == DEFAULTS  # defaults included
    code, result = await bench(server, tmp_path, "--deadline-floor", "30", "--deadline-slack", "2")
    assert code == 0
    assert result["client"]["deadlines"] == {**DEFAULTS, "floor_s": 30.0, "slack": 2.0}


async def test_a_head_deadline_fails_a_trickled_head(server: HostileServer, tmp_path: Path) -> None:
    server.mode = "trickle_head"  # one header byte every 50 ms, never the blank line: 30 s default
    code, result = await bench(server, tmp_path, "--deadline-head", "0.5")
    assert code == 1 and errors(result) == {"head_timeout": 2}
    assert result["client"]["deadlines"]["head_s"] == 0.5


async def test_a_first_token_deadline_fails_a_slow_first_token(
    server: HostileServer, tmp_path: Path
) -> None:
    server.mode, server.first_s = "slow_first", 3.0  # a whole stream, 3 s after its headers
    code, result = await bench(server, tmp_path, n=1)
    assert code == 0 and result["points"][0]["completed"] == 1  # the default waits 600 s
    code, result = await bench(server, tmp_path, "--deadline-first-token", "0.5", n=1)
    assert code == 1 and errors(result) == {"ttft_timeout": 1}
    assert "no token within 0.5 s" in result["points"][0]["error_samples"]["ttft_timeout"]


async def test_the_floor_and_the_pace_bound_a_slow_stream(
    server: HostileServer, tmp_path: Path
) -> None:
    # 8 tokens 0.4 s apart: 3.2 s. The total allowed: max(floor, first token + 8 / pace)
    server.mode, server.gap_s = "slow_ok", 0.4
    tight = ("--deadline-first-token", "1", "--deadline-pace", "1000")
    code, result = await bench(server, tmp_path, *tight, "--deadline-floor", "1.5", n=1)
    assert code == 1 and errors(result) == {"deadline": 1}  # max(1.5, 1.008)
    code, result = await bench(server, tmp_path, *tight, "--deadline-floor", "30", n=1)
    assert code == 0 and errors(result) == {}  # the floor's 30 s
    slow_pace = ("--deadline-first-token", "1", "--deadline-pace", "1")
    code, result = await bench(server, tmp_path, *slow_pace, "--deadline-floor", "1.5", n=1)
    assert code == 0 and errors(result) == {}  # 1 + 8 / 1 tok/s = 9 s


async def test_the_slack_bounds_a_request_slower_than_its_level(
    server: HostileServer, tmp_path: Path
) -> None:
    # 5 requests at full speed give the level its pace (a few ms a token); then 8 tokens 0.4 s
    # apart (3.2 s). Once the pace is known the total is max(floor, slack x 8 x that pace)
    server.mode, server.gap_s, server.quick = "slow_ok", 0.4, 5
    code, result = await bench(server, tmp_path, "--deadline-floor", "0.5", n=6)
    assert code == 1 and errors(result) == {"deadline": 1}  # slack 4: the floor's 0.5 s
    server.completions = 0
    wide = ("--deadline-floor", "0.5", "--deadline-slack", "100000")
    code, result = await bench(server, tmp_path, *wide, n=6)
    assert code == 0 and errors(result) == {}  # 100000 x 8 x a few ms: far past 3.2 s
    assert result["client"]["deadlines"]["slack"] == 100000


async def test_a_level_deadline_cuts_a_level(server: HostileServer, tmp_path: Path) -> None:
    server.mode, server.gap_s = "slow_ok", 0.05  # 0.4 s a request, 20 in a row: 8 s
    code, result = await bench(server, tmp_path, "--deadline-level", "1", n=20)
    assert code == 1 and result["points"][0]["level_failed"]
    assert "ran past its deadline of 1 s" in result["points"][0]["error_samples"]["level_deadline"]
    assert result["client"]["deadlines"]["level_s"] == 1.0


async def test_a_probe_deadline_bounds_a_trickled_models_list(
    server: HostileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.models = "trickle"  # one byte every 50 ms: several seconds; the default waits 30 s
    argv = ["--url", server.url, "--concurrency", "1", "--deadline-probe", "0.5"]
    assert await asyncio.to_thread(bench_main, argv) == 1
    assert "/v1/models did not answer within 0.5 s" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [flag for flag, *_ in DEADLINE_FLAGS.values()])
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_a_bad_deadline_flag_is_one_line(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench_main(["--url", "http://127.0.0.1:1", flag, value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"agent bench: {flag} must be a positive"), err


# --- agent.toml and run_benchmark -----------------------------------------------------------
def write_config(tmp_path: Path, deadlines: str) -> Path:
    path = tmp_path / "agent.toml"
    path.write_text(
        "[bench]\nconcurrency = [1]\ninput_len = 8\nmax_tokens = 8\nrequests_per_level = 2\n"
        f"warmup_requests = 0\n\n[bench.deadlines]\n{deadlines}\n"
    )
    return path


@pytest.mark.parametrize(
    ("line", "says"),
    [
        # a deadline is a millisecond at least (state/numbers.py Seconds): 0 and 1e-300 are no wait
        ("head_s = 0", "bench.deadlines.head_s: Input should be greater than or equal to 0.001"),
        ("floor_s = 1e-300", "bench.deadlines.floor_s: Input should be greater than or equal to"),
        ("first_token_s = -1", "bench.deadlines.first_token_s: Input should be greater than or"),
        ("level_s = inf", "bench.deadlines.level_s: Input should be a finite number"),
        ("slack = true", "bench.deadlines.slack: Input should be a valid number (got True)"),
        ('probe_s = "30"', "bench.deadlines.probe_s: Input should be a valid number (got '30')"),
        ("head = 3", "unknown key 'bench.deadlines.head' (did you mean 'head_s'?)"),
        (
            "first_token = 3",
            "unknown key 'bench.deadlines.first_token' (did you mean 'first_token_s'?)",
        ),
    ],
)
def test_a_bad_deadline_in_the_config_is_one_line(tmp_path: Path, line: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write_config(tmp_path, line))
    assert says in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_the_config_sets_some_deadlines_and_leaves_the_rest_to_the_client(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, "first_token_s = 0.5\nlevel_s = 900"))
    assert config.bench.deadlines.given() == {"first_token_s": 0.5, "level_s": 900}
    assert load_config(write_config(tmp_path, "")).bench.deadlines.given() == {}


async def test_run_benchmark_runs_under_the_configs_deadlines(
    server: HostileServer, tmp_path: Path
) -> None:
    server.mode, server.first_s = "slow_first", 3.0
    config = load_config(write_config(tmp_path, "first_token_s = 0.5"))
    ctx = ToolContext(run=Run.create(tmp_path / "runs", "r1"), config=config)
    res, _ = await ToolBox([RunBenchmark()]).call(ctx, "run_benchmark", {"url": server.url})
    assert res.is_error and "benchmark failed at every level" in res.text, res.text
    result = json.loads(next((ctx.run.path / "results").glob("*.json")).read_text())
    assert result["points"][0]["errors"] == {"ttft_timeout": 2}
    assert result["client"]["deadlines"] == {**DEFAULTS, "first_token_s": 0.5}


def test_a_fleet_trials_result_records_the_configs_deadlines(tmp_path: Path) -> None:
    # the trial runs its sweep under the run's config (tools/fleet/trial.py); its result says so
    from tools.bench.schema import Workload
    from tools.fleet.trial import TrialOutcome
    from tools.trial_outcome import record_outcome

    config = load_config(write_config(tmp_path, "floor_s = 60\nlevel_s = 900"))
    ctx = ToolContext(run=Run.create(tmp_path / "runs", "r1"), config=config)
    point = {"max_concurrency": 1, "num_prompts": 2, "completed": 2, "output_throughput": 9.0}
    out = TrialOutcome(
        "t1", ok=True, end="measured", node="n1", box="box1", command="sim", port=8000,
        model="m", points=[point], started=1.0, ended=2.0,
    )  # fmt: skip
    ((_, data),) = record_outcome(ctx, out, {}, [([1], Workload(max_tokens=8))], "t1")
    result = json.loads(Path(data["path"]).read_text())
    assert result["client"]["deadlines"] == {**DEFAULTS, "floor_s": 60.0, "level_s": 900.0}
