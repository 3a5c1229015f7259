"""put_file / get_file: round trips with sizes, and paths confined to the workdir."""

from __future__ import annotations

import os
from pathlib import Path

from tools.base import ToolBox, ToolContext
from tools.domain.config import HostConfig
from tools.files import GetFile, PutFile

pytest_plugins = ["tests.ssh_fixtures"]
BOX = ToolBox([PutFile(), GetFile()])


async def call(ctx: ToolContext, name: str, **inp: object) -> tuple[str, bool, dict[str, object]]:
    result, _ = await BOX.call(ctx, name, inp)
    return result.text, result.is_error, result.data


async def test_put_then_get_round_trip(host_ctx: ToolContext) -> None:
    src = host_ctx.run.path / "bench.py"  # this machine's end is the run folder
    src.write_bytes(os.urandom(123_457))
    text, is_error, data = await call(
        host_ctx, "put_file", local_path=str(src), remote_path="scripts/bench.py"
    )
    assert not is_error and data["bytes"] == 123_457 and "size checked" in text
    assert str(data["remote_path"]).endswith("/work/scripts/bench.py")
    text, is_error, data = await call(host_ctx, "get_file", remote_path="scripts/bench.py")
    assert not is_error, text
    fetched = Path(str(data["local_path"]))
    assert fetched == host_ctx.run.path / "outputs" / "bench.py"
    assert fetched.read_bytes() == src.read_bytes()


async def test_paths_outside_the_workdir_are_refused(host_ctx: ToolContext, tmp_path: Path) -> None:
    src = host_ctx.run.path / "x.txt"
    src.write_text("x")
    for remote in ("/etc/x.txt", "../escape.txt", "a/../../escape.txt"):
        text, is_error, _ = await call(
            host_ctx, "put_file", local_path=str(src), remote_path=remote
        )
        assert is_error and "outside the workdir" in text and "allow_paths" in text, remote
    assert not (tmp_path / "escape.txt").exists()
    text, is_error, _ = await call(host_ctx, "get_file", remote_path="/etc/hostname")
    assert is_error and "outside the workdir" in text


async def test_allow_paths_permit_an_absolute_folder(any_host: HostConfig, tmp_path: Path) -> None:
    from tests.ssh_fixtures import close_context, make_context

    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "result.json").write_text('{"ok": true}')
    host = any_host.model_copy(update={"allow_paths": [str(shared)]})
    ctx = make_context(tmp_path / "runs", host)
    try:
        text, is_error, data = await call(
            ctx,
            "get_file",
            remote_path=str(shared / "result.json"),
            local_path="outputs/remote.json",
        )
        assert not is_error, text
        assert Path(str(data["local_path"])) == ctx.run.path / "outputs/remote.json"
        assert (ctx.run.path / "outputs/remote.json").read_text() == '{"ok": true}'
        # the run's own files are not get_file's to write (issue 47)
        for own in ("results/remote.json", "events.jsonl", "inbox/m.json", "todos.json"):
            text, is_error, _ = await call(
                ctx, "get_file", remote_path=str(shared / "result.json"), local_path=own
            )
            assert is_error and "one of the run's own files" in text, (own, text)
        assert not (ctx.run.path / "results/remote.json").exists()
        assert not (ctx.run.path / "inbox/m.json").exists()
    finally:
        await close_context(ctx)


async def test_missing_files_are_one_line_errors(host_ctx: ToolContext) -> None:
    text, is_error, _ = await call(
        host_ctx, "put_file", local_path="nonexistent/f", remote_path="f"
    )
    assert is_error and "not found" in text and "\n" not in text
    text, is_error, _ = await call(host_ctx, "get_file", remote_path="nothing-here.txt")
    assert is_error and "nothing-here.txt" in text and "\n" not in text
