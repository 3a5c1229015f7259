"""Compaction, in opencode's order: prune old tool outputs (no model call); if the context is
still too large, a structured summary from the brain; then rebuild the conversation as goal +
summary + the todo list verbatim from the store + the last few turns. Each stage is an event.

Compaction runs when the last prompt passed [compaction] threshold_tokens, and when the API
refused a prompt as past the model's context (compact_to_fit, harder at each try). A summary
request that is itself too long leaves out the oldest turns until it fits.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import TYPE_CHECKING, Any

from agent.brains.base import PromptTooLong

if TYPE_CHECKING:
    from agent.loop import Agent

CHARS_PER_TOKEN = 4  # a rough estimate, good enough to decide how much to prune
SUMMARY_TRIES = 4  # summary requests, each with half the turns of the one before
LEFT_OUT = "(The oldest turns of this conversation are left out: they did not fit the context.)"


def compaction_prompt() -> str:
    return resources.files("prompts").joinpath("compaction.md").read_text().strip()


async def maybe_compact(agent: Agent) -> None:
    state, cfg = agent.run.state, agent.ctx.config.compaction
    if state.last_context_tokens < cfg.threshold_tokens:
        return
    freed = prune(agent, cfg.keep_tool_tokens)
    if freed == 0 or await prompt_tokens(agent, freed) >= cfg.threshold_tokens:
        await summarize(agent, cfg.keep_turns)
    state.last_context_tokens = 0  # measured again by the next model call


async def compact_to_fit(agent: Agent, tries: int) -> None:
    """After the API refused the prompt as too long: prune (keeping less tool output at each
    try) and summarise when the prune freed nothing or did not do the first time."""
    cfg = agent.ctx.config.compaction
    freed = prune(agent, cfg.keep_tool_tokens >> (2 * tries), cause="prompt_too_long")
    if tries > 0 or freed == 0:
        await summarize(agent, max(1, cfg.keep_turns >> tries), cause="prompt_too_long")
    agent.run.state.last_context_tokens = 0


async def prompt_tokens(agent: Agent, freed_chars: int) -> int:
    """The next prompt's size after a prune: the API's count (count_tokens, recorded as an
    api_exchange) where the brain can ask for one, else the last prompt less an estimate."""
    count = getattr(agent.brain, "count_tokens", None)
    if count is not None:
        measured = await agent.interruptible(count(agent.request()))
        if measured is not None:
            if measured.exchange is not None:
                agent.run.append("api_exchange", **measured.exchange)
            tokens: int = measured.tokens
            return tokens
    return agent.run.state.last_context_tokens - freed_chars // CHARS_PER_TOKEN


def prune(agent: Agent, keep_tokens: int, cause: str | None = None) -> int:
    """Replace old tool outputs by a stub pointing at the full text; returns the chars freed."""
    run = agent.run
    budget, freed, pruned = keep_tokens * CHARS_PER_TOKEN, 0, {}
    blocks = [
        b
        for m in run.state.messages
        for b in m["content"]
        if b.get("type") == "tool_result" and not str(b["content"]).startswith("[output pruned")
    ]
    for block in reversed(blocks):  # newest first: keep those within the budget
        size = len(str(block["content"]))
        if budget >= size:
            budget -= size
            continue
        budget = 0
        path = run.path / "outputs" / f"{block['tool_use_id']}.txt"
        if not path.exists():
            run.write_text(f"outputs/{path.name}", str(block["content"]))
        pruned[block["tool_use_id"]] = str(path.relative_to(run.path))
        freed += size
    if pruned:
        more = {"cause": cause} if cause else {}
        run.append("compaction", stage="prune", pruned=pruned, freed_chars=freed, **more)
    return freed


async def summarize(agent: Agent, keep_turns: int, cause: str | None = None) -> None:
    run = agent.run
    messages = run.state.messages
    for tries in range(SUMMARY_TRIES):
        try:
            turn = await agent.query("summary", summary_request(messages, tries))
            break
        except PromptTooLong:
            if tries == SUMMARY_TRIES - 1:
                raise
    summary = turn.text.strip()
    rebuilt = rebuild(run.state.goal, summary, run.state.todos, messages, keep_turns)
    run.append(
        "compaction",
        stage="summary",
        summary=summary,
        messages=rebuilt,
        kept_messages=len(rebuilt) - 1,
        usage=turn.usage,
        cost_usd=turn.cost_usd,
        **({"cause": cause} if cause else {}),
    )


def summary_request(messages: list[dict[str, Any]], tries: int) -> list[dict[str, Any]]:
    """The conversation and the compaction prompt; at the n-th try only the newest 1/2**n of
    the turns (from an assistant message, so that each tool_use keeps its tool_result), after a
    note that the oldest are left out."""
    if tries:
        starts = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        if starts:
            cut = starts[-max(1, len(starts) >> tries)]
            note = {"role": "user", "content": [{"type": "text", "text": LEFT_OUT}]}
            messages = [note, *messages[cut:]]
    ask = {"role": "user", "content": [{"type": "text", "text": compaction_prompt()}]}
    if messages and messages[-1]["role"] == "user":  # join the open user message, not a new one
        return [
            *messages[:-1],
            {"role": "user", "content": [*messages[-1]["content"], *ask["content"]]},
        ]
    return [*messages, ask]


def rebuild(
    goal: str,
    summary: str,
    todos: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    keep_turns: int,
) -> list[dict[str, Any]]:
    """goal + summary + todos (verbatim, from the store) + the last turns, cut at an assistant
    message so that every tool_use keeps its tool_result."""
    starts = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    cut = starts[-keep_turns] if len(starts) >= keep_turns else (starts[0] if starts else 0)
    head = (
        f"Goal: {goal}\n\n"
        f"The conversation so far was compacted. Summary:\n\n{summary}\n\n"
        "The current todo list, verbatim from the todo store (it is authoritative):\n"
        f"{json.dumps({'todos': todos}, indent=1)}"
    )
    return [{"role": "user", "content": [{"type": "text", "text": head}]}, *messages[cut:]]
