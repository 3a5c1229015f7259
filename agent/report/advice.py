"""The report's section on the planner's advice (issue 26.6): when the model consulted `plan`, which
of its steps followed the advice and what it did instead where it did not.

A step is a model turn that made tool calls other than bookkeeping (todos, plan itself); it acts
on the advice of the last `plan` result before it that no step acted on yet. It followed the
advice when it made the same calls: the same tools on the same configuration - start_server's
flags, run_benchmark's levels, recommend's config, compare's results, kill_server's name; labels,
request counts, ports and reasons are the model's to choose.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agent.brains.autopilot.plan_tool import BOOKKEEPING
from agent.report.figures import Figures
from agent.report.render import Block, Heading, Para, Table
from state.events import Event, call_input
from tools.domain.space import render_flags


@dataclass(frozen=True)
class Step:
    turn: int  # the model's turn, counted from 1
    advised: list[dict[str, Any]]  # the calls `plan` advised
    did: list[dict[str, Any]]  # the calls the model made

    @property
    def followed(self) -> bool:
        return sorted(map(_key, self.advised)) == sorted(map(_key, self.did))


def steps(events: list[Event]) -> tuple[int, list[Step]]:
    """How many times `plan` answered, and every step that acted on its advice."""
    advice: list[dict[str, Any]] | None = None
    consulted, turn, out = 0, 0, []
    for e in events:
        if e["type"] == "tool_result" and e.get("name") == "plan" and not e.get("is_error"):
            consulted += 1
            advice = list((e.get("data") or {}).get("calls") or [])
        elif e["type"] == "message" and e.get("role") == "assistant":
            turn += 1
            did = [
                {"tool": b["name"], "input": b.get("input") or {}}
                for b in e["content"]
                if b.get("type") == "tool_use" and b["name"] not in BOOKKEEPING
            ]
            if did and advice is not None:
                out.append(Step(turn, advice, did))
                advice = None
    return consulted, out


def section(f: Figures) -> list[Block]:
    consulted, acted = steps(f.m.events)
    if not consulted:
        return []
    kept = [s.turn for s in acted if s.followed]
    left = [s for s in acted if not s.followed]
    text = (
        f"The model consulted the planner (`plan`, the autopilot's next experiment) {consulted} "
        f"times; {len(kept)} of the {len(acted)} steps that came after its advice followed it"
    )
    text += f" (turns {_turns(kept)})." if kept else "."
    out: list[Block] = [Heading(2, "Planner advice"), Para(text)]
    if left:
        out.append(Para("Where the model did otherwise:"))
        rows = [[str(s.turn), _calls(s.advised), _calls(s.did)] for s in left]
        out.append(Table(["turn", "the planner advised", "the model did"], rows, right={0}))
    return out


def _sorted(value: Any) -> Any:
    """A list in an order of its own (by text: the model's may mix types), else as it is."""
    return sorted(value, key=str) if isinstance(value, list) else value


def _key(call: dict[str, Any]) -> str:
    tool, inp = call.get("tool") or call.get("name"), call.get("input")
    if not isinstance(inp, dict):  # the model's malformed call: compared as it is
        what: Any = inp
    elif tool == "start_server":
        what = [inp.get("name", "server"), inp.get("flags") or {}]
    elif tool == "run_benchmark":
        what = [inp.get("server", "server"), _sorted(inp.get("concurrency") or [])]
    elif tool == "recommend":
        what = [inp.get("config"), inp.get("policy")]
    elif tool == "compare":
        what = _sorted(inp.get("results") or [])
    elif tool == "kill_server":
        what = inp.get("name")
    else:
        what = inp
    return json.dumps([tool, what], sort_keys=True)


def _calls(calls: list[dict[str, Any]]) -> str:
    parts = []
    for c in calls:
        inp = call_input(c.get("input"))
        flags, levels = inp.get("flags"), inp.get("concurrency")
        if c["tool"] == "start_server":
            shown = render_flags(flags) if isinstance(flags, dict) else []
            parts.append(" ".join(["start_server", *shown]))
        elif c["tool"] == "run_benchmark":
            levels = ",".join(map(str, levels if isinstance(levels, list) else []))
            parts.append(f"run_benchmark C={levels}")
        else:
            parts.append(str(c["tool"]))
    return "; ".join(parts) or "-"


def _turns(turns: list[int]) -> str:
    """1, 2, 3, 5 -> "1-3, 5"."""
    spans: list[list[int]] = []
    for t in turns:
        if spans and t == spans[-1][-1] + 1:
            spans[-1].append(t)
        else:
            spans.append([t])
    return ", ".join(f"{s[0]}-{s[-1]}" if len(s) > 1 else str(s[0]) for s in spans)
