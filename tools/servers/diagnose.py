"""A one-line diagnosis and the relevant log lines when a server does not come up."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tools.servers.profiles import Engine

EXCEPTION = re.compile(r"^\s*(?:[\w.]+\.)?\w*(?:Error|Exception)\b(?::\s.*)?$")
EXCERPT_LINES = 40


@dataclass
class Diagnosis:
    text: str  # one line
    excerpt: str  # the log lines that show it
    cause: str = ""  # the profile failure's typed cause ("port_busy"), "" when none is named


def failure_in(engine: Engine, line: str) -> bool:
    return any(pattern.search(line) for pattern, _, _ in engine.failures)


def diagnose(engine: Engine, log_text: str, port: int, exit_code: int | None) -> Diagnosis:
    lines = log_text.splitlines()
    exception = next((ln.strip() for ln in reversed(lines) if EXCEPTION.match(ln)), None)
    for pattern, template, cause in engine.failures:
        for i, line in enumerate(lines):
            found = pattern.search(line)
            if found:
                match = found.group(1) if found.re.groups and found.group(1) else found.group(0)
                # {after}: the two lines after the match (pydantic names the field, then its error)
                after = [ln.strip() for ln in lines[i + 1 :] if ln.strip()][:2]
                text = template.format(
                    port=port,
                    line=_short(line),
                    after=_short(": ".join(after)),
                    match=_short(match),
                    exception=_short(exception or line),
                )
                start = max(0, i - 3)
                return Diagnosis(text, "\n".join(lines[start : start + EXCERPT_LINES]), cause)
    tail = "\n".join(lines[-EXCERPT_LINES:])
    last = next((ln.strip() for ln in reversed(lines) if ln.strip()), "(the log is empty)")
    how = f"exited with code {exit_code}" if exit_code is not None else "is gone"
    return Diagnosis(
        f"the server process {how} before it was ready; last log line: {_short(last)}", tail
    )


def _short(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
