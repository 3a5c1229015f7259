"""The History of a run, rebuilt from its fold: what the brain's own tool calls did.

Launches and crashes come from the conversation (each start_server call and its result), the
numbers from the `benchmark` events. A sweep the autopilot split into several run_benchmark calls
(one per group of levels, so that each level runs about as many requests as it has streams) is one
measurement again: the calls of one turn on one launch share a label.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent.brains.autopilot.history import History, Launch, Measurement
from state.fold import RunState
from tools.base import INTERRUPTED_PREFIX
from tools.domain.space import SearchSpace

RESULT_ID = re.compile(r"\(id ([^,\s)]+)")
# a port someone else holds says nothing about the configuration: the brain moves to another port
PORT_BUSY = re.compile(r"port \d+ .*\bin use\b|address already in use", re.IGNORECASE)


def tool_exchanges(state: RunState) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(tool name, input, result block) for every answered tool call, in order."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in state.messages:
        for block in message["content"]:
            if block.get("type") == "tool_use":
                calls[block["id"]] = (block["name"], block.get("input") or {})
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in calls:
                name, inp = calls.pop(block["tool_use_id"])
                yield name, inp, block


def busy_port(block: dict[str, Any]) -> bool:
    content = block.get("content")
    return bool(PORT_BUSY.search(content if isinstance(content, str) else json.dumps(content)))


def interrupted(block: dict[str, Any]) -> bool:
    """A result that agent/recover.py wrote for a call a crash of the agent cut short."""
    return bool(block.get("is_error")) and first_line(block).startswith(INTERRUPTED_PREFIX)


def first_line(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):  # API form: a list of text blocks
        content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content or "").strip().splitlines()[0][:300] if content else ""


def observe(
    state: RunState, space: SearchSpace, server: str, run_path: Path | None = None, slo: Any = None
) -> History:
    h = History(space)
    by_id = {str(r.get("id")): r for r in state.results}
    unmatched = list(state.results)
    merged: dict[tuple[int, str], int] = {}  # (launch, label) -> index in h.measurements
    failures: dict[int, int] = {}  # launch -> failed run_benchmark calls
    for name, inp, block in tool_exchanges(state):
        error = bool(block.get("is_error"))
        if error and interrupted(block):
            # cut by a crash of the agent (agent/recover.py): no verdict on the configuration
            if name == "start_server" and inp.get("name", "server") == server:
                h.running = None  # the launch never finished: launch it again
            continue
        if name == "start_server" and inp.get("name", "server") == server:
            if error and busy_port(block):
                h.running = None
                continue
            flags = space.complete(inp.get("flags") or {})
            h.launches.append(
                Launch(flags, ok=not error, reason=first_line(block) if error else "")
            )
            h.running = None if error else len(h.launches) - 1
        elif name == "kill_server" and inp.get("name") in (None, server):
            h.running = None
        elif name == "run_benchmark" and h.running is not None:
            if error:  # twice on one launch: that server is no good, the next try relaunches
                failures[h.running] = failures.get(h.running, 0) + 1
                if failures[h.running] >= 2:
                    h.broken.setdefault(h.running, first_line(block))
                    h.running = None
                continue
            event = _event_for(block, by_id, unmatched)
            if event is None:
                continue
            label = str(inp.get("label") or event.get("label") or "")
            per = {int(c): float(v or 0.0) for c, v in (event.get("summary") or {}).items()}
            ok = _slo_ok(event, run_path, slo) if slo is not None else None
            where = merged.get((h.running, label))
            if where is not None and where == len(h.measurements) - 1:
                old = h.measurements[where]
                both = {**old.per_level, **per}
                slo_both = {**(old.slo_ok or {}), **(ok or {})} if ok is not None else None
                h.measurements[where] = Measurement(
                    old.config,
                    old.launch,
                    dict(sorted(both.items())),
                    label,
                    slo_both,
                    (*old.ids, str(event.get("id"))),
                )
                continue
            config = h.launches[h.running].config
            h.measurements.append(
                Measurement(config, h.running, per, label, ok, (str(event.get("id")),))
            )
            merged[(h.running, label)] = len(h.measurements) - 1
    if server not in state.servers:  # it died, or was killed outside our calls
        h.running = None
    return h


def _event_for(
    block: dict[str, Any], by_id: dict[str, dict[str, Any]], unmatched: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The benchmark event a run_benchmark result announced (its id is in the text)."""
    content = block.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    for found in RESULT_ID.findall(text):
        if found in by_id:
            event = by_id[found]
            if event in unmatched:
                unmatched.remove(event)
            return event
    return unmatched.pop(0) if unmatched else None  # pruned text: the events keep their order


def _slo_ok(event: dict[str, Any], run_path: Path | None, slo: Any) -> dict[int, bool] | None:
    path = Path(str(event.get("path", "")))
    if run_path is not None and not path.is_absolute():
        path = run_path / path
    try:
        points = json.loads(path.read_text())["points"]
    except (OSError, ValueError, KeyError):
        return None
    out = {}
    for p in points:
        met = (slo.ttft_p99_ms is None or p.get("p99_ttft_ms", 0) <= slo.ttft_p99_ms) and (
            slo.tpot_p99_ms is None or p.get("p99_tpot_ms", 0) <= slo.tpot_p99_ms
        )
        out[int(p["max_concurrency"])] = bool(met) and not p.get("level_failed")
    return out
