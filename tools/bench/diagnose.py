"""Why a response is not a usable stream: one error kind and one line, from the bytes we kept."""

from __future__ import annotations

import orjson


def error_message(body: bytes) -> str:
    """One line from an error body: OpenAI's {"error": {"message"}}, FastAPI's detail, or text."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace").strip().splitlines()[0][:200] if body.strip() else ""
    if isinstance(obj, dict):
        err = obj.get("error", obj.get("detail", obj.get("message", obj)))
        if isinstance(err, dict):
            err = err.get("message", err)
        return str(err)[:200]
    return str(obj)[:200]


def no_choices(events: bytes, ctype: str) -> tuple[str, str]:
    """Why a 200 response carried no `choices` message: the error kind and one line."""
    text = events.strip()
    if b"data:" in text:
        payload = text.split(b"data:", 1)[1].split(b"\n", 1)[0].strip()
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return "bad_response", f"unparsable SSE message: {payload[:120]!r}"
        if isinstance(obj, dict) and "error" in obj:
            return "stream_error", error_message(payload)
        return "no_choices", f"stream ended without a choices message: {payload[:120]!r}"
    if "json" in ctype and b'"choices"' in text:
        return "not_streaming", "the server answered with one JSON body, not a stream"
    if "text/event-stream" not in ctype:
        what = ctype or "no content type"
        return "not_openai", f"expected an SSE stream, got {what}: {text[:120]!r}"
    return "no_choices", "stream ended without a choices message"
