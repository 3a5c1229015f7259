"""Against the real llama.cpp llama-server (marked real_engine: `pytest -q -m real_engine`, the
real-engine stage of .ci/run, after `.ci/build-llama-server`): the model maker's GGUF loads,
readiness is detected, failed starts get their one-line diagnoses, a kill leaves nothing, and a
short benchmark has no failed request."""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from state.events import read_events
from tests.real_engine import call, local_run
from tools.base import ToolContext
from tools.servers.llama_cpp.build import find
from tools.servers.llama_cpp.tiny_model import make_models

pytestmark = pytest.mark.real_engine


@pytest.fixture(scope="module")
def binary() -> Path:
    found = find()
    if found is None:
        pytest.fail("no llama-server: run .ci/build-llama-server first (or put it on PATH)")
    return found


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_models(tmp_path_factory.mktemp("models"))


@pytest.fixture
async def ctx(
    tmp_path: Path, binary: Path, models: tuple[Path, Path]
) -> AsyncIterator[ToolContext]:
    command = shlex.join([str(binary), "-m", str(models[0]), "--ctx-size", "2048", "--no-webui"])
    async with local_run(tmp_path, "llama.cpp", command) as context:
        yield context


def events(ctx: ToolContext, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_events(ctx.run.events_path).events if e["type"] == kind]


async def test_ready_and_killed_with_nothing_left(
    ctx: ToolContext, models: tuple[Path, Path]
) -> None:
    flags = {
        "--threads": 1,
        "--parallel": 2,
        "--spec-type": "draft-simple",
        "--spec-draft-model": str(models[1]),
    }
    text, is_error, data = await call(ctx, "start_server", flags=flags)
    assert not is_error, text
    (started,) = events(ctx, "server_started")
    (ready,) = events(ctx, "server_ready")
    assert started["engine"] == "llama.cpp" and started["engine_version"] != "unknown"
    assert data["engine_version"] == started["engine_version"]
    assert "model loaded" in ready["ready_line"] or "listening" in ready["ready_line"]
    assert data["model"]  # the test completion was answered by the model the maker wrote
    host = ctx.hosts.get()
    text, is_error, data = await call(ctx, "kill_server")
    assert not is_error, text
    (report,) = data["servers"]
    assert report["verified"]["pid_gone"] and report["verified"]["port_free"]
    assert not await host.alive(started["pid"]) and not await host.port_in_use(started["port"])
    left = [p for p in await host.processes() if f"--port {started['port']}" in p.args]
    assert left == []


async def test_an_unknown_flag_is_refused_before_launch(ctx: ToolContext) -> None:
    text, is_error, _ = await call(ctx, "start_server", flags={"--bogus-flag": 1})
    assert is_error and "refused before launch" in text and "--bogus-flag" in text
    assert events(ctx, "server_started") == []  # nothing was launched


async def test_a_failed_start_has_its_one_line_diagnosis(
    tmp_path: Path, binary: Path, models: tuple[Path, Path]
) -> None:
    cases = [
        (f"{binary} -m {models[0]} --bogus-flag 1", "does not know the flag --bogus-flag"),
        (f"{binary} -m {tmp_path / 'none.gguf'}", "model file not found or unreadable"),
    ]
    for i, (command, diagnosis) in enumerate(cases):
        async with local_run(tmp_path / str(i), "llama.cpp", command) as context:
            text, is_error, data = await call(context, "start_server")
            assert is_error and diagnosis in data["diagnosis"], text
            assert "\n" not in data["diagnosis"]
            (failed,) = events(context, "server_failed")
            assert failed["seconds"] < 30  # a bad flag exits at once: no ready_timeout_s wait


async def test_a_short_benchmark_has_no_failed_request(ctx: ToolContext) -> None:
    text, is_error, _ = await call(ctx, "start_server", flags={"--threads": 1, "--parallel": 4})
    assert not is_error, text
    text, is_error, _ = await call(
        ctx,
        "run_benchmark",
        concurrency=[1, 2, 4, 8],
        input_len=32,
        max_tokens=32,
        requests_per_level=16,
        label="real",
    )
    assert not is_error, text
    result = read_events(ctx.run.events_path).events
    (bench,) = [e for e in result if e["type"] == "benchmark"]
    import orjson

    points = orjson.loads(Path(bench["path"]).read_bytes())["points"]
    assert [p["max_concurrency"] for p in points] == [1, 2, 4, 8]
    assert [p["failed"] for p in points] == [0, 0, 0, 0], [p["errors"] for p in points]
    assert all(p["output_throughput"] > 0 for p in points)


