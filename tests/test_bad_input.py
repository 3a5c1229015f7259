"""Bad input from the model: malformed tool calls through the real ToolBox and a real ToolContext
each get a clear is_error result, nothing runs that should not, and the loop goes on."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.kill_resume_lab import free_port
from state.events import read_events
from state.run import Run
from tests.conftest import ScriptedBrain, agent_for, tool_turn
from tools.base import ToolBox, ToolContext
from tools.domain.config import Config, HostConfig, lab_config
from tools.hosts import HostPool
from tools.registry import all_tools

HUGE = "x" * 2_000_000  # 2 MB where a short string belongs
TODO = {"id": "a", "content": "sweep the baseline", "status": "pending", "priority": "high"}


def todo(**changes: Any) -> dict[str, Any]:
    return {**TODO, **changes}


# (tool, input, a phrase the error must contain)
ROWS: list[tuple[str, Any, str]] = [
    # the call itself
    ("frobnicate", {}, "unknown tool 'frobnicate'; known tools:"),
    ("bash", "ls -la", "Input should be a valid dictionary"),
    ("bash", None, "Input should be a valid dictionary"),
    ("todoread", {"verbose": True}, "verbose: Extra inputs are not permitted"),
    # todowrite: types, missing and extra fields, rules, sizes
    ("todowrite", {}, "todos: Field required"),
    ("todowrite", {"todos": "buy milk"}, "todos: Input should be a valid list"),
    ("todowrite", {"todos": [], "mode": "append"}, "mode: Extra inputs are not permitted"),
    ("todowrite", {"todos": [{"id": "a", "content": "x"}]}, "todos.0.status: Field required"),
    ("todowrite", {"todos": [todo(status="done")]}, "todos.0.status: Input should be 'pending'"),
    ("todowrite", {"todos": [todo(priority="urgent")]}, "todos.0.priority: Input should be"),
    ("todowrite", {"todos": [todo(id=5)]}, "todos.0.id: Input should be a valid string"),
    ("todowrite", {"todos": [todo(content="   ")]}, "todos.0.content: Value error, must not be"),
    (
        "todowrite",
        {"todos": [todo(content=HUGE)]},
        "todos.0.content has 2000000 characters, at most 500",
    ),
    ("todowrite", {"todos": [todo(owner="me")]}, "todos.0.owner: Extra inputs are not permitted"),
    (
        "todowrite",
        {"todos": [todo(status="in_progress"), todo(id="b", status="in_progress")]},
        "at most one item may be in_progress, got 2: a, b",
    ),
    ("todowrite", {"todos": [todo(), todo()]}, "ids must be unique, repeated: a"),
    # bash
    ("bash", {}, "command: Field required"),
    ("bash", {"command": ["ls", "-la"]}, "command: Input should be a valid string"),
    ("bash", {"command": "   "}, "empty command"),
    ("bash", {"command": "true", "timeout_s": -5}, "timeout_s: Input should be greater than 0"),
    ("bash", {"command": "true", "timeout_s": "soon"}, "timeout_s: Input should be a valid number"),
    ("bash", {"command": "true", "host": "gpu-9"}, "unknown host 'gpu-9'"),
    ("bash", {"command": "true", "sudo": True}, "sudo: Extra inputs are not permitted"),
    ("bash", {"command": "echo " + HUGE}, "Argument list too long"),
    ("bash", {"command": "cd /tmp; rm -rf ~"}, "refused by the destructive-command guard"),
    # read_log
    ("read_log", {}, "give either path or server"),
    ("read_log", {"path": "a.log", "server": "server"}, "give either path or server"),
    ("read_log", {"server": "ghost"}, "no server named 'ghost' in this run"),
    ("read_log", {"path": "a.log", "mode": "head"}, "mode: Input should be 'tail', 'grep'"),
    ("read_log", {"path": "a.log", "lines": 10**9}, "lines: Input should be less than or equal"),
    ("read_log", {"path": "/proc/version", "mode": "grep"}, "mode grep needs a pattern"),
    ("read_log", {"path": "no/such.log"}, "no/such.log"),
    # start_server: names, flags, ports
    ("start_server", {"name": "x; rm -rf /"}, "bad server name 'x; rm -rf /'"),
    ("start_server", {"name": "$(reboot)"}, "bad server name '$(reboot)'"),
    ("start_server", {"name": HUGE}, "bad server name"),
    ("start_server", {"flags": ["--tp", 8]}, "flags: Input should be a valid dictionary"),
    ("start_server", {"flags": {"tp": 8}}, "bad flag name 'tp'"),
    ("start_server", {"flags": {"--tp; reboot": 8}}, "bad flag name '--tp; reboot'"),
    ("start_server", {"flags": {"--port": 8080}}, "set the port with the `port` field"),
    ("start_server", {"port": 70000}, "port: Input should be less than or equal to 65535"),
    ("start_server", {"port": "auto"}, "port: Input should be a valid integer"),
    ("start_server", {"host": "gpu-9"}, "unknown host 'gpu-9'"),
    # kill_server / run_benchmark / compare / recommend: things that do not exist
    ("kill_server", {"name": "ghost"}, "no server named 'ghost' in this run"),
    ("kill_server", {"name": 42}, "name: Input should be a valid string"),
    ("run_benchmark", {"server": "ghost"}, "no running server named 'ghost'"),
    ("run_benchmark", {}, "no server is running in this run"),
    ("run_benchmark", {"concurrency": [0, -3]}, "concurrency levels must be 1.."),
    ("run_benchmark", {"concurrency": "all"}, "concurrency: Input should be a valid list"),
    ("run_benchmark", {"server": "s", "url": "http://x"}, "give `server` or `url`, not both"),
    ("compare", {"results": ["b001"]}, "results: List should have at least 2 items"),
    ("compare", {"results": ["b001", "b002"]}, "b001"),
    ("recommend", {"config": {}}, "no benchmark in this run yet"),
    # files: paths that escape the workdir
    ("put_file", {"local_path": "nope.txt", "remote_path": "x"}, "local file"),
    ("put_file", {"local_path": "events.jsonl", "remote_path": "../../etc/cron.d/x"}, "outside"),
    ("get_file", {"remote_path": "/etc/shadow"}, "/etc/shadow is outside the workdir"),
    ("get_file", {"remote_path": "a/../../../root/.ssh/id_rsa"}, "is outside the workdir"),
    # jobs
    ("start_job", {"name": "$(reboot)", "command": "sleep 1"}, "bad job name '$(reboot)'"),
    ("start_job", {"name": "a b", "command": "sleep 1"}, "bad job name 'a b'"),
    ("start_job", {"name": "wipe", "command": "mkfs.ext4 /dev/sda1"}, "destructive-command guard"),
    ("start_job", {"name": "j"}, "command: Field required"),
    ("job_status", {"name": "ghost"}, "no job named 'ghost' in this run"),
    ("stop_job", {"name": "`reboot`"}, "no job named '`reboot`' in this run"),
]


@pytest.fixture
async def ctx(tmp_path: Path) -> AsyncIterator[ToolContext]:
    lab = lab_config(time_scale=50, port=free_port())
    config = Config(
        hosts=[HostConfig(name="local", workdir=str(tmp_path / "work"))],
        server=lab.server,
        search=lab.search,
    )
    run = Run.create(tmp_path / "runs", "bad")
    run.append("run_started", goal="g", config=config.model_dump(mode="json"))
    context = ToolContext(run=run, config=config, hosts=HostPool(config))
    yield context
    await context.hosts.close()
    run.close()


async def test_table_has_enough_rows() -> None:
    assert len(ROWS) >= 30 and len({json.dumps(r[:2], default=str) for r in ROWS}) == len(ROWS)


@pytest.mark.parametrize(
    ("tool", "inp", "phrase"), ROWS, ids=[f"{r[0]}-{i}" for i, r in enumerate(ROWS)]
)
async def test_malformed_call_is_a_clear_error(
    ctx: ToolContext, tool: str, inp: Any, phrase: str
) -> None:
    box = ToolBox(all_tools())
    result, _ = await box.call(ctx, tool, inp)
    assert result.is_error, result.text[:300]
    assert phrase in result.text, result.text[:300]
    assert len(result.text) < 2_000, "an error must stay short, even for a huge input"
    assert "Traceback" not in result.text and " failed: " not in result.text  # no tool crash
    assert ctx.run.state.servers == {} and ctx.run.state.jobs == {}  # nothing was started


async def test_shell_metacharacters_in_flag_values_are_never_run(
    ctx: ToolContext, tmp_path: Path
) -> None:
    """A flag value is one argv word: `$(...)`, `;` and backticks reach the server verbatim."""
    marker = tmp_path / "pwned"
    box = ToolBox(all_tools())
    flags = {
        "--attention-backend": f"x; touch {marker}",
        "--model-path": f"$(touch {marker})",
        "--frobnicate": f"`touch {marker}`",
    }
    result, _ = await box.call(ctx, "start_server", {"flags": flags})
    # the engine's own flag check refuses the line before any launch (tools/servers/flagcheck.py)
    assert result.is_error and "refused before launch" in result.text
    assert "x; touch" in result.text
    assert not marker.exists()
    assert ctx.run.state.servers == {}
    # a value the engine accepts is launched - as one argv word, never run by the shell
    result, _ = await box.call(
        ctx, "start_server", {"flags": {"--model-path": flags["--model-path"]}}
    )
    assert not result.is_error, result.text
    assert not marker.exists()
    await box.call(ctx, "kill_server", {})


async def test_the_loop_goes_on_after_every_bad_call(make_run: Any) -> None:
    """Bad calls through the real loop: each gets an is_error result, then a good call works."""
    run, config = make_run()
    bad = [
        (tool, inp) for tool, inp, _ in ROWS if tool in ("todowrite", "frobnicate", "kill_server")
    ]
    turns = [tool_turn(call, step=i) for i, call in enumerate(bad)]
    turns.append(tool_turn(("todowrite", {"todos": [TODO]}), step=len(bad)))
    code = await agent_for(run, config, ScriptedBrain(turns)).run_loop()
    assert code == 0
    events = read_events(run.events_path).events
    results = [e for e in events if e["type"] == "tool_result"]
    assert [r["is_error"] for r in results] == [True] * len(bad) + [False]
    assert run.state.todos == [TODO] and run.state.finished is not None
    assert run.state.finished["status"] == "finished"
    assert json.loads((run.path / "todos.json").read_text()) == {"todos": [TODO]}
