"""What the recommendation says of the drafter a [pipeline] made (docs/pipeline.md): the
acceptance length its server measured (read from the log of the launch that served it, once,
before the recommendation), the one its conversion printed, and per level whether it beat the
baseline by more than the noise floor (tools/domain/stats.py)."""

from __future__ import annotations

import re
from typing import Any

from agent.brains.autopilot.history import History
from agent.brains.autopilot.observe import tool_exchanges
from state.fold import RunState
from tools.domain import stats
from tools.domain.config import Config
from tools.domain.decision import at_level

ACCEPT = re.compile(r"acceptance length (\d+(?:\.\d+)?)")
PROBE = "accept len"  # what an EAGLE server's decode log lines say (SGLang, the simulator)
MEASURED = re.compile(rf"{PROBE}: (\d+(?:\.\d+)?)")


def acceptance_probe(state: RunState, config: Config) -> dict[str, Any] | None:
    """Before the recommendation: the read_log call that finds the acceptance length the engine
    measured in the log of the last launch that served the drafter (SGLang's decode lines say
    `accept len: X`) - once."""
    p = config.pipeline
    if p is None or not p.drafter:
        return None
    logs = []
    for name, inp, block in tool_exchanges(state):
        if name == "read_log" and PROBE in str(inp.get("pattern")):
            return None
        log = block["data"].get("log") if name == "start_server" else None
        if log and p.drafter in map(str, (inp.get("flags") or {}).values()):
            logs.append(str(log))
    if not logs:
        return None
    return {"path": logs[-1], "mode": "grep", "pattern": f"{PROBE}: [0-9.]+", "context": 0}


def with_drafter(
    why: str, state: RunState, config: Config, h: History, level_floor: float | None
) -> str:
    """The recommendation's reason, with what the pipeline's drafter did when there is one."""
    note = drafter_note(state, config, h, level_floor)
    return f"{why.rstrip('.')}.{note}" if note else why


def drafter_note(state: RunState, config: Config, h: History, level_floor: float | None) -> str:
    """What the recommendation says of the trained drafter: its acceptance length (from the
    conversion's log) and, per level measured, whether it beat the baseline by more than the
    noise floor (tools/domain/stats.py)."""
    p = config.pipeline
    if p is None:
        return ""
    length = None  # the conversion's, in the last lines of its job's log (job_status's `tail`)
    for name, _, block in reversed(list(tool_exchanges(state))):
        tail = block["data"].get("tail") if name == "job_status" else None
        m = ACCEPT.search("\n".join(map(str, tail or [])))
        if m:
            length = m.group(1)
            break
    measured = None  # the server's, in the lines of its log the probe found (read_log's `matches`)
    for name, inp, block in tool_exchanges(state):
        if name == "read_log" and PROBE in str(inp.get("pattern")):
            found = [
                m.group(1)
                for line in block["data"].get("matches") or []
                if (m := MEASURED.search(str(line)))
            ]
            measured = found[-1] if found else measured
    text = f" Trained drafter: acceptance length {length or 'unknown'} (its conversion)"
    if measured:
        at = length or "unknown"
        text = f" Trained drafter: acceptance length {measured} measured by its server ({at} at "
        text += "its conversion)"
    served = [c for c in h.configs() if p.drafter and p.drafter in map(str, c.values())]
    base = h.estimate(h.space.baseline)
    if not served or not base:
        return text + "; not measured."
    ratios = stats.level_ratios(h.estimate(served[-1]), base)
    won = [c for c, r in ratios.items() if at_level(r, level_floor) == "win"]
    lost = [c for c in ratios if c not in won]
    if not ratios:
        return text + "; not measured."
    if not won:
        best = max(ratios, key=lambda c: ratios[c])
        return (
            f"{text}; served, it beats the baseline at no level by more than the noise "
            f"(best {ratios[best]:.3f}x at C={best})."
        )
    rest = f", not at C={', '.join(map(str, lost))}" if lost else ""
    return f"{text}; served, it beats the baseline at C={', '.join(map(str, won))}{rest}."
