"""start_job / job_status / stop_job: detached, logged, progress from the log, found after a
restart of the agent."""

from __future__ import annotations

import asyncio
import time

from state.events import read_events
from state.run import Run
from tools.base import ToolBox, ToolContext
from tools.jobs import JobStatus, StartJob, StopJob
from tools.servers.log_progress import parse_line

pytest_plugins = ["tests.ssh_fixtures"]
BOX = ToolBox([StartJob(), JobStatus(), StopJob()])


async def call(ctx: ToolContext, tool: str, **inp: object) -> tuple[str, bool, dict[str, object]]:
    result, _ = await BOX.call(ctx, tool, inp)
    return result.text, result.is_error, result.data


async def wait_ended(
    ctx: ToolContext, name: str, within: float = 15
) -> tuple[str, dict[str, object]]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        text, is_error, data = await call(ctx, "job_status", name=name)
        assert not is_error, text
        if not data["running"]:
            return text, data
        await asyncio.sleep(0.2)
    raise AssertionError(f"job {name} still running after {within} s")


async def wait_said(
    ctx: ToolContext, name: str, words: str, within: float = 30
) -> tuple[str, dict[str, object]]:
    """job_status once the job's log says `words` (a job on a loaded box starts when it starts:
    a fixed sleep raced it)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        text, is_error, data = await call(ctx, "job_status", name=name)
        assert not is_error, text
        if words in text:
            return text, data
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {name} never said {words!r} in {within} s")


async def test_job_runs_detached_shows_progress_and_exit(host_ctx: ToolContext) -> None:
    # half-way it waits for the test: it is running, with progress, when it is looked at
    cmd = (
        'for i in 1 2 3; do echo "step $i/6 (2.0 it/s)"; done; '
        "while [ ! -e go ]; do sleep 0.05; done; "
        'for i in 4 5 6; do echo "step $i/6 (2.0 it/s)"; done'
    )
    text, is_error, data = await call(host_ctx, "start_job", name="gen", command=cmd)
    assert not is_error, text
    assert "started" in text and data["pid"]
    text, data = await wait_said(host_ctx, "gen", "step 3/6")
    assert data["running"] is True and "running for" in text
    assert (
        "progress: step" in text
        and "rate 2.0 it/s" in text
        and 0 < float(str(data["fraction"])) < 1
    )
    assert (await host_ctx.hosts.get().run("touch go")).exit_code == 0  # in the job's workdir
    text, data = await wait_ended(host_ctx, "gen")
    assert "finished OK" in text and data["exit_code"] == 0 and data["fraction"] == 1.0
    assert "step 6/6" in text
    ended = [e for e in read_events(host_ctx.run.events_path).events if e["type"] == "job_ended"]
    assert [e["exit_code"] for e in ended] == [0]
    await call(host_ctx, "job_status", name="gen")  # asking again logs nothing new
    assert (
        len([e for e in read_events(host_ctx.run.events_path).events if e["type"] == "job_ended"])
        == 1
    )


async def test_failed_job_reports_its_exit_code(host_ctx: ToolContext) -> None:
    await call(host_ctx, "start_job", name="bad", command="echo boom >&2; exit 3")
    text, data = await wait_ended(host_ctx, "bad")
    assert "failed (exit 3)" in text and data["exit_code"] == 3 and "boom" in text


async def test_stop_job_kills_a_job_that_ignores_sigterm(
    host_ctx: ToolContext, monkeypatch: object
) -> None:
    import tools.jobs

    tools.jobs.STOP_GRACE_S = 1.0
    # allowed outright by the supervisor's rules (each command: a line with a background job is
    # not certain otherwise) on a host without the sandbox: in the sandbox - and in the mask a
    # rule for code runs in where there is one (trap runs shell text) - the job's tree would go
    # with bwrap at the first SIGTERM, trap or not (tests/test_guard_sandbox.py)
    host_ctx.config.guard.allow = ["Bash(trap:*)", "Bash(echo:*)", "Bash(sleep:*)", "Bash(wait)"]
    host_ctx.config.guard.sandbox = False
    try:
        cmd = "trap '' TERM; echo ready; sleep 60 & wait; sleep 60"
        await call(host_ctx, "start_job", name="stubborn", command=cmd)
        await wait_said(host_ctx, "stubborn", "ready")  # its trap is set: TERM cannot end it
        text, is_error, data = await call(host_ctx, "stop_job", name="stubborn")
        assert not is_error and data == {"forced": True, "gone": True}, text
        text, data = await wait_ended(host_ctx, "stubborn")
        assert "stopped" in text
        text, is_error, _ = await call(host_ctx, "stop_job", name="stubborn")
        assert "already ended" in text
    finally:
        tools.jobs.STOP_GRACE_S = 10.0
        host_ctx.config.guard.allow = []
        host_ctx.config.guard.sandbox = True


async def test_job_is_found_again_after_the_agent_restarts(host_ctx: ToolContext) -> None:
    await call(host_ctx, "start_job", name="long", command="sleep 1; echo done")
    text, is_error, _ = await call(host_ctx, "start_job", name="long", command="true")
    assert is_error and "already recorded as running" in text
    # the agent stops: its run and connections go away; the job does not
    path = host_ctx.run.path
    host_ctx.run.close()
    await host_ctx.hosts.close()
    host_ctx.run = Run.open(path)
    assert "long" in host_ctx.run.state.jobs
    text, _ = await wait_ended(host_ctx, "long")
    assert "finished OK" in text and "done" in text
    assert "long" not in host_ctx.run.state.jobs


async def test_unknown_job_names_the_running_ones(host_ctx: ToolContext) -> None:
    text, is_error, _ = await call(host_ctx, "job_status", name="nope")
    assert is_error and "no job named 'nope'" in text
    text, is_error, _ = await call(host_ctx, "start_job", name="bad name!", command="true")
    assert is_error and "bad job name" in text


def test_progress_lines_of_common_tools() -> None:
    tqdm = parse_line(" 45%|████▌     | 450/1000 [01:23<02:10, 5.41it/s]")
    assert tqdm and tqdm.fraction == 0.45 and tqdm.rate == "5.41 it/s" and tqdm.eta == "02:10"
    step = parse_line("step 120/500 loss=2.31 ETA 0:12:30")
    assert step and step.fraction == 0.24 and step.eta == "0:12:30"
    assert parse_line("2024/01/02 12:00:00 loading") is None
    assert parse_line("epoch done") is None
