"""Supervisor messages (`agent say RUN TEXT`) the autopilot understands. Every message is
acknowledged in the next turn's narration; these change the campaign (docs/autopilot.md):

    skip speculation   no speculative configuration is launched from now on
    focus on C=N       the objective becomes the throughput at C=N (the nearest sweep level)
    wrap up            no new candidates: re-validate the best and conclude
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

WRAP = re.compile(r"\b(wrap(ping)?[ -]?up|finish|conclude|stop exploring|wind down|enough)\b")
SKIP = re.compile(
    r"\b(skip|no|drop|without|stop|disable|avoid|forget)\b[^.;]{0,30}"
    r"(specul\w*|eagle\w*|spec\b|draft\w*)"
)
FOCUS = re.compile(r"\bfocus\b[^.;]{0,20}?\b(?:c|concurrency)\s*(?:=|of|at)?\s*(\d+)")
ACK = re.compile(r"Supervisor #(\d+)")
KNOWN = "'skip speculation', 'focus on C=N', 'wrap up'"


@dataclass(frozen=True)
class Directives:
    skip: tuple[str, ...] = ()  # flags held at their baseline value
    focus: int | None = None  # the objective becomes the throughput at this level
    wrap_up: bool = False


def read(
    messages: list[dict[str, Any]], speculative: tuple[str, ...], levels: tuple[int, ...]
) -> tuple[Directives, dict[int, str]]:
    """The directives in force, and a one-line reply per message (by its seq). `speculative`:
    the search space's flags that belong to speculation, as the engine profile says
    (tools.servers.speculation), so 'skip speculation' works for every engine."""
    skip: tuple[str, ...] = ()
    focus, wrap_up = None, False
    replies: dict[int, str] = {}
    for m in messages:
        text, seq, said = str(m.get("text", "")).lower(), int(m.get("seq", 0)), []
        if SKIP.search(text):
            flags = speculative
            skip = tuple(dict.fromkeys((*skip, *flags)))
            said.append(
                "speculation is dropped from the search"
                if flags
                else "there is no speculative flag in the search space to skip"
            )
        found = FOCUS.search(text)
        if found:
            want = int(found.group(1))
            focus = min(levels, key=lambda c: abs(math.log(c / want))) if want > 0 else None
            if focus is None:
                said.append(f"C={want} is not a concurrency level")
            else:
                note = "" if focus == want else f" (the nearest sweep level to C={want})"
                said.append(f"the objective is now the throughput at C={focus}{note}")
        if WRAP.search(text):
            wrap_up = True
            said.append("wrapping up: no new candidates; the best is re-validated and reported")
        replies[seq] = "; ".join(said) if said else f"noted; the autopilot acts on {KNOWN}"
    return Directives(skip, focus, wrap_up), replies


def acknowledged(state_messages: list[dict[str, Any]]) -> set[int]:
    """The supervisor messages an earlier autopilot turn already answered."""
    seen: set[int] = set()
    for message in state_messages:
        if message["role"] != "assistant":
            continue
        for block in message["content"]:
            if block.get("type") == "text":
                seen.update(int(s) for s in ACK.findall(block["text"]))
    return seen
