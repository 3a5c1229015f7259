"""A raw asyncio HTTP/1.1 server that answers the way servers nobody here wrote do - not ours, not
the simulator's stack - for tests/test_bench_foreign_servers.py.

Modes:
  llama      llama.cpp's llama-server: `Connection: Keep-Alive` and `Keep-Alive: timeout=5` in
             the headers, the streamed body chunked, `0\\r\\n` and then - in its own TCP segment,
             after a pause - the final CRLF, then the connection is closed anyway
  bytewise   the whole response written one byte at a time (a segment each, TCP_NODELAY)
  nousage    llama-cpp-python's server: no usage message, the last chunk with no text and the
             finish reason, keep-alive honoured
  broken     every completion answered HTTP 500
  tinyctx    a server started with a tiny context (llama-cpp-python's --n_ctx 32): a prompt of
             more than 16 tokens is refused with HTTP 400, a shorter one (the readiness check's)
             answered as in llama mode
Every mode answers GET /v1/models, and POST /tokenize ({"content"} -> {"tokens"}) with a toy
tokenizer that is not one token per word: BOS, then 1 token per word up to 4 letters, 2 above.
`python -m tests.foreign_server MODE PORT` serves one until killed (a server command for a run).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from dataclasses import dataclass, field
from typing import Any


def toy_tokens(text: str) -> int:
    return 1 + sum(1 if len(w) <= 4 else 2 for w in text.split())


@dataclass
class ForeignServer:
    mode: str
    itl_s: float = 0.001
    crlf_pause_s: float = 0.005
    bodies: list[dict[str, Any]] = field(default_factory=list)  # every completion request
    connections: int = 0
    server: asyncio.Server | None = None
    port: int = 0  # 0: any free one

    @property
    def prompts(self) -> list[str]:
        return [str(b.get("prompt")) for b in self.bodies]

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._connection, "127.0.0.1", self.port)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
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
                body = await reader.readexactly(length) if length else b""
                if not await self._respond(method, path, body, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _respond(
        self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; False: close the connection after it."""
        if method == "GET" and path == "/v1/models":
            return self._json(writer, {"object": "list", "data": [{"id": "tiny.gguf"}]})
        if method == "POST" and path == "/tokenize":
            text = json.loads(body)["content"]
            return self._json(writer, {"tokens": list(range(toy_tokens(text)))})
        if method != "POST" or path != "/v1/completions":
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found")
            return True
        req = json.loads(body)
        self.bodies.append(req)
        if self.mode == "broken":
            error = b'{"error": {"message": "the model is broken"}}'
            writer.write(
                b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\n\r\n%s"
                % (len(error), error)
            )
            return True
        if self.mode == "tinyctx" and toy_tokens(str(req.get("prompt"))) > 16:
            error = b'{"error": {"message": "Requested tokens exceed context window of 32"}}'
            writer.write(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" % (len(error), error)
            )
            return True
        events = self._events(req)
        if self.mode == "bytewise":
            response = _HEAD + b"".join(_chunk(e) for e in events) + b"0\r\n\r\n"
            for i in range(len(response)):
                writer.write(response[i : i + 1])
                await writer.drain()
                await asyncio.sleep(0.0002)
            return True
        writer.write(_HEAD)
        for event in events:
            writer.write(_chunk(event))
            await writer.drain()
            await asyncio.sleep(self.itl_s)
        if self.mode == "nousage":
            writer.write(b"0\r\n\r\n")
            return True
        writer.write(b"0\r\n")  # llama-server: the final CRLF comes apart, then the close
        await writer.drain()
        await asyncio.sleep(self.crlf_pause_s)
        writer.write(b"\r\n")
        await writer.drain()
        return False

    def _events(self, req: dict[str, Any]) -> list[bytes]:
        n = int(req["max_tokens"])
        out = [
            _event({"choices": [{"text": f" t{i}", "index": 0, "finish_reason": None}]})
            for i in range(n)
        ]
        if self.mode == "nousage":
            out.append(_event({"choices": [{"text": "", "index": 0, "finish_reason": "length"}]}))
        else:
            prompt = toy_tokens(str(req["prompt"]))
            usage = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}
            out.append(_event({"choices": [], "usage": usage}))
        out.append(b"data: [DONE]\n\n")
        return out

    def _json(self, writer: asyncio.StreamWriter, obj: Any) -> bool:
        data = json.dumps(obj).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nKeep-Alive: timeout=5\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
        )
        return True


_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
    b"Connection: Keep-Alive\r\nKeep-Alive: timeout=5, max=100\r\n\r\n"
)


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


async def _serve(mode: str, port: int) -> None:
    await ForeignServer(mode, port=port).start()
    await asyncio.Event().wait()


if __name__ == "__main__":
    import sys

    asyncio.run(_serve(sys.argv[1], int(sys.argv[2])))
