"""put_file / get_file: copy a file to a host or back (SFTP over the SSH connection).

Paths on the host are confined to its workdir (relative paths are taken from there); an absolute
path elsewhere must lie under one of the host's `allow_paths`. Local paths are confined to the run
folder (relative paths are taken from there, so what a campaign fetches stays with the run) or to
`[files] allow_local`. Both ends are compared resolved, symlinks followed.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from pydantic import Field

from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult, host_for
from tools.guard.context import RUN_WRITABLE
from tools.hosts import Host, HostError

MAX_BYTES = 2 * 1024**3  # a campaign moves scripts and results, not model weights


class PutFileInput(ToolInput):
    local_path: str = Field(description="File on this machine (relative: to the run folder)")
    remote_path: str = Field(description="Destination on the host (relative: to its workdir)")
    host: str | None = Field(default=None, description="Host name; default: the server's host")


class GetFileInput(ToolInput):
    remote_path: str = Field(description="File on the host (relative: to its workdir)")
    local_path: str | None = Field(
        default=None,
        description="Where to save it (relative: to the run folder); default outputs/NAME",
    )
    host: str | None = Field(default=None, description="Host name; default: the server's host")


async def confine(host: Host, path: str) -> str:
    """The absolute path on the host, symlinks followed, if the workdir or allow_paths hold it:
    comparing the text let a symlink inside the workdir lead anywhere."""
    workdir, full, *allowed = await host.realpaths(
        [await host.workdir(), path, *host.config.allow_paths]
    )
    allowed.append(workdir)
    if not any(_under(full, a) for a in allowed):
        plain = full == posixpath.normpath(posixpath.join(workdir, path))
        shown = path if plain else f"{path} (really {full})"  # a symlink led there
        raise ToolError(
            f"{shown} is outside the workdir of host {host.name} ({workdir}); "
            "add its folder to allow_paths for that host in agent.toml to permit it"
        )
    return full


def local(ctx: ToolContext, path: str, write: bool = False) -> Path:
    """A path on this machine, symlinks followed, inside the run folder (relative paths are
    taken from there) or one of [files] allow_local. One to `write` (get_file) may be in the run
    folder's outputs/ or logs/ only: the rest is the run's control (events, todos, inbox,
    results, config, the lock: issue 47), which no model action writes."""
    p = Path(path).expanduser()
    full = (p if p.is_absolute() else ctx.run.path / p).resolve()
    run = ctx.run.path.resolve()
    extra = [Path(a).expanduser().resolve() for a in ctx.config.files.allow_local]
    if not any(_under(str(full), str(a)) for a in [run, *extra]):
        raise ToolError(
            f"{path} is outside the run folder ({ctx.run.path}) on this machine; the user can "
            "add its folder to [files] allow_local in agent.toml to permit it"
        )
    own = [run / d for d in RUN_WRITABLE]
    in_run = _under(str(full), str(run)) and not any(_under(str(full), str(a)) for a in extra)
    if write and in_run and not any(_inside(full, d) for d in own):
        raise ToolError(
            f"{path} is one of the run's own files; get_file saves into the run folder's "
            "outputs/ or logs/ (the default: outputs/NAME)"
        )
    return full


def _inside(path: Path, folder: Path) -> bool:
    """Strictly inside a real folder (the folder itself, or a link in its place, is not)."""
    return folder.is_dir() and not folder.is_symlink() and str(path).startswith(f"{folder}/")


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} GiB"


class PutFile(Tool):
    name = "put_file"
    Input = PutFileInput

    async def run(self, ctx: ToolContext, inp: PutFileInput) -> ToolResult:
        src = local(ctx, inp.local_path)
        if not src.is_file():
            raise ToolError(f"local file {src} not found")
        size = src.stat().st_size
        if size > MAX_BYTES:
            raise ToolError(f"{src} is {_size(size)}; put_file moves at most {_size(MAX_BYTES)}")
        host = host_for(ctx, inp.host)
        try:
            dst = await confine(host, inp.remote_path)
            written = await host.put(str(src), dst)
        except HostError as err:
            raise ToolError(str(err)) from None
        return ToolResult(
            text=f"copied {src} -> {host.name}:{dst} ({_size(written)}, size checked)",
            data={"host": host.name, "remote_path": dst, "bytes": written},
        )


class GetFile(Tool):
    name = "get_file"
    Input = GetFileInput

    async def run(self, ctx: ToolContext, inp: GetFileInput) -> ToolResult:
        host = host_for(ctx, inp.host)
        try:
            src = await confine(host, inp.remote_path)
            size = await host.size(src)
            if size > MAX_BYTES:
                raise ToolError(
                    f"{src} is {_size(size)}; get_file moves at most {_size(MAX_BYTES)}"
                )
            dst = local(ctx, inp.local_path or f"outputs/{posixpath.basename(src)}", write=True)
            got = await host.get(src, str(dst))
        except HostError as err:
            raise ToolError(str(err)) from None
        return ToolResult(
            text=f"copied {host.name}:{src} -> {dst} ({_size(got)}, size checked)",
            data={"host": host.name, "local_path": str(dst), "bytes": got},
        )
