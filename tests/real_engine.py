"""What the real-engine tests (test_real_llama.py, test_real_llama_cpp_python.py) share: the
tools they drive, a run whose server lives on this machine and is killed at the end, and a call
that returns what the model would read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.ssh_fixtures import close_context, free_port, make_context
from tools.base import ToolBox, ToolContext
from tools.domain.config import HostConfig
from tools.kill_server import KillServer
from tools.run_benchmark import RunBenchmark
from tools.start_server import StartServer

BOX = ToolBox([StartServer(), KillServer(), RunBenchmark()])


@asynccontextmanager
async def local_run(
    tmp_path: Path, engine: str, command: str, ready_timeout_s: float = 60
) -> AsyncIterator[ToolContext]:
    """A fresh run under tmp_path whose server (`command`, on a free port) is local; whatever
    it started is killed and verified gone on the way out."""
    context = make_context(
        tmp_path / "runs",
        HostConfig(name="local", workdir=str(tmp_path / "work")),
        engine=engine,
        command=command,
        port=free_port(),
        ready_timeout_s=ready_timeout_s,
        kill_timeout_s=10,
    )
    try:
        yield context
    finally:
        await BOX.call(context, "kill_server", {})
        await close_context(context)


async def call(ctx: ToolContext, tool: str, **inp: Any) -> tuple[str, bool, dict[str, Any]]:
    """(the tool's text, is_error, its data)."""
    result, _ = await BOX.call(ctx, tool, inp)
    return result.text, result.is_error, result.data
