"""The tool calls of one turn, run concurrently where they are independent.

Which calls may overlap: each call has a footprint - what it reads and what it changes (the todo
list, a server by name, a host, a job, the results). A call waits for every earlier call of the
turn whose footprint conflicts with its own; the rest run at once. So reads (todoread, read_log,
get_file, job_status, compare) and calls on different hosts or different servers overlap, while
mutating calls on the same server (or host) stay serial, in the order the model gave them.

The event log stays in call order: each call's events (tool_call, what the tool logged, its
tool_result) are contiguous, calls in the order of the turn. A call whose predecessors are still
running keeps its events in a buffer and writes them when its turn comes, so a replay (one call
at a time, or concurrently) writes the same log. The cost: a call sees its own buffered events in
the run's state only once they are written - a call that depends on another waits until that one
is written. A graceful stop writes every buffer (in call order); a hard kill loses the buffers of
calls that had not reached the head of the line.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from state.events import Event
from state.run import Run
from tools.base import ToolContext, ToolResult
from tools.domain.config import Config

EVERYTHING = "*"


@dataclass(frozen=True)
class Footprint:
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()
    adds: frozenset[str] = frozenset()  # appended to (results): ordered only against its readers

    def conflicts(self, later: Footprint) -> bool:
        if EVERYTHING in self.writes or EVERYTHING in later.writes:
            return True
        touched = later.reads | later.writes | later.adds
        return bool(
            self.writes & touched
            or later.writes & (self.reads | self.adds)
            or self.adds & later.reads
            or later.adds & self.reads
        )


def footprint(name: str, inp: Any, config: Config) -> Footprint:
    """What a call reads and changes, from its name and raw input (invalid input: harmless)."""
    args = inp if isinstance(inp, dict) else {}
    host = f"host:{args.get('host') or config.server.host}"
    server = f"server:{args.get('name') or args.get('server') or config.server.name}"
    job = f"job:{args.get('name')}"
    port = args.get("port") or config.server.port
    one = frozenset
    by_name: dict[str, Footprint] = {
        "todoread": Footprint(reads=one({"todos"})),
        "todowrite": Footprint(writes=one({"todos"})),
        "read_log": Footprint(reads=one({server if args.get("server") else host})),
        "get_file": Footprint(reads=one({host})),
        "job_status": Footprint(reads=one({job})),
        "compare": Footprint(reads=one({"results"})),
        "bash": Footprint(writes=one({host})),
        "put_file": Footprint(writes=one({host})),
        "start_job": Footprint(writes=one({host, job})),
        "stop_job": Footprint(writes=one({job})),
        "start_server": Footprint(writes=one({server, f"port:{host}:{port}"})),
        "run_benchmark": Footprint(writes=one({server}), adds=one({"results"})),
        # a trial on a box of the fleet: its own server, placed by Ray; independent trials overlap
        "run_trial": Footprint(adds=one({"results"})),
        "recommend": Footprint(reads=one({"results"}), writes=one({"recommendation"})),
        # both servers measured in turn: neither may change under it
        "duet": Footprint(
            writes=one({f"server:{args.get('a')}", f"server:{args.get('b')}"}),
            adds=one({"results"}),
        ),
    }
    if name == "kill_server" and args.get("name"):
        return Footprint(writes=one({f"server:{args['name']}"}))
    # kill_server of every server, an unknown tool: alone, after everything before it
    return by_name.get(name, Footprint(writes=one({EVERYTHING})))


class CallRun(Run):
    """One call's view of the run: its events go to the log when the call is at the head of the
    line, into a buffer before that. Everything else is the run itself."""

    def __init__(self, run: Run, line: Line, index: int) -> None:  # no Run.__init__: a view
        self.run, self.line, self.index = run, line, index
        self.buffer: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:  # path, state, log, ...: the run's own
        return getattr(self.run, name)

    def append(self, type: str, **data: Any) -> Event:
        if self.line.head == self.index:
            return self.run.append(type, **data)
        self.buffer.append((type, data))
        return {"seq": 0, "ts": datetime.now(UTC).isoformat(), "type": type, **data}

    def flush(self) -> None:
        for type_, data in self.buffer:
            self.run.append(type_, **data)
        self.buffer.clear()


class Line:
    """Calls take turns at writing: the head writes straight through; when it ends, the next
    calls' buffers are written, in order, up to the first call still running."""

    def __init__(self, run: Run, n: int) -> None:
        self.head = 0
        self.views = [CallRun(run, self, i) for i in range(n)]
        self.ended = [False] * n
        self.written = [asyncio.Event() for _ in range(n)]  # all of call i's events are logged

    def end(self, index: int) -> None:
        self.ended[index] = True
        while self.head < len(self.views) and self.ended[self.head]:
            self.views[self.head].flush()
            self.written[self.head].set()
            self.head += 1
            if self.head < len(self.views):
                self.views[self.head].flush()  # it writes straight through from now on

    def flush_all(self) -> None:
        """After a stop: write what every call logged, so that no started server is forgotten."""
        for view in self.views[self.head :]:
            view.flush()
        self.head = len(self.views)


ToolCall = Callable[[ToolContext, dict[str, Any]], Awaitable[tuple[ToolResult, float]]]


async def run_batch(
    ctx: ToolContext, calls: list[dict[str, Any]], call: ToolCall
) -> list[tuple[ToolResult, float]]:
    """Run the turn's tool_use blocks; results in call order. `call(ctx, block)` runs one and logs
    its tool_call and tool_result through ctx.run."""
    prints = [footprint(b["name"], b["input"], ctx.config) for b in calls]
    line = Line(ctx.run, len(calls))

    async def one(i: int) -> tuple[ToolResult, float]:
        for j in range(i):
            if prints[j].conflicts(prints[i]):
                await line.written[j].wait()
        try:
            return await call(dataclasses.replace(ctx, run=line.views[i]), calls[i])
        finally:
            line.end(i)

    tasks = [asyncio.create_task(one(i)) for i in range(len(calls))]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        line.flush_all()
        raise
