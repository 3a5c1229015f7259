"""The bash and read_log tools, on the local host and over SSH."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tools.base import ToolBox, ToolContext
from tools.bash import Bash
from tools.domain.config import HostConfig
from tools.read_log import ReadLog

pytest_plugins = ["tests.ssh_fixtures"]
BOX = ToolBox([Bash(), ReadLog()])


@pytest.fixture
def ctx(host_ctx: ToolContext) -> ToolContext:
    return host_ctx


async def call(ctx: ToolContext, name: str, **inp: object) -> tuple[str, bool, dict[str, object]]:
    result, _ = await BOX.call(ctx, name, inp)
    return result.text, result.is_error, result.data


async def test_bash_reports_exit_code_duration_and_both_streams(ctx: ToolContext) -> None:
    text, is_error, data = await call(ctx, "bash", command="echo out; echo oops >&2; exit 4")
    assert not is_error and data["exit_code"] == 4 and data["timed_out"] is False
    assert text.splitlines()[0].startswith("exit 4 in ")
    assert "out\n[stderr]\noops" in text


async def test_bash_strips_escapes_and_replaces_bad_utf8(ctx: ToolContext) -> None:
    text, _, _ = await call(
        ctx, "bash", command=r"printf '\033[31mred\033[0m \xff\xfe ok\r\nbar 10%%\rbar 100%%\n\a'"
    )
    body = text.split("\n", 1)[1]
    assert body == "red \ufffd\ufffd ok\nbar 100%"


async def test_bash_timeout_kills_and_says_so(ctx: ToolContext) -> None:
    text, is_error, data = await call(ctx, "bash", command="echo started; sleep 30", timeout_s=1)
    assert is_error and data["timed_out"] is True and data["exit_code"] is None
    assert "timed out after 1 s" in text and "killed" in text and "started" in text


async def test_long_output_is_cut_and_saved_whole(ctx: ToolContext) -> None:
    text, _, data = await call(ctx, "bash", command="seq 1 100000")
    assert len(text) < 13_000 and "characters" in text and "cut" in text
    lines = text.splitlines()
    assert lines[1] == "1" and lines[-1] == "100000"
    saved = Path(str(data["output_path"]))
    assert saved.parent == ctx.run.path / "outputs"
    assert saved.read_text().splitlines() == [str(i) for i in range(1, 100001)]


async def test_destructive_command_is_refused_and_not_run(ctx: ToolContext) -> None:
    text, is_error, _ = await call(ctx, "bash", command="touch marker && rm -rf ~")
    assert is_error and "destructive-command guard" in text and "[guard] allow" in text
    _, _, data = await call(ctx, "bash", command="test -e marker")
    assert data["exit_code"] == 1


async def test_timeout_over_the_limit_is_an_input_error(ctx: ToolContext) -> None:
    text, is_error, _ = await call(ctx, "bash", command="true", timeout_s=4000)
    assert is_error and "timeout_s" in text


async def test_unknown_host_names_the_known_ones(ctx: ToolContext) -> None:
    text, is_error, _ = await call(ctx, "bash", command="true", host="nope")
    assert is_error and "unknown host 'nope'" in text


async def test_read_log_tail_grep_range(ctx: ToolContext) -> None:
    await call(ctx, "bash", command="for i in $(seq 1 5000); do echo line $i; done > app.log")
    text, _, _ = await call(ctx, "read_log", path="app.log", lines=2)
    assert text.splitlines()[1:] == ["line 4999", "line 5000"] and "last 2 lines" in text
    text, _, _ = await call(
        ctx, "read_log", path="app.log", mode="grep", pattern="line 250$", context=1
    )
    assert text.splitlines()[1:] == ["249-line 249", "250:line 250", "251-line 251"]
    assert "1 matching lines" in text
    text, _, _ = await call(ctx, "read_log", path="app.log", mode="range", offset=-10, length=10)
    assert text.splitlines()[1:] == ["line 5000"] and "(48893 bytes): bytes 48883-48893" in text
    text, is_error, _ = await call(ctx, "read_log", path="app.log", mode="grep")
    assert is_error and "pattern" in text


async def test_read_log_errors_are_one_line(ctx: ToolContext) -> None:
    text, is_error, _ = await call(ctx, "read_log", path="missing.log")
    assert is_error and "missing.log" in text and "\n" not in text
    text, is_error, _ = await call(ctx, "read_log", server="server")
    assert is_error and "no server named 'server'" in text
    text, is_error, _ = await call(ctx, "read_log")
    assert is_error and "either path or server" in text


async def test_read_log_of_a_multi_gigabyte_file_reads_only_what_it_shows(
    ctx: ToolContext,
) -> None:
    # a sparse 4 GiB file: reading it whole would take seconds and gigabytes
    await call(
        ctx, "bash", command="truncate -s 4G huge.log && printf 'x\\nlast line\\n' >> huge.log"
    )
    text, is_error, data = await call(ctx, "read_log", path="huge.log", lines=1)
    assert not is_error and text.splitlines()[1:] == ["last line"]
    assert data["size"] == 4 * 1024**3 + 12
    text, _, _ = await call(ctx, "read_log", path="huge.log", mode="range", offset=-10, length=10)
    assert text.splitlines()[1:] == ["last line"]


async def test_each_call_names_its_host(asyncssh_server: Any, tmp_path: Path) -> None:
    from tests.ssh_fixtures import close_context, make_context

    local = HostConfig(name="here", workdir=str(tmp_path / "here"))
    remote = asyncssh_server.host_config("there", workdir=str(tmp_path / "there"))
    ctx = make_context(tmp_path / "runs", local, extra_hosts=[remote])
    try:
        _, _, here = await call(ctx, "bash", command="pwd")
        text, _, there = await call(ctx, "bash", command="pwd", host="there")
        assert here["host"] == "here" and there["host"] == "there"
        assert text.endswith(str(tmp_path / "there"))
    finally:
        await close_context(ctx)
