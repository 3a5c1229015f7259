"""OpenAI-compatible request parsing and response bytes (the hot path: chunks are pre-built).

Tokens: without a tokenizer, a prompt's tokens are its whitespace-separated words (or the
token ids when the prompt is a list of ints); a chat adds 4 template tokens per message + 2.
Generated tokens are plain ASCII words, so they go into JSON without escaping.
"""

from __future__ import annotations

import hashlib
import math
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

import orjson

_TEXT = (
    "the of and to in is that for it as was with be by on not he this are or his from "
    "at which but have an they you were her she there been one all we their has would "
    "when if so no will more can out up into do any your what some time could them "
    "other than then now only its over also after new two first way where our well "
    "even because these most may such through model server token batch cache graph "
    "decode prefill stream engine kernel memory tensor"
)
WORDS = _TEXT.split()
VOCAB = [" " + w for w in WORDS]


class RequestError(Exception):
    """A bad request: HTTP status and a one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Completion:
    chat: bool
    stream: bool
    include_usage: bool
    prompt_tokens: int
    max_tokens: int
    target: int  # tokens to produce (max_tokens, or fewer at a natural EOS)
    temperature: float
    seed: int  # where the generated words start in the vocabulary
    model: str
    id: str
    created: int
    text: str = ""  # the prompt (chat: the messages' contents): prefix cache and acceptance


def count_words(text: str) -> int:
    return max(1, len(text.split()))


def _prompt_tokens(body: dict[str, Any], chat: bool) -> tuple[int, str]:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError(400, "'messages' must be a non-empty list")
        n, text = 2, []
        for msg in messages:
            content = msg.get("content") if isinstance(msg, dict) else None
            if isinstance(content, list):  # content parts
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            if not isinstance(content, str):
                raise RequestError(400, "each message needs a string 'content'")
            n += 4 + len(content.split())
            text.append(content)
        return n, "\n".join(text)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        return count_words(prompt), prompt
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return len(prompt), ",".join(map(str, prompt[:64]))
    raise RequestError(400, "'prompt' must be a string or a list of token ids (one prompt)")


def parse(body: dict[str, Any], chat: bool, served: str, context_len: int) -> Completion:
    """Check a completion request like vLLM/SGLang do; RequestError for what they would refuse."""
    model = body.get("model", served)
    if model not in (served, None, ""):
        raise RequestError(404, f"The model `{model}` does not exist.")
    if body.get("n", 1) != 1:
        raise RequestError(400, "only n=1 is supported")
    prompt_tokens, text = _prompt_tokens(body, chat)
    limit = body.get("max_completion_tokens") if chat else None
    limit = body.get("max_tokens", limit)
    if limit is None:
        limit = context_len - prompt_tokens if chat else 16
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise RequestError(400, f"max_tokens must be a positive integer, got {limit!r}")
    if prompt_tokens + limit > context_len:
        raise RequestError(
            400,
            f"This model's maximum context length is {context_len} tokens. However, you "
            f"requested {prompt_tokens + limit} tokens ({prompt_tokens} in the messages, "
            f"{limit} in the completion). Please reduce the length of the messages or completion.",
        )
    temperature = body.get("temperature", 1.0)
    if not isinstance(temperature, (int, float)) or temperature < 0:
        raise RequestError(400, f"temperature must be a number >= 0, got {temperature!r}")
    stream = bool(body.get("stream", False))
    options = body.get("stream_options") or {}
    ignore_eos = bool(body.get("ignore_eos", False))
    digest = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    rng = random.Random(digest if temperature == 0 else None)
    target = limit if ignore_eos else min(limit, natural_length(rng))
    return Completion(
        chat=chat,
        stream=stream,
        include_usage=bool(options.get("include_usage", False)) if stream else True,
        prompt_tokens=prompt_tokens,
        max_tokens=limit,
        target=target,
        temperature=float(temperature),
        seed=rng.randrange(len(VOCAB)),
        model=served,
        id=("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24],
        created=int(time.time()),
        text=text,
    )


def natural_length(rng: random.Random) -> int:
    """Where the model would stop on its own: log-normal, median 300 tokens."""
    return max(1, int(math.exp(rng.gauss(math.log(300), 0.7))))


def text_of(c: Completion, start: int, n: int) -> str:
    v = len(VOCAB)
    return "".join(VOCAB[(c.seed + 7 * i) % v] for i in range(start, start + n))


class Chunks:
    """Pre-built SSE frames for one streaming request."""

    def __init__(self, c: Completion) -> None:
        self.c = c
        head = f'{{"id":"{c.id}","object":"{"chat.completion.chunk" if c.chat else "text_completion"}","created":{c.created},"model":"{c.model}","choices":'  # noqa: E501
        self.head = b"data: " + head.encode()
        if c.chat:
            self.pre = self.head + b'[{"index":0,"delta":{"content":"'
            self.post = b'"},"logprobs":null,"finish_reason":null}]}\n\n'
        else:
            self.pre = self.head + b'[{"index":0,"text":"'
            self.post = b'","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'

    def first(self) -> bytes:
        """Chat streams open with the assistant role."""
        role = b'[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
        return self.head + role + b'"finish_reason":null}]}\n\n'

    def tokens(self, start: int, n: int) -> bytes:
        return self.pre + text_of(self.c, start, n).encode() + self.post

    def last(self, start: int, n: int, reason: str) -> bytes:
        end = self.post.replace(
            b'"finish_reason":null', b'"finish_reason":"' + reason.encode() + b'"'
        )
        return self.pre + text_of(self.c, start, n).encode() + end

    def usage(self, completion_tokens: int) -> bytes:
        u = usage(self.c, completion_tokens)
        return self.head + b"[]," + b'"usage":' + orjson.dumps(u) + b"}\n\n"


DONE = b"data: [DONE]\n\n"


def usage(c: Completion, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": c.prompt_tokens,
        "total_tokens": c.prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }


def full_response(c: Completion, completion_tokens: int, reason: str) -> bytes:
    text = text_of(c, 0, completion_tokens)
    if c.chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": reason,
        }
        kind = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
        kind = "text_completion"
    return orjson.dumps(
        {
            "id": c.id,
            "object": kind,
            "created": c.created,
            "model": c.model,
            "choices": [choice],
            "usage": usage(c, completion_tokens),
        }
    )


def error_body(status: int, message: str) -> bytes:
    kind = {400: "BadRequestError", 404: "NotFoundError", 503: "ServiceUnavailableError"}
    return orjson.dumps(
        {"object": "error", "message": message, "type": kind.get(status, "Error"), "code": status}
    )
