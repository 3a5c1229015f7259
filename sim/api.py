"""The HTTP side: a raw ASGI app (served by uvicorn + uvloop + httptools, as vLLM and SGLang do).

Routes: GET /health (503 while loading), /health_generate, /v1/models, /metrics, /server_info;
POST /v1/completions, /v1/chat/completions (streaming SSE or not); GET or POST /flush_cache
(SGLang's: empties the prefix cache).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from sim import openai
from sim.flags import ServerArgs
from sim.metrics import prometheus, server_info
from sim.model import Model
from sim.scheduler import Engine, Seq

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

JSON = [(b"content-type", b"application/json")]
TEXT = [(b"content-type", b"text/plain; version=0.0.4; charset=utf-8")]
SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


class App:
    def __init__(self, args: ServerArgs, model: Model, engine: Engine | None) -> None:
        self.args = args
        self.model = model
        self.engine = engine  # None in ideal mode
        self.ready = False
        self.served = args.served_model_name or args.model_path or model.hw.model
        self.created = int(time.time())
        self.ideal_requests = 0
        self.ideal_tokens = 0
        self.ideal_prompt_tokens = 0
        self.ideal_running = 0  # requests in flight in ideal mode (all admitted at once)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        try:
            if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
                await self.completion(receive, send, chat=path == "/v1/chat/completions")
            elif path == "/flush_cache" and method in ("GET", "POST"):
                await self.flush_cache(send)
            elif method != "GET":
                await reply(send, 405, openai.error_body(405, f"{method} {path} not allowed"))
            elif path == "/health":
                await reply(send, 200 if self.ready else 503, b"", TEXT)
            elif path == "/health_generate":
                await self.health_generate(send)
            elif path == "/v1/models":
                await reply(send, 200, orjson.dumps(self.models()))
            elif path == "/metrics":
                await reply(send, 200, prometheus(self).encode(), TEXT)
            elif path in ("/server_info", "/get_server_info"):
                await reply(send, 200, orjson.dumps(server_info(self)))
            else:
                await reply(send, 404, openai.error_body(404, f"no route {path}"))
        except openai.RequestError as err:
            await reply(send, err.status, openai.error_body(err.status, str(err)))

    def models(self) -> dict[str, Any]:
        card = {
            "id": self.served,
            "object": "model",
            "created": self.created,
            "owned_by": "sglang",
            "root": self.args.model_path or self.model.hw.model,
            "max_model_len": self.model.context_len,
        }
        return {"object": "list", "data": [card]}

    async def health_generate(self, send: Send) -> None:
        if not self.ready:
            await reply(send, 503, b"", TEXT)
            return
        if self.engine is not None:
            seq = Seq(1, 1, 1, 0.0)
            self.engine.submit(seq)
            await seq.wait()
        await reply(send, 200, b"", TEXT)

    async def flush_cache(self, send: Send) -> None:
        """SGLang's /flush_cache: empty the prefix cache, unless requests are running."""
        if self.engine is not None and not self.engine.flush_cache():
            await reply(send, 400, b"Cache not flushed: requests are running.", TEXT)
            return
        await reply(send, 200, b"Cache flushed.", TEXT)

    async def completion(self, receive: Receive, send: Send, chat: bool) -> None:
        body = await read_body(receive)
        if not self.ready:
            raise openai.RequestError(503, "the server is still loading the model")
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise openai.RequestError(400, "the request body is not valid JSON") from None
        if not isinstance(request, dict):
            raise openai.RequestError(400, "the request body must be a JSON object")
        c = openai.parse(request, chat, self.served, self.model.context_len)
        gone = asyncio.Event()
        watcher = asyncio.create_task(watch_disconnect(receive, gone))
        try:
            if self.engine is None:
                await self.ideal(c, send, gone)
            else:
                await self.physics(c, send, gone)
        finally:
            watcher.cancel()

    async def physics(self, c: openai.Completion, send: Send, gone: asyncio.Event) -> None:
        assert self.engine is not None
        seq = Seq(c.prompt_tokens, c.max_tokens, c.target, c.temperature)
        self.engine.submit(seq, c.text)
        if not c.stream:
            await seq.wait_finished()
            await reply(send, 200, openai.full_response(c, seq.generated, seq.finish_reason))
            return
        chunks = openai.Chunks(c)
        await start(send, 200, SSE)
        if c.chat:
            await body_part(send, chunks.first())
        while True:
            await seq.wait()
            if gone.is_set():
                self.engine.abort(seq)
                return
            start_at, n = seq.sent, seq.generated - seq.sent
            seq.sent = seq.generated
            if seq.finished:
                await body_part(send, chunks.last(start_at, n, seq.finish_reason))
                break
            await body_part(send, chunks.tokens(start_at, n))
        await self.close_stream(send, chunks, c, seq.generated)

    async def ideal(self, c: openai.Completion, send: Send, gone: asyncio.Event) -> None:
        """Fixed TTFT and ITL whatever the load: the yardstick for clients."""
        self.ideal_running += 1
        try:
            await self._ideal(c, send, gone)
        finally:
            self.ideal_running -= 1

    async def _ideal(self, c: openai.Completion, send: Send, gone: asyncio.Event) -> None:
        scale = self.args.time_scale
        ttft = (self.args.ideal_ttft_ms or 0.0) / 1000.0 / scale
        itl = (self.args.ideal_itl_ms or 0.0) / 1000.0 / scale
        self.ideal_requests += 1
        self.ideal_prompt_tokens += c.prompt_tokens
        n = c.target
        reason = "length" if n >= c.max_tokens else "stop"
        deadline = time.perf_counter() + ttft
        if not c.stream:
            await sleep_until(deadline + itl * (n - 1))
            self.ideal_tokens += n
            await reply(send, 200, openai.full_response(c, n, reason))
            return
        chunks = openai.Chunks(c)
        await start(send, 200, SSE)
        if c.chat:
            await body_part(send, chunks.first())
        for i in range(n):
            await sleep_until(deadline)
            if gone.is_set():
                return
            frame = chunks.last(i, 1, reason) if i == n - 1 else chunks.tokens(i, 1)
            await body_part(send, frame)
            self.ideal_tokens += 1
            deadline += itl
        await self.close_stream(send, chunks, c, n)

    async def close_stream(
        self, send: Send, chunks: openai.Chunks, c: openai.Completion, n: int
    ) -> None:
        if c.include_usage:
            await body_part(send, chunks.usage(n))
        await send({"type": "http.response.body", "body": openai.DONE, "more_body": False})


async def sleep_until(deadline: float) -> None:
    delay = deadline - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


async def read_body(receive: Receive) -> bytes:
    parts = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


async def watch_disconnect(receive: Receive, gone: asyncio.Event) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            return


async def start(send: Send, status: int, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def body_part(send: Send, data: bytes) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def reply(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] = JSON
) -> None:
    await start(send, status, [*headers, (b"content-length", str(len(body)).encode())])
    await send({"type": "http.response.body", "body": body})
