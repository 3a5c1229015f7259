"""The Claude brain through the real SDK against a scripted Anthropic-compatible server: streamed
calls at a large max_tokens, thinking kept verbatim across tool use and counted in spend, the
thinking mode each model accepts, and the model ids we know and price."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from agent.brains.anthropic import AnthropicBrain
from agent.brains.models import MODELS, sdk_models, spec_of, thinking_param
from agent.brains.pricing import DEAREST, PRICES, cost_usd, known_models, price_of
from agent.brains.sse import render_sse
from agent.session import Limits, choose_model, make_agent, start
from state.events import read_events
from tests.conftest import plain_config
from tools.domain.config import ModelConfig, UsageError

THOUGHT = {"type": "thinking", "thinking": "Read the list before changing it.", "signature": "s1"}


def reply(n: int, model: str, stop: str, *content: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content),
        "stop_reason": stop,
        "usage": {
            "input_tokens": 100,
            "output_tokens": 50,
            "output_tokens_details": {"thinking_tokens": 30},
        },
    }


class Server:
    def __init__(self, model: str) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[httpx2.Headers] = []
        self.replies = [
            reply(
                1,
                model,
                "tool_use",
                THOUGHT,
                {"type": "tool_use", "id": "t1", "name": "todoread", "input": {}},
            ),
            reply(2, model, "end_turn", {"type": "text", "text": "finished"}),
        ]

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        self.headers.append(request.headers)
        sse = render_sse(self.replies.pop(0))
        return httpx2.Response(200, content=sse, headers={"content-type": "text/event-stream"})


def client_for(server: Server) -> anthropic.AsyncAnthropic:
    transport = httpx2.MockTransport(server.handle)
    return anthropic.AsyncAnthropic(
        api_key="test",
        base_url="http://scripted.invalid",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=transport),
    )


async def run_with(tmp_path: Path, model: str, settings: ModelConfig) -> tuple[Server, Any]:
    server = Server(model)
    config = plain_config(model=settings)
    run = start("beat baseline", config, model, tmp_path, None, Limits(max_usd=100))
    agent = make_agent(run, AnthropicBrain(model, client=client_for(server)), config)
    assert await agent.run_loop() == 0
    return server, run


async def test_max_tokens_32000_streams_where_a_plain_call_is_refused(tmp_path: Path) -> None:
    model = "claude-sonnet-4-6"
    with pytest.raises(ValueError, match="Streaming is required"):  # what the SDK says unstreamed
        await client_for(Server(model)).messages.create(
            model=model, max_tokens=32_000, messages=[{"role": "user", "content": "hi"}]
        )
    server, _ = await run_with(tmp_path, model, ModelConfig(max_tokens=32_000))
    assert [b["stream"] for b in server.bodies] == [True, True]
    assert {b["max_tokens"] for b in server.bodies} == {32_000}


async def test_thinking_goes_back_verbatim_and_counts_in_spend(tmp_path: Path) -> None:
    server, run = await run_with(tmp_path, "claude-sonnet-4-6", ModelConfig())
    first, second = server.bodies
    assert first["thinking"] == {"type": "adaptive", "display": "summarized"}
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant" and assistant["content"][0] == THOUGHT
    assert all("cache_control" not in b for b in assistant["content"] if b["type"] == "thinking")
    turns = [e for e in read_events(run.events_path).events if e["type"] == "message"]
    thought = [e for e in turns if e.get("thinking")]
    assert len(thought) == 1 and thought[0]["thinking"] == THOUGHT["thinking"]
    assert thought[0]["usage"]["thinking_tokens"] == 30
    assert run.state.spend.thinking_tokens == 60 and run.state.spend.output_tokens == 100


async def test_a_budget_model_thinks_with_a_budget_and_interleaves(tmp_path: Path) -> None:
    server, _ = await run_with(tmp_path, "claude-haiku-4-5", ModelConfig(thinking_budget=8000))
    assert server.bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 8000}
    assert "interleaved-thinking" in server.headers[0]["anthropic-beta"]


def test_thinking_modes_per_model() -> None:
    assert thinking_param("claude-opus-4-8", ModelConfig()) == {
        "type": "adaptive",
        "display": "summarized",
    }
    assert thinking_param("claude-sonnet-4-6", ModelConfig(thinking="off")) == {"type": "disabled"}
    assert thinking_param("claude-sonnet-4-6", ModelConfig(thinking="enabled"))["type"] == "enabled"


@pytest.mark.parametrize(
    ("model", "settings", "words"),
    [
        ("claude-haiku-4-5", ModelConfig(max_tokens=100_000), "output limit of 64000"),
        ("claude-fable-5-1", ModelConfig(thinking="off"), "does not accept [model] thinking"),
        ("claude-opus-4-8", ModelConfig(thinking="enabled"), "use 'adaptive' or 'off'"),
        ("claude-haiku-4-5", ModelConfig(max_tokens=8000), "must be below max_tokens"),
        ("claude-nope-9", ModelConfig(), "unknown model 'claude-nope-9'"),
    ],
)
def test_a_model_config_the_api_would_refuse_is_one_line_of_usage_error(
    monkeypatch: pytest.MonkeyPatch, model: str, settings: ModelConfig, words: str
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    with pytest.raises(UsageError) as err:
        choose_model(model, plain_config(model=settings))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_every_model_the_sdk_lists_is_known_described_and_priced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    family = {"claude-sonnet-4-6", "claude-opus-4-8", "claude-sonnet-5", "claude-opus-5-5"}
    assert family <= sdk_models() <= set(known_models())
    for model in sdk_models():
        assert choose_model(model, plain_config()) == (model, None)
        assert spec_of(model) in MODELS.values(), model
        assert price_of(model, {}) != DEAREST or model == "claude-mythos-preview", model
    assert set(MODELS) == set(PRICES)


def test_prices() -> None:
    usage = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
    assert cost_usd("claude-sonnet-4-6", usage, {}) == pytest.approx(18.0)
    assert cost_usd("claude-haiku-4-5-20251001", usage, {}) == pytest.approx(6.0)  # dated id
    assert cost_usd("claude-haiku-5-5", {"input_tokens": 1000, "output_tokens": 0}, {}) == (
        pytest.approx(0.0001)
    )
    assert cost_usd("claude-haiku-5-5", usage, {}) == pytest.approx(3.0)  # a long prompt's tier
    assert price_of("claude-opus-4-8", {"claude-opus-4-8": {"input": 1, "output": 2}}) == (1, 2)
    assert price_of("claude-unknown", {}) == DEAREST
