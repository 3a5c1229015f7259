"""The autopilot's words: short text blocks that say what it does and why (numbers, not prose)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from agent.brains.autopilot.ask_tell import AskTell
from agent.brains.autopilot.history import History
from agent.brains.autopilot.planner import Experiment, Finish, Planner
from agent.brains.autopilot.steps import SERIAL
from state.fold import RunState
from state.sweeps import count
from state.todos import render
from tools.domain.config import Config
from tools.domain.objective import describe_objective
from tools.domain.space import SearchSpace, render_flags

CONCLUSION = "Conclusion:"


def short(space: SearchSpace, config: dict[str, Any]) -> str:
    """A configuration as its change from the baseline ("no --flag" for a switch turned off)."""
    change = space.diff(space.baseline, config)
    if not change:
        return "the baseline"
    words = []
    for flag, value in change.items():
        if value is False:
            if not any(f in change for f in space.requires.get(flag, {})):
                words.append(f"no {flag}")  # a gated flag switched off with its gate goes unsaid
        else:
            words.append(" ".join(render_flags({flag: value})))
    return " ".join(words)


def tag(space: SearchSpace, config: dict[str, Any]) -> str:
    """Words for a result label: the changed values ("fa3-256", "nofusion", "EAGLE3-3-4-8")."""
    change = space.diff(space.baseline, config)
    words = []
    for flag, value in change.items():
        name = flag.lstrip("-").split("-")[-1]
        if value is True:
            words.append(name)
        elif value is False:
            if not any(f in change for f in space.requires.get(flag, {})):
                words.append("no" + name)
        else:
            words.append(_value_words(value))
    return "-".join(words)[:40].strip("-") or "baseline"


def _value_words(value: Any) -> str:
    """A value as label words: a JSON object (vLLM's --speculative-config) by its values
    ("ngram-4-4"), so that a label and its result file's name carry no braces or quotes."""
    if isinstance(value, str) and value.startswith("{"):
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    if isinstance(value, dict):
        return "-".join(_value_words(v) for v in value.values())
    return str(value)


def span(lo: int, hi: int | None) -> str:
    return f"C>={lo}" if hi is None else f"C={lo}" if hi == lo else f"C={lo}-{hi}"


def opening(planner: Planner, config: Config) -> str:
    s, space = planner.settings, planner.space
    size = len(space.enumerate())
    obj = describe_objective(
        s.objective.kind,
        s.objective.level,
        config.objective.ttft_p99_ms,
        config.objective.tpot_p99_ms,
    )
    return (
        f"Plan: the search space has {len(space.flags)} flags and {size} valid configurations; "
        f"objective: {obj}. Baseline swept twice (noise floor), then one factor at a time from "
        f"the best, screened at C={','.join(map(str, s.screens()))} and confirmed with full "
        "sweeps, then pairs of the changes that did well, the speculative family where it comes "
        "close, re-validation on a fresh launch, and a concurrency-aware recommendation; "
        f"measured until the objective is known within {s.target_noise:.0%}. "
        "First, no leftover servers."
    )


def crash(result: dict[str, Any]) -> str:
    first = str(result.get("text", "")).strip().splitlines()
    reason = (result.get("data") or {}).get("diagnosis") or (first[0] if first else "no reason")
    return (
        f"That launch failed: {reason}. Learned: this configuration is not retried; the same "
        "change is tried once more on a base that differs elsewhere, then put down to the "
        "smallest set of flags that explains it."
    )


def launch(space: SearchSpace, step: Experiment, number: int) -> str:
    what = "fresh launch" if step.purpose in SERIAL else "launch"
    return f"L{number:02d} ({what}): {short(space, step.config)} - {step.why}."


def side_launch(space: SearchSpace, base: dict[str, Any]) -> str:
    what = short(space, base)
    named = "the baseline" if what == "the baseline" else f"the baseline ({what})"
    return f"Starting {named} on a server of its own beside the winner, for the duet."


def duet(space: SearchSpace, step: Experiment) -> str:
    levels = ",".join(map(str, step.levels))
    return (
        f"Duet of {short(space, step.config)} against the baseline at C={levels}: blocks "
        "alternated at each level, round after round, until the interval decides."
    )


def measure(space: SearchSpace, step: Experiment, h: History) -> str:
    kind = "full sweep" if step.full else "screen"
    if step.at_level:
        kind = "measurement"  # the objective's level alone, as a full sweep measures it
    levels = ",".join(map(str, step.levels))
    return f"{kind.capitalize()} of {short(space, step.config)} at C={levels}: {step.why}."


def conclusion(space: SearchSpace, step: Finish, h: History, planner: Planner) -> str:
    if step.best is None:
        return f"{CONCLUSION} no recommendation - {step.why}."
    level_floor, objective_floor = planner.read(h).floors
    gain = step.value / step.baseline_value - 1 if step.baseline_value else 0.0
    changed = space.diff(space.baseline, step.best)
    what = f"deploy {short(space, step.best)}" if changed else "keep the baseline"
    flags = " ".join(render_flags(step.best))  # a baseline of no flags has none: no "()"
    means = f"{step.value:,.1f} vs baseline {step.baseline_value:,.1f} ({gain:+.1%})"
    if step.paired is not None:  # the launch pairs decide; the means are only what they are
        means = f"the sweeps' means {means}"
    if changed and not step.established:
        what = f"keep the baseline ({short(space, step.best)} is not established)"
        flags = " ".join(render_flags(space.baseline))
    lines = [f"{CONCLUSION} {what}{f' ({flags})' if flags else ''}: {means}; {step.why}."]
    if len(step.policy) > 1:
        parts = []
        for r in step.policy:
            where = span(r.from_concurrency, r.to_concurrency)
            parts.append(f"{where}: {short(space, r.config)}")
        lines.append(
            "Policy: "
            + "; ".join(parts)
            + f" (crossover at C={','.join(map(str, step.crossover))})."
        )
    crashed = h.crashed()
    for config, reason in crashed.values():
        lines.append(f"Failed to start (not retried): {short(space, config)}: {reason[:160]}")
    for learned in planner.read(h).learned_failures():
        lines.append(f"Learned: {learned}")
    lines.append(
        f"Cost: {h.launches_used()} launches ({len(crashed)} failed), "
        f"{count(len(h.measurements), 'sweep')}; {floors_text(level_floor, objective_floor)}."
    )
    return "\n".join(lines)


def floors_text(level_floor: float | None, objective_floor: float | None) -> str:
    if level_floor is None or objective_floor is None:
        return "noise floor unknown (no configuration measured twice)"
    return f"noise floor {level_floor:.1%} per level, {objective_floor:.1%} on the objective"


def concluded(state: RunState) -> bool:
    """An earlier turn stated the conclusion: what is left is closing the todo list."""
    return any(
        block.get("type") == "text" and block["text"].startswith(CONCLUSION)
        for message in state.messages
        if message["role"] == "assistant"
        for block in message["content"]
    )


def closing(search: AskTell, recommended: bool) -> str:
    """The last words: the conclusion from what `search` was told (its Finish when it concludes,
    else the conclusion from what was measured, whatever is left)."""
    h, planner = search.history, search.planner
    step = search.suggest()
    if not isinstance(step, Finish):
        step = search.conclusion()
    if step.best is None or step.failed or not h.measurements:
        why = step.why if step.failed else "nothing was measured"
        return f"Done. No recommendation: {why}."
    text = conclusion(planner.space, step, h, planner)
    if not recommended:
        text += "\n(recommend failed: see its error above; the numbers here are the autopilot's)"
    return text.replace(CONCLUSION, "Done.", 1) + "\nrecommendation.json and the report say more."


def summary(state: RunState, h: History, planner: Planner) -> str:
    r = planner.read(h)
    inc = r.incumbent
    crashed = "; ".join(f"{short(planner.space, c)}: {why}" for c, why in h.crashed().values())
    return "\n".join(
        [
            f"Goal: {state.goal}",
            f"Launches: {h.launches_used()}; sweeps: {len(h.measurements)}.",
            f"Best so far: {short(planner.space, inc)} ({r.value(inc):,.1f}).",
            f"Failed to start: {crashed or 'none'}.",
            "Todo list:",
            render(state.todos),
            "The autopilot re-derives everything from the events; nothing else to carry.",
        ]
    )
