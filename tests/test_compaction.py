"""Compaction: prune first, then summarise; the todo list survives any number of compactions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.brains.base import TokenCount, Turn, TurnRequest
from state.events import read_events
from tests.conftest import ScriptedBrain, agent_for, plain_config, tool_turn
from tools.domain.config import CompactionConfig

TODOS = [
    {"id": "t1", "content": "Sweep the baseline", "status": "in_progress", "priority": "high"},
    {"id": "t2", "content": "Try EAGLE-3", "status": "pending", "priority": "medium"},
]


class SummarisingBrain(ScriptedBrain):
    """Answers summary requests with a summary, and big prompts with every step turn."""

    async def next_turn(self, request: TurnRequest) -> Turn:
        if request.purpose == "summary":
            self.requests.append(request)
            return Turn(
                content=[{"type": "text", "text": f"summary {len(self.requests)}"}],
                stop_reason="end_turn",
                usage={"input_tokens": 50_000},
            )
        turn = await super().next_turn(request)
        turn.usage = {"input_tokens": 50_000, "output_tokens": 10}
        return turn


def check_pairing(messages: list[dict[str, Any]]) -> None:
    """The API rejects a tool_use without its tool_result; the first message is the user's."""
    assert messages[0]["role"] == "user"
    for i, m in enumerate(messages):
        uses = [b["id"] for b in m["content"] if b.get("type") == "tool_use"]
        if uses:
            answered = [
                b["tool_use_id"]
                for b in messages[i + 1]["content"]
                if b.get("type") == "tool_result"
            ]
            assert answered == uses


async def test_todos_survive_repeated_compactions(make_run: Any) -> None:
    config = plain_config(
        compaction=CompactionConfig(threshold_tokens=10_000, keep_turns=2, keep_tool_tokens=10)
    )
    run, _ = make_run(config)
    turns = [tool_turn(("todowrite", {"todos": TODOS}), step=0)]
    turns += [
        tool_turn(("todoread", {}), ("todoread", {}), text=f"step {i}", step=i)
        for i in range(1, 12)
    ]
    brain = SummarisingBrain(turns)
    agent = agent_for(run, config, brain)
    agent.track = lambda block, text: ""  # type: ignore[method-assign]
    assert await agent.run_loop() == 0
    events = read_events(run.events_path).events
    summaries = [e for e in events if e["type"] == "compaction" and e["stage"] == "summary"]
    prunes = [e for e in events if e["type"] == "compaction" and e["stage"] == "prune"]
    assert len(summaries) >= 5 and prunes
    for stub in prunes[0]["pruned"].values():
        assert (run.path / stub).is_file()  # the full text is kept under outputs/
    last_request = brain.requests[-1]
    head = last_request.messages[0]["content"][0]["text"]
    assert json.dumps({"todos": TODOS}, indent=1) in head
    assert "summary" in head and "Goal: beat baseline" in head
    for request in brain.requests:
        check_pairing(request.messages)
    assert run.state.todos == TODOS


async def test_prune_alone_when_it_frees_enough(make_run: Any) -> None:
    config = plain_config(
        compaction=CompactionConfig(threshold_tokens=50_000, keep_turns=2, keep_tool_tokens=1)
    )
    run, _ = make_run(config)
    brain = SummarisingBrain(
        [tool_turn(("todowrite", {"todos": TODOS}), step=0), tool_turn(("todoread", {}), step=1)]
    )
    assert await agent_for(run, config, brain).run_loop() == 0
    stages = [e["stage"] for e in read_events(run.events_path).events if e["type"] == "compaction"]
    assert stages and set(stages) == {"prune"}
    assert "[output pruned by compaction" in json.dumps(run.state.messages)


class CountingBrain(SummarisingBrain):
    """Measures prompts like the API's count_tokens: `tokens`, or None when the count fails."""

    def __init__(self, turns: list[Turn], tokens: int | None) -> None:
        super().__init__(turns)
        self.tokens, self.counted = tokens, 0

    async def count_tokens(self, request: TurnRequest) -> TokenCount | None:
        self.counted += 1
        if self.tokens is None:
            return None
        return TokenCount(self.tokens, {"endpoint": "count_tokens", "request_hash": "sha256:x"})


@pytest.mark.parametrize(("counted", "summarised"), [(100, False), (None, True)])
async def test_the_api_count_decides_after_a_prune_and_the_estimate_is_the_fallback(
    make_run: Any, counted: int | None, summarised: bool
) -> None:
    config = plain_config(
        compaction=CompactionConfig(threshold_tokens=10_000, keep_turns=2, keep_tool_tokens=1)
    )
    run, _ = make_run(config)
    brain = CountingBrain(
        [tool_turn(("todowrite", {"todos": TODOS}), step=0), tool_turn(("todoread", {}), step=1)],
        counted,
    )
    assert await agent_for(run, config, brain).run_loop() == 0
    events = read_events(run.events_path).events
    stages = [e["stage"] for e in events if e["type"] == "compaction"]
    assert brain.counted >= 1 and "prune" in stages
    assert ("summary" in stages) == summarised  # the estimate (50k - a few) says summarise
    counts = [e for e in events if e["type"] == "api_exchange"]
    assert len(counts) == (brain.counted if counted is not None else 0)
