"""The system prompt's lessons of issue 49, item 14, each with a session where the model follows
it: a box's leftover engine processes looked for and ended within the bash rules, out of memory
at high concurrency, a slow start told apart from a crash, a warm-up before the first measured
sweep, and a crossover that needs a margin over the one-sweep floor.

The sessions are scripted, not recorded from Claude (no API key here): the model's replies are
written by hand to do what the lesson says, and they go through the real anthropic SDK against
the fake Messages API on loopback (tests/fake_messages_api.py), the real loop and the real tools
on real processes - the simulator, the hostile engine. What is asserted is what the tools show
and do when a model follows the lesson, and that the lesson is in the prompt the model is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agent.brains.anthropic import AnthropicBrain
from agent.brains.autopilot.observe import history_of_run
from agent.brains.client import PatientAnthropic
from agent.loop import Agent
from agent.session import Limits, make_agent, start
from state.events import read_events
from tests.fake_messages_api import FakeMessagesAPI, message, text, tool_use
from tests.test_compare import result
from tests.test_server_lifecycle import sim_command
from tools.bench.results import save
from tools.domain.config import BenchConfig, Config, HostConfig, ServerConfig
from tools.guard.context import Context
from tools.guard.decision import decide

MODEL = "claude-sonnet-4-6"
ROOT = Path(__file__).parent.parent
DEADLINE_S = 120
FINAL = message(99, "end_turn", text("Done."))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def no_wait(seconds: float) -> None:
    await asyncio.sleep(0)


def call(n: int, tool: str, inp: dict[str, Any]) -> dict[str, Any]:
    """A tool_use block whose input may have a `name` (tool_use's own argument)."""
    return {"type": "tool_use", "id": f"toolu_{n}", "name": tool, "input": inp}


def words(s: str) -> str:
    return " ".join(s.split())


async def session(tmp_path: Path, server: ServerConfig, replies: list[Any]) -> tuple[Agent, Any]:
    """A Claude run through the real SDK against the scripted API, to its end (exit 0)."""
    api = FakeMessagesAPI(replies)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    hosts = [HostConfig(name="local", workdir=str(work))]
    bench = BenchConfig(min_level_s=0.0)  # each level its requests: the counts are the scripts'
    config = Config(hosts=hosts, server=server, search={}, bench=bench)
    client = PatientAnthropic(api_key="test", base_url=api.url, max_retries=2, sleep=no_wait)
    run = start("beat baseline", config, MODEL, tmp_path / "runs", None, Limits())
    agent = make_agent(run, AnthropicBrain(MODEL, client=client), config)
    agent.sleep = no_wait
    try:
        code = await asyncio.wait_for(agent.run_loop(), DEADLINE_S)
    finally:
        api.close()
        await agent.tools.call(agent.ctx, "kill_server", {})
        run.close()
    assert code == 0
    return agent, api


def results_of(agent: Agent) -> dict[str, dict[str, Any]]:
    """Each tool call's result event, by call id."""
    events = read_events(agent.run.events_path).events
    return {e["id"]: e for e in events if e["type"] == "tool_result"}


def of_type(agent: Agent, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_events(agent.run.events_path).events if e["type"] == kind]


def sent_system(api: FakeMessagesAPI) -> str:
    return words(" ".join(block["text"] for block in api.bodies[0]["system"]))


def sim(tmp_path: Path, **more: Any) -> ServerConfig:
    gpus = tmp_path / "gpus"
    gpus.mkdir(exist_ok=True)
    fields = {"ready_timeout_s": 30.0, "kill_timeout_s": 5.0, **more}
    return ServerConfig(
        engine="sim", host="local", command=sim_command(gpus), port=free_port(), **fields
    )


# --- (a) start clean: an earlier job's engine on the box ------------------------------------------
def test_the_lesson_commands_are_allowed_outright_and_kill_of_a_stranger_is_not() -> None:
    """The commands the lesson names pass the bash rules as they are; `kill <pid>` of a process
    the run did not start would run sandboxed, where the box's processes are not seen."""
    prompt = words((ROOT / "prompts" / "system.md").read_text())
    listing = "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"
    named = ["pgrep -af vllm", "pgrep -af sglang", "pkill -f vllm", "pkill -f sglang::scheduler",
             "fuser -k /dev/nvidia0", listing]  # fmt: skip
    for command in named:
        assert command in prompt, command
        assert decide(command, context=Context(workdir="/w")).action == "allow", command
    assert decide("kill 4242", context=Context(workdir="/w")).action == "sandbox"
    assert "it kills nothing" in prompt


def workers_of(parent: int) -> list[int]:
    """The simulator's engine workers (sglang::scheduler, ::detokenizer) a server started."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"sim.worker" in args and str(parent).encode() in args:
            found.append(int(entry.name))
    return found


async def test_a_leftover_engine_of_an_earlier_job_is_found_and_ended(tmp_path: Path) -> None:
    """An earlier job's server was killed with -9 and its engine workers stayed, holding the GPUs'
    memory (the zombies `fuser -k` used to clear): kill_server, which stops this run's servers
    only, leaves them; the lesson's listing finds them and its pkill ends them, within the bash
    rules (nothing sandboxed), and the baseline then starts on free GPUs."""
    gpus = tmp_path / "gpus"
    gpus.mkdir()
    old = free_port()
    log = tmp_path / "earlier-job.log"
    with log.open("wb") as out:
        earlier = subprocess.Popen(
            [sys.executable, "-m", "sim", "--port", str(old), "--model-path", "m", "--tp", "8",
             "--load-seconds", "0", "--time-scale", "50", "--disable-custom-all-reduce"],
            env={**os.environ, "SIM_GPU_DIR": str(gpus)}, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=ROOT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "ready to roll" not in log.read_text():
            assert earlier.poll() is None and time.monotonic() < deadline, log.read_text()
            await asyncio.sleep(0.05)
        earlier.kill()  # the earlier job's end: its server -9, its workers left behind
        earlier.wait(10)
        left = workers_of(earlier.pid)
        assert len(left) == 2
        mark = f"parent {earlier.pid} --port {old}"  # what the listing shows them by
        replies = [
            message(1, "tool_use", text("Start clean."), tool_use(1, "kill_server")),
            message(2, "tool_use", text("Leftovers of earlier jobs?"),
                    tool_use(2, "bash", command=f"pgrep -af '{mark}'")),
            message(3, "tool_use", text("Workers of a server that is gone: end them."),
                    tool_use(3, "bash",
                             command=f"pkill -9 -f 'sim.worker scheduler --parent {earlier.pid}'")),
            message(4, "tool_use", tool_use(4, "bash",
                    command=f"pkill -9 -f 'sim.worker detokenizer --parent {earlier.pid}'")),
            message(5, "tool_use", tool_use(5, "bash", command=f"pgrep -af '{mark}'")),
            message(6, "tool_use", text("Clean. Baseline."), tool_use(6, "start_server")),
            FINAL,
        ]  # fmt: skip
        agent, api = await session(tmp_path, sim(tmp_path), replies)
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever the session left of the group
            os.killpg(earlier.pid, signal.SIGKILL)
    assert not workers_of(earlier.pid)
    assert "kill_server (no name) before your first launch - it stops this run's servers" in (
        sent_system(api)
    )
    got = results_of(agent)
    assert "killed nothing" in got["toolu_1"]["text"] or "no server" in got["toolu_1"]["text"]
    listed = got["toolu_2"]["text"]
    assert all(str(pid) in listed for pid in left) and not got["toolu_2"]["is_error"]
    for call in ("toolu_3", "toolu_4"):  # allowed outright: run on the box, not in the sandbox
        assert got[call]["text"].startswith("exit 0 "), got[call]["text"]
        assert "sandbox" not in got[call]["text"]
    assert got["toolu_5"]["text"].startswith("exit 1 ")  # pgrep: nothing left
    assert not got["toolu_6"]["is_error"], got["toolu_6"]["text"]
    assert "GPU memory is held" not in got["toolu_6"]["text"]


# --- (b) out of memory at high concurrency -------------------------------------------------------
async def test_out_of_memory_at_high_concurrency_is_read_and_capped(tmp_path: Path) -> None:
    """The engine serves C=1 and C=4, then dies of out of memory at C=16: the sweep fails, the
    log says why, and the same engine capped at 8 sequences queues and serves every level."""
    # each completion 8 tokens 20 ms apart: at C=16 more than 8 run at once
    hostile = "-m tests.hostile_server --mode slow_ok --gap-s 0.02 --oom-above 8"
    engine = f"PYTHONPATH={ROOT} {sys.executable} {hostile}"
    server = ServerConfig(
        engine="openai", host="local", command=engine, port=free_port(), ready_timeout_s=30.0,
        kill_timeout_s=5.0,
    )  # fmt: skip
    small = {"requests_per_level": 8, "max_tokens": 8, "input_len": 8}
    wide = {**small, "requests_per_level": 32}
    replies = [
        message(1, "tool_use", call(1, "start_server", {"name": "base"})),
        message(2, "tool_use", tool_use(2, "run_benchmark", concurrency=[1, 4], **small)),
        message(3, "tool_use", tool_use(3, "run_benchmark", concurrency=[16], **wide)),
        message(4, "tool_use", text("Failed at C=16: read the log."),
                tool_use(4, "read_log", server="base")),
        message(5, "tool_use", text("Out of memory at C=16: FAILED there for base. Again with a "
                                    "cap that queues."),
                call(5, "start_server", {"name": "base-cap", "flags": {"--max-num-seqs": 8}})),
        message(6, "tool_use", tool_use(6, "run_benchmark", server="base-cap",
                                        concurrency=[1, 4, 16], **wide)),
        FINAL,
    ]  # fmt: skip
    agent, api = await session(tmp_path, server, replies)
    assert "Out of memory under load is not a failed start" in sent_system(api)
    got = results_of(agent)
    assert not got["toolu_2"]["is_error"], got["toolu_2"]["text"]
    assert got["toolu_3"]["is_error"] and "failed at every level" in got["toolu_3"]["text"], got[
        "toolu_3"
    ]["text"]
    assert "CUDA out of memory" in got["toolu_4"]["text"]
    assert not got["toolu_6"]["is_error"], got["toolu_6"]["text"]
    capped = of_type(agent, "benchmark")[-1]
    assert capped["server"] == "base-cap" and not capped["failed_levels"]
    assert capped["points"]["16"]["completed"] == 32


# --- (c) a slow start told apart from a crash -----------------------------------------------------
async def test_a_slow_start_is_started_again_with_more_time(tmp_path: Path) -> None:
    slow = {"--load-seconds": 4}
    replies = [
        message(1, "tool_use", tool_use(1, "start_server", flags=slow)),
        message(2, "tool_use", text("Still loading when the wait ended: slow, not a crash."),
                tool_use(2, "start_server", flags=slow, ready_timeout_s=60)),
        FINAL,
    ]  # fmt: skip
    agent, api = await session(tmp_path, sim(tmp_path, ready_timeout_s=1.0), replies)
    assert "Tell a slow start from a crash" in sent_system(api)
    got = results_of(agent)
    said = got["toolu_1"]["text"]
    assert got["toolu_1"]["is_error"] and "not ready after 1 s" in said
    assert "its log still growing - a slow start, not a crash" in said
    assert not got["toolu_2"]["is_error"], got["toolu_2"]["text"]
    (failed,) = of_type(agent, "server_failed")
    assert "a slow start" in failed["diagnosis"]


def test_a_wait_that_ran_out_on_a_silent_log_is_stuck_not_slow() -> None:
    from tools.servers.readiness import Watch

    w = Watch(None, None, 1, "log", 1, 60.0)  # type: ignore[arg-type]
    assert "stuck, not slow" in w.verdict(100.0) and "wrote no log" in w.verdict(100.0)
    w.grew_at = 40.0
    assert "its log silent for the last 60 s - stuck" in w.verdict(100.0)
    w.grew_at = 99.5
    assert "a slow start, not a crash" in w.verdict(100.0)


# --- (d) warm-up before the first measured sweep --------------------------------------------------
async def test_a_warm_up_goes_before_the_first_sweep_and_is_not_recorded(tmp_path: Path) -> None:
    small = {"max_tokens": 8, "input_len": 32}
    replies = [
        message(1, "tool_use", tool_use(1, "start_server")),
        message(2, "tool_use", text("Warm up at the top level first."),
                tool_use(2, "run_benchmark", warmup=True, concurrency=[8], requests_per_level=16,
                         **small)),
        message(3, "tool_use", tool_use(3, "run_benchmark", concurrency=[1, 8],
                                        requests_per_level=16, **small)),
        FINAL,
    ]  # fmt: skip
    agent, api = await session(tmp_path, sim(tmp_path), replies)
    assert "Warm up every fresh launch before its first measured sweep" in sent_system(api)
    got = results_of(agent)
    warm = got["toolu_2"]
    assert not warm["is_error"], warm["text"]
    assert "not recorded as a sweep" in warm["text"] and warm["data"]["warmup"] is True
    assert warm["data"]["completed"] == 16
    (measured,) = of_type(agent, "benchmark")  # the warm-up is no sweep of the configuration
    assert measured["id"] == got["toolu_3"]["data"]["id"]
    assert len(list((agent.run.path / "results").glob("*.json"))) == 1
    ledger = agent.run.path.parent / "ledger.jsonl"
    assert len(ledger.read_text().splitlines()) == 1
    # the planner (and the plan tool) reads one sweep of the launch, not the warm-up as another
    measured_ids = [m.ids for m in history_of_run(agent.run.path).measurements]
    assert measured_ids == [(measured["id"],)]


# --- (e) a crossover needs a margin ---------------------------------------------------------------
async def test_a_thin_crossover_is_no_policy(tmp_path: Path) -> None:
    """compare says a 1.3 % edge against a 0.8 % one-sweep floor establishes no crossover; the
    model states one configuration instead of a policy."""
    folder = tmp_path / "given"
    eagle = {"--speculative-algorithm": "EAGLE3"}
    command = "python -m sim --tp 8 --speculative-algorithm EAGLE3"
    paths = [
        str(save(result(rid, tput, **more), folder))  # type: ignore[arg-type]
        for rid, tput, more in (
            ("b001", {1: 1000.0, 100: 500.0}, {}),
            ("b002", {1: 1004.0, 100: 502.0}, {}),  # the A/A pair: 0.8 % apart
            ("b003", {1: 1013.0, 100: 400.0}, {"command": command, "flags": eagle}),
        )
    ]
    conclusion = "No policy: EAGLE3's 1.3 % at C=1 is under the margin; the baseline everywhere."
    replies = [
        message(1, "tool_use", tool_use(1, "compare", results=paths)),
        message(2, "end_turn", text(conclusion)),
    ]
    agent, api = await session(tmp_path, ServerConfig(engine="sim", command="true"), replies)
    assert "only where compare calls the crossover established" in sent_system(api)
    said = results_of(agent)["toolu_1"]["text"]
    assert "a crossover needs 2x the floor and at least 2 %: not established" in said