async def test_metrics_are_sampled_with_metrics_and_a_note_without(ctx: ToolContext) -> None:
    """llama-server's /metrics over each level (tools/bench/server_metrics.py): sampled when it
    was started with --metrics; without, 501, one note, and the levels measured all the same."""
    import orjson

    for flags in ({"--metrics": True}, {}):
        text, is_error, _ = await call(
            ctx, "start_server", flags={"--threads": 1, "--parallel": 4, **flags}
        )
        assert not is_error, text
        text, is_error, _ = await call(
            ctx, "run_benchmark", concurrency=[1, 4], input_len=32, max_tokens=128,
            requests_per_level=24, label="metrics" if flags else "plain",
        )  # fmt: skip
        assert not is_error, text
        result = orjson.loads(Path(events(ctx, "benchmark")[-1]["path"]).read_bytes())
        assert [p["failed"] for p in result["points"]] == [0, 0]
        notes = [n for n in result["notes"] if n.startswith("no /metrics")]
        if flags:
            assert notes == [], notes
            for p in result["points"]:
                series = p["server_metrics"]
                assert series["source"] == "llamacpp" and series["t"], p["max_concurrency"]
                assert all(0 <= r <= 4 for r in series["running"])  # --parallel 4 slots
        else:
            assert len(notes) == 1 and "HTTP 501" in notes[0], result["notes"]
            assert all("server_metrics" not in p for p in result["points"])
        text, is_error, _ = await call(ctx, "kill_server")
        assert not is_error, text


async def test_a_repeated_sweep_is_not_served_from_the_prefix_cache(ctx: ToolContext) -> None:
    """Two sweeps of one configuration: each sends fresh prompts (and llama.cpp is told not to
    reuse a slot's cached prefix), so the second is not several times faster to the first token,
    as it was when both sent the same prompts (15.8 -> 5.2 ms TTFT p50 in the issue)."""
    text, is_error, _ = await call(ctx, "start_server", flags={"--threads": 1, "--parallel": 1})
    assert not is_error, text
    ttft = []
    for label in ("first", "again"):
        text, is_error, _ = await call(
            ctx, "run_benchmark", concurrency=[1], input_len=256, max_tokens=4,
            requests_per_level=12, label=label,
        )  # fmt: skip
        assert not is_error, text
        import orjson

        bench = events(ctx, "benchmark")[-1]
        (point,) = orjson.loads(Path(bench["path"]).read_bytes())["points"]
        assert point["failed"] == 0
        ttft.append(point["median_ttft_ms"])
    assert ttft[1] > 0.5 * ttft[0], ttft  # a cache hit would make it ~3x faster


def test_lab_setup_then_a_short_campaign_exits_0(tmp_path: Path, binary: Path) -> None:
    """`agent lab setup llama.cpp`, then `agent run --model autopilot` on a trimmed space: every
    result without a failed request, and a recommendation above 0."""
    import subprocess
    import sys
    import tomllib

    from agent.cli.main import main
    from tools.domain.config_toml import to_toml

    assert main(["lab", "setup", "llama.cpp", "--dir", str(tmp_path / "lab")]) == 0
    config = tmp_path / "lab" / "agent.toml"
    raw = tomllib.loads(config.read_text())
    assert raw["server"]["command"].startswith(str(binary))
    raw["search"] = {"--threads": [1], "--parallel": [1, 4], "baseline": {"--parallel": 1}}
    raw["bench"] = {"concurrency": [1, 4], "input_len": 16, "max_tokens": 16}
    raw["budget"] = {"max_minutes": 15.0}
    config.write_text(to_toml(raw))
    runs = tmp_path / "runs"
    argv = [
        sys.executable,
        "-m",
        "agent.cli",
        "run",
        "--config",
        str(config),
        "--goal",
        "beat baseline",
        "--model",
        "autopilot",
        "--runs-dir",
        str(runs),
        "--run-id",
        "r",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-2000:]
    import orjson

    results = sorted((runs / "r" / "results").glob("*.json"))
    assert results
    for path in results:
        points = orjson.loads(path.read_bytes())["points"]
        assert all(p["failed"] == 0 for p in points), (path.name, [p["errors"] for p in points])
    events = [
        orjson.loads(line) for line in (runs / "r" / "events.jsonl").read_bytes().splitlines()
    ]
    (started, *_) = [e for e in events if e["type"] == "server_started"]
    assert started["engine"] == "llama.cpp" and started["engine_version"] != "unknown"
    recommendation = orjson.loads((runs / "r" / "recommendation.json").read_bytes())
    assert recommendation["value"] > 0 and recommendation["baseline_value"] > 0
    report = (runs / "r" / "report.md").read_text()
    assert f"engine: llama.cpp (version {started['engine_version']})" in report


async def test_levels_last_the_profiles_minimum(ctx: ToolContext) -> None:
    """llama.cpp's profile gives every closed level a minimum of 5 s (issue 29): one request of 8
    tokens is far less, so the level sends more than its count of 1 - and never more than 16 x."""
    text, is_error, _ = await call(ctx, "start_server", flags={"--threads": 1, "--parallel": 1})
    assert not is_error, text
    text, is_error, data = await call(
        ctx, "run_benchmark", concurrency=[1], input_len=16, max_tokens=8, requests_per_level=1
    )
    assert not is_error, text
    assert "at least 5 s per level" in text
    import orjson

    result = orjson.loads(Path(data["path"]).read_bytes())
    assert result["workload"]["min_level_s"] == 5.0
    (point,) = result["points"]
    assert 1 < point["num_prompts"] <= 16 and point["failed"] == 0, point["errors"]
