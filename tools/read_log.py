"""read_log: the tail, the grep matches or a byte range of a file on a host, without reading the
whole file (server logs reach gigabytes)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult, host_for
from tools.guard import Context, boundary
from tools.hosts import Host, HostError
from tools.hosts.output import clean, cut, save_full
from tools.launched import server_record

OUTPUT_LIMIT = 12_000
MAX_MATCHES = 200


class ReadLogInput(ToolInput):
    path: str | None = Field(
        default=None, description="File on the host (relative: to its workdir)"
    )
    server: str | None = Field(default=None, description="Read this server's log instead of a path")
    host: str | None = Field(default=None, description="Host name; default: the server's host")
    mode: Literal["tail", "grep", "range"] = Field(
        default="tail", description="tail: last lines; grep: matches of pattern; range: bytes"
    )
    lines: int = Field(default=100, ge=1, le=5000, description="tail: how many lines")
    pattern: str | None = Field(default=None, description="grep: an extended regex (grep -E)")
    context: int = Field(default=2, ge=0, le=50, description="grep: lines around each match")
    offset: int | None = Field(
        default=None, description="range: first byte (negative: from the end); default 0"
    )
    length: int = Field(default=16384, ge=1, le=1_048_576, description="range: bytes to read")


class ReadLog(Tool):
    name = "read_log"
    Input = ReadLogInput

    async def run(self, ctx: ToolContext, inp: ReadLogInput) -> ToolResult:
        path, host_name = self._target(ctx, inp)
        host = host_for(ctx, host_name)
        try:
            if inp.path is not None:
                await _not_a_secret(host, path)
            size = await host.size(path)
            if inp.mode == "tail":
                body = await host.tail(path, inp.lines)
                what = f"last {len(body.splitlines())} lines"
            elif inp.mode == "grep":
                if not inp.pattern:
                    raise ToolError("mode grep needs a pattern")
                body = await host.grep(path, inp.pattern, inp.context, MAX_MATCHES)
                hits = sum(1 for line in body.splitlines() if _is_match(line))
                what = f"{hits} matching lines of /{inp.pattern}/" + (
                    f" (first {MAX_MATCHES})" if hits >= MAX_MATCHES else ""
                )
            else:
                start = inp.offset or 0
                start = max(0, size + start) if start < 0 else start
                data = await host.read_bytes(path, start, inp.length)
                body = data.decode("utf-8", errors="replace")
                what = f"bytes {start}-{start + len(data)}"
        except HostError as err:
            raise ToolError(str(err)) from None
        body = clean(body)
        shown, was_cut = cut(body, OUTPUT_LIMIT)
        head = f"{path} on {host.name} ({size} bytes): {what}"
        data_out: dict[str, object] = {"path": path, "host": host.name, "size": size}
        if inp.mode == "grep":  # the matching lines themselves, typed, for code that reads them
            data_out["matches"] = [
                line.partition(":")[2] for line in body.splitlines() if _is_match(line)
            ]
        if was_cut:
            data_out["output_path"] = save_full(ctx, "read_log", body)
            head += f"; cut, full text: {data_out['output_path']}"
        return ToolResult(
            text=f"{head}\n{shown}".rstrip("\n") if shown else head + "\n(nothing)", data=data_out
        )

    def _target(self, ctx: ToolContext, inp: ReadLogInput) -> tuple[str, str | None]:
        if (inp.path is None) == (inp.server is None):
            raise ToolError("give either path or server")
        if inp.path is not None:
            return inp.path, inp.host
        record = server_record(ctx, inp.server or "")
        if record is None:
            known = ", ".join(sorted(ctx.run.state.servers)) or "none running"
            raise ToolError(f"no server named {inp.server!r} in this run (servers: {known})")
        return str(record["log"]), inp.host or record.get("host")


async def _not_a_secret(host: Host, path: str) -> None:
    """A credential, a key or a process's environment is not read_log's to read (issue 47):
    the path with its links followed, judged as the bash tool's boundary judges one
    (tools/guard/boundary.py)."""
    [real] = await host.realpaths([path])
    context = Context(workdir=await host.workdir(), home=await host.home())
    if boundary.secret(real, context) or boundary.PROC_SECRET.search(real):
        raise ToolError(
            f"{path} is a credential, a key or a process's environment: read_log does not read "
            "those (the agent's secrets stay outside the model's reach)"
        )


def _is_match(line: str) -> bool:
    """grep -n prints 'N:text' for a match and 'N-text' for context."""
    number, _, _ = line.partition(":")
    return number.isdigit()
