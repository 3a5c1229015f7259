"""A Messages API response as the server-sent events a streamed call receives.

Recordings keep the final message (the log stays small); replay and the scripted sessions serve it
back as a stream cut into deltas, so that the SDK's own stream parser and accumulator rebuild it.
"""

from __future__ import annotations

import json
from typing import Any

CHUNK = 40  # characters per delta: several deltas per block, as a real stream has


def render_sse(message: dict[str, Any]) -> bytes:
    usage = dict(message.get("usage") or {})
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**usage, "output_tokens": 1}
    out = [_event("message_start", {"message": start})]
    for index, block in enumerate(message.get("content") or []):
        opening, deltas = _split(block)
        out.append(_event("content_block_start", {"index": index, "content_block": opening}))
        for delta in deltas:
            out.append(_event("content_block_delta", {"index": index, "delta": delta}))
        out.append(_event("content_block_stop", {"index": index}))
    delta = {k: message.get(k) for k in ("stop_reason", "stop_sequence")}
    out.append(_event("message_delta", {"delta": delta, "usage": usage}))
    out.append(_event("message_stop", {}))
    return "".join(out).encode()


def _split(block: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    kind = block.get("type")
    if kind == "text":
        return {**block, "text": ""}, [
            {"type": "text_delta", "text": t} for t in _chunks(block["text"])
        ]
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": t} for t in _chunks(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
        return {**block, "thinking": "", "signature": ""}, deltas
    if kind == "tool_use":
        raw = json.dumps(block.get("input"), ensure_ascii=False)  # a null one is not recorded
        deltas = [{"type": "input_json_delta", "partial_json": t} for t in _chunks(raw)]
        return {**block, "input": {}}, deltas
    return block, []  # redacted_thinking and others arrive whole


def _chunks(text: str) -> list[str]:
    return [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)]


def _event(name: str, data: dict[str, Any]) -> str:
    body = {"type": name, **data}
    return f"event: {name}\ndata: {json.dumps(body, ensure_ascii=False)}\n\n"
