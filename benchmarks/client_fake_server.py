"""A tiny OpenAI-compatible streaming server with fixed latencies, for the benchmark client's
tests and capacity measurements (not a simulator: the real one is sim/).

    python benchmarks/client_fake_server.py [--port 0] [--ttft-ms 50] [--itl-ms 10]

Prints `PORT <n>` on stdout once listening. Each streamed message carries one token (one chunk
per ITL); ignore_eos is honoured only in that the server always sends max_tokens. The request's
"model" picks a behaviour, so one server covers every case a test needs:
  ideal        the fixed-latency stream (any unknown model name too)
  multi3       3 tokens per message (a speculative engine), usage counts tokens
  eos5         stops after 5 tokens (early EOS) whatever max_tokens says
  http500      HTTP 500 with an OpenAI error body;   http404: 404 plain text
  html         200 text/html (not an OpenAI server)
  json         200 application/json completion (ignores stream: true)
  nousage      a stream without the usage message
  errorevent   200 SSE whose only message is {"error": ...}
  stall        headers, one message, then nothing (the client's stall timeout must fire)
  dropmid      closes the connection after 3 messages
  spaced       JSON with ", " and ": " separators (json.dumps defaults)
  dropsecond   closes a kept-alive connection when its second request arrives, unanswered
               (the race of a server closing an idle connection as the client sends)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

import orjson

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None  # type: ignore[assignment]


class Handler(asyncio.Protocol):
    def __init__(self, ttft: float, itl: float) -> None:
        self.ttft, self.itl = ttft, itl
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.task: asyncio.Future[None] | None = None
        self.served = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while not self.busy:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            method, path = head[0].split()[:2]
            self.busy = True
            self.task = asyncio.ensure_future(self.respond(method, path, body))

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def write(self, data: bytes) -> bool:
        if self.transport is None or self.transport.is_closing():
            return False
        self.transport.write(data)
        return True

    def simple(self, status: str, ctype: str, body: bytes) -> None:
        self.write(
            f"HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\n"
            f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )

    def chunk(self, payload: bytes) -> bool:
        return self.write(b"%x\r\n%s\r\n" % (len(payload), payload))

    async def respond(self, method: str, path: str, body: bytes) -> None:
        try:
            await self._respond(method, path, body)
        finally:
            self.busy = False
            if self.buf and self.transport is not None:
                self.data_received(b"")

    async def _respond(self, method: str, path: str, body: bytes) -> None:
        if method == "GET" and path.endswith("/v1/models"):
            self.simple("200 OK", "application/json", orjson.dumps({"data": [{"id": "ideal"}]}))
            return
        if method == "GET" and path == "/health":
            self.simple("200 OK", "text/plain", b"ok")
            return
        if method != "POST" or not path.endswith(("/v1/completions", "/v1/chat/completions")):
            self.simple("404 Not Found", "text/plain", b"not found")
            return
        req = orjson.loads(body)
        model = req.get("model", "ideal")
        self.served += 1
        if model == "dropsecond" and self.served > 1:
            assert self.transport is not None
            self.transport.close()
            return
        chat = path.endswith("chat/completions")
        max_tokens = int(req.get("max_tokens") or 16)
        if model == "http500":
            err = {"error": {"message": "internal error: the engine is dead", "code": 500}}
            self.simple("500 Internal Server Error", "application/json", orjson.dumps(err))
            return
        if model == "http404":
            self.simple("404 Not Found", "text/plain", b"The model `http404` does not exist.")
            return
        if model == "html":
            self.simple("200 OK", "text/html", b"<html><body>It works!</body></html>")
            return
        if model == "json":
            self.simple("200 OK", "application/json", orjson.dumps({"choices": [{"text": "hi"}]}))
            return
        prompt_tokens = len(str(req.get("prompt") or req.get("messages")).split())
        self.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        if model == "errorevent":
            self.chunk(b'data: {"error": {"message": "prompt too long", "code": 400}}\n\n')
            self.chunk(b"data: [DONE]\n\n")
            self.write(b"0\r\n\r\n")
            return
        per = 3 if model == "multi3" else 1
        total = min(max_tokens, 5) if model == "eos5" else max_tokens
        dumps = (lambda o: json.dumps(o).encode()) if model == "spaced" else orjson.dumps
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        sent, k = 0, 0
        while sent < total:
            due = t0 + self.ttft + k * self.itl
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            n = min(per, total - sent)
            choice = (
                {"index": 0, "delta": {"content": " tok" * n}, "finish_reason": None}
                if chat
                else {"index": 0, "text": " tok" * n, "finish_reason": None}
            )
            msg = {
                "id": "x",
                "object": "text_completion",
                "model": model,
                "choices": [choice],
                "usage": None,
            }
            if not self.chunk(b"data: " + dumps(msg) + b"\n\n"):
                return
            sent += n
            k += 1
            if model == "stall":
                await asyncio.sleep(3600)
            if model == "dropmid" and k == 3:
                assert self.transport is not None
                self.transport.close()
                return
        if model == "nousage":  # llama-cpp-python's server: a last chunk with the finish reason
            last = {"index": 0, "text": "", "finish_reason": "length"}
            self.chunk(b"data: " + dumps({"id": "x", "choices": [last]}) + b"\n\n")
        else:
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": sent,
                "total_tokens": prompt_tokens + sent,
            }
            self.chunk(b"data: " + dumps({"id": "x", "choices": [], "usage": usage}) + b"\n\n")
        self.chunk(b"data: [DONE]\n\n")
        self.write(b"0\r\n\r\n")


async def serve(port: int, ttft: float, itl: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Handler(ttft, itl), "127.0.0.1", port, backlog=4096)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ttft-ms", type=float, default=50)
    ap.add_argument("--itl-ms", type=float, default=10)
    args = ap.parse_args()
    run = uvloop.run if uvloop is not None else asyncio.run
    try:
        run(serve(args.port, args.ttft_ms / 1000, args.itl_ms / 1000))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
