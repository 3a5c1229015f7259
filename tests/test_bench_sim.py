"""The benchmark engine against the simulator as a real process (ideal mode: fixed TTFT and
ITL): `agent bench --json`, the run_benchmark tool (results/, ledger, `benchmark` event,
progress), and compare on what it saved."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.cli.bench import main as bench_main
from state.events import read_events
from state.ledger import Ledger
from state.run import Run
from tests.served_sim import served_sim
from tools.base import ToolBox, ToolContext
from tools.compare import Compare
from tools.domain.config import lab_config
from tools.run_benchmark import RunBenchmark

TTFT_MS, ITL_MS = 5, 1
VLLM_KEYS = {
    "max_concurrency",
    "num_prompts",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "input_lens",
    "output_lens",
    "ttfts",
    "errors",
    *(
        f"{s}_{m}_ms"
        for s in ("mean", "median", "std", "p99")
        for m in ("ttft", "tpot", "itl", "e2el")
    ),
}


@pytest.fixture(scope="module")
def sim() -> Iterator[tuple[str, list[str]]]:
    command = [
        sys.executable,
        "-m",
        "sim",
        "--ideal-ttft-ms",
        str(TTFT_MS),
        "--ideal-itl-ms",
        str(ITL_MS),
        "--load-seconds",
        "0",
        "--seed",
        "1",
    ]
    with served_sim(command, "bench") as url:
        yield url, command


def test_agent_bench_json_has_vllm_keys(
    sim: tuple[str, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = sim
    out = tmp_path / "r.json"
    argv = [
        "--url",
        url,
        "--concurrency",
        "1,4",
        "--max-tokens",
        "16",
        "--input-len",
        "32",
        "--requests-per-level",
        "8",
        "--json",
        str(out),
    ]
    assert bench_main(argv) == 0
    printed = capsys.readouterr().out
    assert "out tok/s" in printed and f"wrote {out}" in printed
    result = json.loads(out.read_text())
    assert [p["max_concurrency"] for p in result["points"]] == [1, 4]
    for p in result["points"]:
        assert set(p) >= VLLM_KEYS, VLLM_KEYS - set(p)
        assert p["completed"] == 8 and p["failed"] == 0 and p["errors"] == {}
        assert p["total_output_tokens"] == 8 * 16 and p["early_eos"] == 0
        # the server cannot answer faster than its fixed latencies (a late server may catch up
        # on its schedule, so per-token gaps can be shorter - but not the whole request)
        assert p["mean_ttft_ms"] >= 0.9 * TTFT_MS
        assert p["mean_e2el_ms"] >= 0.9 * (TTFT_MS + 15 * ITL_MS)
        assert p["total_input_tokens"] >= 8 * 32
    assert result["workload"]["model"] and result["config_hash"]


def test_agent_bench_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["--url", "http://127.0.0.1:1", "--concurrency", "0,1"]) == 2
    assert bench_main(["--url", "http://127.0.0.1:1", "--max-tokens", "0"]) == 2
    assert bench_main(["--url", "http://127.0.0.1:1", "--concurrency", "1"]) == 1
    assert "connection refused" in capsys.readouterr().err


def make_ctx(
    tmp_path: Path, url: str, command: list[str]
) -> tuple[ToolContext, list[tuple[str, dict[str, Any]]]]:
    run = Run.create(tmp_path / "runs", "r1")
    port = int(url.rsplit(":", 1)[1])
    run.append(
        "server_started",
        name="server",
        host="local",
        engine="sim",
        pid=1,
        pgid=1,
        port=port,
        command=" ".join([*command, "--port", str(port)]),
        flags={},
        log="x.log",
    )
    seen: list[tuple[str, dict[str, Any]]] = []
    ctx = ToolContext(
        run=run, config=lab_config(), progress=lambda kind, **i: seen.append((kind, i))
    )
    return ctx, seen


async def test_run_benchmark_saves_logs_and_remembers(
    sim: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, command = sim
    ctx, seen = make_ctx(tmp_path, url, command)
    box = ToolBox([RunBenchmark(), Compare()])
    inp = {
        "concurrency": [1, 3],
        "requests_per_level": 6,
        "input_len": 16,
        "max_tokens": 8,
        "label": "baseline",
    }
    res, _ = await box.call(ctx, "run_benchmark", inp)
    assert not res.is_error, res.text
    assert res.data["id"] == "b001-baseline" and "out tok/s" in res.text
    path = Path(res.data["path"])
    saved = json.loads(path.read_text())
    assert saved["server"]["name"] == "server" and saved["run_id"] == "r1"
    assert [p["completed"] for p in saved["points"]] == [6, 6]
    events = [e for e in read_events(ctx.run.events_path).events if e["type"] == "benchmark"]
    assert len(events) == 1 and set(events[0]["summary"]) == {"1", "3"}
    assert events[0]["config_hash"] == saved["config_hash"] == res.data["config_hash"]
    assert ctx.run.state.results[0]["id"] == "b001-baseline"
    assert (
        Ledger.in_runs_dir(tmp_path / "runs").lookup(saved["config_hash"])[0]["id"]
        == "b001-baseline"
    )
    bars = [i for k, i in seen if k == "benchmark"]
    assert bars and bars[-1]["levels_done"] == 2 and bars[-1]["levels_total"] == 2

    again, _ = await box.call(ctx, "run_benchmark", {**inp, "label": "repeat"})
    assert "measured before at these levels (tok/s): b001-baseline (run r1): C=1 " in again.text
    assert again.data["previous"] == ["b001-baseline"]
    other, _ = await box.call(ctx, "run_benchmark", {**inp, "concurrency": [2], "label": "c2"})
    assert "measured before" not in other.text  # no level in common
    cmp, _ = await box.call(ctx, "compare", {"results": ["b001", "b002"]})
    assert not cmp.is_error, cmp.text
    assert set(cmp.data["level_noise_floor"]) == {"1", "3"}  # an A/A pair: the floor is known


async def test_run_benchmark_by_url_and_bad_input(
    sim: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, command = sim
    ctx, _ = make_ctx(tmp_path, url, command)
    box = ToolBox([RunBenchmark()])
    res, _ = await box.call(
        ctx,
        "run_benchmark",
        {"url": url, "concurrency": [2], "requests_per_level": 4, "max_tokens": 4},
    )
    assert not res.is_error and res.data["id"] == "b001-url"
    cases = [
        ({"server": "nope"}, "no running server named 'nope' (running: server)"),
        ({"server": "server", "url": url}, "not both"),
        ({"concurrency": [0]}, "concurrency levels must be 1..4096"),
        ({"url": "http://127.0.0.1:1", "concurrency": [1]}, "connection refused"),
        ({"concurrency": []}, "concurrency"),
        ({"levels": [1]}, "Extra inputs are not permitted"),
    ]
    for inp, message in cases:
        res, _ = await box.call(ctx, "run_benchmark", inp)
        assert res.is_error and message in res.text, (inp, res.text)
    ctx.run.append("server_killed", name="server", killed=True, verified=True)
    res, _ = await box.call(ctx, "run_benchmark", {})
    assert res.is_error and "no server is running" in res.text
