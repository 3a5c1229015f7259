"""A hostile OpenAI-compatible engine on 127.0.0.1: a raw asyncio server that speaks just enough
HTTP/1.1 to be taken for one, then misbehaves the way a broken or overloaded engine does. For
tests/test_bench_deadlines*.py and benchmarks/chaos.py.

`mode` (a completion's behaviour; settable while it runs):
  ok            a whole stream: max_tokens token events, usage, [DONE] (chunked)
  slow_ok       the same, each token `gap_s` apart (the first `quick` completions at full speed:
                a level that shows its pace, then slows down)
  slow_first    SSE headers, then `first_s` of nothing, then a whole stream (a long queue)
  trickle_head  the status line, then one header byte every `gap_s`, never the blank line
  keepalive     SSE headers, then `: keepalive` comments every `gap_s`, forever
  past_max      token events every `gap_s`, forever (past max_tokens, never finishing)
  silent        reads the request, never answers (the connection stays open)
  chunk_lie     a chunk that says 1 MiB, then comments inside it every `gap_s`, forever
  chunk_short   a chunk whose size says fewer bytes than it carries (bad framing)
  length_lie    Content-Length 1 MB, a whole stream, then silence with the connection open
  junk_json     `data: {not json` after a token
  choices_5     `{"choices": 5}` messages, usage, [DONE]
  extra_choices messages of three choices (indexes 0, 0, 7) for an n=1 request, usage, [DONE]
  error_event   tokens, then `event: error` with an error message, then [DONE]
  no_done       tokens and usage, then the body ends: no [DONE]
  error_mid     tokens, then `data: {"error": ...}`, then usage and [DONE]
`models`: `ok` (a model list) or `trickle` (one body byte every `gap_s`); `info`: `none` (404)
or `trickle` (GET /server_info as the models trickle). /tokenize is 404 (prompts by words).
`healthy_first` n: the first n completions are served whole whatever the mode (a server that
passes readiness's test completion, then misbehaves under the benchmark).
`die_after` n: after n completions started, the server closes its socket and every connection
(an engine dying mid-level); `restart()`: the same, then listening again on the same port.
`oom_above` n: a completion that would make more than n run at once kills the server as out of
memory under load does (the process: `CUDA out of memory` on its output, then exit 1);
`max_num_seqs` n: at most n completions run at once, the rest wait their turn (an engine's cap
that makes it queue instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def token(i: int, finish: str | None = None) -> bytes:
    msg = {"choices": [{"index": 0, "text": f" t{i}", "finish_reason": finish}]}
    return b"data: " + json.dumps(msg, separators=(",", ":")).encode() + b"\n\n"


def usage(n: int) -> bytes:
    msg = {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": n}}
    return b"data: " + json.dumps(msg, separators=(",", ":")).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


@dataclass
class HostileServer:
    mode: str = "ok"
    gap_s: float = 0.05
    models: str = "ok"
    info: str = "none"
    die_after: int | None = None
    quick: int = 0  # slow_ok: completions served at full speed first
    healthy_first: int = 0  # completions served whole before the mode applies
    first_s: float = 0.0  # slow_first: seconds before the first token
    oom_above: int | None = None  # more completions at once than this: out of memory
    max_num_seqs: int | None = None  # completions run at once, at most (the rest queue)
    on_oom: Callable[[], None] | None = None  # the process's death (main); in a test: stop()
    running: int = 0  # completions running now
    seqs: asyncio.Semaphore | None = None  # max_num_seqs's turns, made on the first completion
    port: int = 0
    completions: int = 0  # completions started
    server: asyncio.Server | None = None
    writers: set[asyncio.StreamWriter] = field(default_factory=set)
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def open_connections(self) -> int:
        return sum(1 for w in self.writers if not w.is_closing())

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.url

    async def __aenter__(self) -> HostileServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Stop listening and drop every connection (what a dying engine does)."""
        if self.server is not None:
            self.server.close()
        for w in list(self.writers):
            with contextlib.suppress(Exception):
                w.transport.abort()
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)
        self.server = None

    async def restart(self, down_s: float) -> None:
        """Die, stay down `down_s`, come back on the same port."""
        await self.stop()
        await asyncio.sleep(down_s)
        self.die_after = None
        self.server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, reuse_address=True
        )

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        self.writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = json.loads(await reader.readexactly(length)) if length else {}
                if not await self._answer(method, path, body, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass  # stop() ends the handler (asyncio's server logs a cancelled one as an error)
        finally:
            self.writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.transport.abort()
            self.tasks.discard(task)

    async def _answer(
        self, method: str, path: str, body: dict[str, Any], w: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; False when the connection is done with."""
        if path.endswith("/v1/models"):
            data = json.dumps({"object": "list", "data": [{"id": "hostile"}]}).encode()
            return await self._small(w, data, self.models == "trickle")
        if path.endswith("/server_info") and self.info == "trickle":
            return await self._small(w, b'{"sim": {"time_scale": 1}}' + b" " * 4000, True)
        if not path.endswith("/completions"):
            w.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\nnot found")
            await w.drain()
            return True
        self.completions += 1
        if self.die_after is not None and self.completions > self.die_after:
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.stop()))
            await asyncio.sleep(3600)  # the stop aborts this connection
        if self.max_num_seqs is not None:
            self.seqs = self.seqs or asyncio.Semaphore(self.max_num_seqs)
            async with self.seqs:
                return await self._running(body, w)
        return await self._running(body, w)

    async def _running(self, body: dict[str, Any], w: asyncio.StreamWriter) -> bool:
        self.running += 1
        try:
            if self.oom_above is not None and self.running > self.oom_above:
                if self.on_oom is not None:
                    self.on_oom()
                asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.stop()))
                await asyncio.sleep(3600)  # the stop aborts this connection
            return await self._complete(int(body.get("max_tokens") or 8), w)
        finally:
            self.running -= 1

    async def _small(self, w: asyncio.StreamWriter, data: bytes, trickle: bool) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
        w.write(b"content-length: %d\r\n\r\n" % len(data))
        if not trickle:
            w.write(data)
            await w.drain()
            return True
        for i in range(len(data)):
            w.write(data[i : i + 1])
            await w.drain()
            await asyncio.sleep(self.gap_s)
        return True

    async def _complete(self, max_tokens: int, w: asyncio.StreamWriter) -> bool:
        mode, gap, nth = self.mode, self.gap_s, self.completions
        if nth <= self.healthy_first:
            mode = "ok"
        if mode == "silent":
            await asyncio.sleep(3600)
            return False
        if mode == "trickle_head":
            w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-slow: ")
            while True:
                await w.drain()
                await asyncio.sleep(gap)
                w.write(b"a")
        if mode == "length_lie":
            body = b"".join(token(i) for i in range(max_tokens)) + usage(max_tokens) + DONE
            w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
            w.write(b"content-length: 1000000\r\n\r\n" + body)
            await w.drain()
            await asyncio.sleep(3600)
            return False
        if mode == "chunk_short":
            event = token(0)
            w.write(SSE_HEAD + b"%x\r\n" % (len(event) // 4) + event + b"\r\n")
            await w.drain()
            await asyncio.sleep(3600)
            return False
        if mode == "chunk_lie":
            w.write(SSE_HEAD + b"100000\r\n")
            while True:
                w.write(b": ping\n\n")
                await w.drain()
                await asyncio.sleep(gap)
        w.write(SSE_HEAD)
        if mode == "slow_first":
            await w.drain()
            await asyncio.sleep(self.first_s)
        if mode == "keepalive":
            while True:
                w.write(chunk(b": keepalive\n\n"))
                await w.drain()
                await asyncio.sleep(gap)
        if mode == "past_max":
            i = 0
            while True:
                w.write(chunk(token(i)))
                await w.drain()
                i += 1
                await asyncio.sleep(gap)
        if mode == "choices_5":
            for _ in range(max_tokens if not w.is_closing() else 0):
                w.write(chunk(b'data: {"choices": 5}\n\n'))
            w.write(chunk(usage(max_tokens) + DONE) + b"0\r\n\r\n")
            await w.drain()
            return True
        if mode == "extra_choices":
            for i in range(max_tokens):
                if w.is_closing():  # the client gave up at the first bad message
                    return False
                choices = [{"index": k, "text": f" t{i}", "finish_reason": None} for k in (0, 0, 7)]
                msg = json.dumps({"choices": choices}, separators=(",", ":")).encode()
                w.write(chunk(b"data: " + msg + b"\n\n"))
                await w.drain()
            w.write(chunk(usage(max_tokens) + DONE) + b"0\r\n\r\n")
            await w.drain()
            return True
        for i in range(max_tokens):
            if w.is_closing():  # the client gave up (asyncio logs writes to a closed socket)
                return False
            last = "length" if i == max_tokens - 1 else None
            w.write(chunk(token(i, last)))
            if mode == "slow_ok" and nth > self.quick:
                await w.drain()
                await asyncio.sleep(gap)
            if i == 0 and mode == "junk_json":
                w.write(chunk(b"data: {not json\n\n"))
            if i == 0 and mode == "error_mid":
                w.write(chunk(b'data: {"error": {"message": "engine overloaded"}}\n\n'))
        if mode == "error_event":
            w.write(chunk(b'event: error\ndata: {"error": {"message": "CUDA error"}}\n\n'))
        w.write(chunk(usage(max_tokens)))
        if mode != "no_done":
            w.write(chunk(DONE))
        w.write(b"0\r\n\r\n")
        await w.drain()
        return True


async def _serve_forever(server: HostileServer) -> None:
    await server.start()
    print(f"hostile server ({server.mode}) listening on {server.url}", flush=True)
    await asyncio.Event().wait()


def _out_of_memory() -> None:
    """What an engine's process says and does when a batch outgrows the KV cache."""
    print(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.19 GiB of which 1.06 GiB is free.",
        flush=True,
    )
    os._exit(1)


def main(argv: list[str] | None = None) -> None:
    """`python -m tests.hostile_server --port P --mode M ...`: the same server as a process, for
    a campaign's start_server (benchmarks/chaos_campaign.py). Unknown flags are ignored: a
    campaign's search space adds its own."""
    import argparse

    ap = argparse.ArgumentParser(description="a hostile OpenAI-compatible engine")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1", choices=["127.0.0.1"])
    ap.add_argument("--mode", default="ok")
    ap.add_argument("--gap-s", type=float, default=0.05)
    ap.add_argument("--models", default="ok", choices=["ok", "trickle"])
    ap.add_argument("--info", default="none", choices=["none", "trickle"])
    ap.add_argument("--die-after", type=int)
    ap.add_argument("--healthy-first", type=int, default=0)
    ap.add_argument("--oom-above", type=int)
    ap.add_argument("--max-num-seqs", type=int)
    ns, _ = ap.parse_known_args(argv)
    server = HostileServer(
        mode=ns.mode,
        gap_s=ns.gap_s,
        models=ns.models,
        info=ns.info,
        die_after=ns.die_after,
        healthy_first=ns.healthy_first,
        oom_above=ns.oom_above,
        max_num_seqs=ns.max_num_seqs,
        on_oom=_out_of_memory,
        port=ns.port,
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(server))


if __name__ == "__main__":
    main()
