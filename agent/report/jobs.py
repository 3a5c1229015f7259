"""The report's section on long jobs (a [pipeline] before the campaign, docs/pipeline.md): each
job, how it ended, and what the pipeline made - the trained drafter and its acceptance length."""

from __future__ import annotations

import re
from datetime import datetime

from agent.report.figures import Figures
from agent.report.render import Block, Heading, Para, Table

ACCEPT = re.compile(r"acceptance length (\d+(?:\.\d+)?)[^\n.]*")


def jobs(f: Figures) -> list[Block]:
    runs = f.m.state.job_runs
    if not runs:
        return []
    rows = []
    for name, run in runs.items():
        started, ended = run["started"], run.get("ended")
        if ended is None:
            how, took = "still running (or not looked at since)", "-"
        else:
            code = ended.get("exit_code")
            how = "stopped" if ended.get("stopped") else "OK" if code == 0 else f"exit {code}"
            took = f"{(_ts(ended['ts']) - _ts(started['ts'])).total_seconds():.0f} s"
        rows.append([name, f"`{started.get('command', '')}`", how, took])
    out: list[Block] = [Heading(2, "Long jobs"), Table(["job", "command", "ended", "took"], rows)]
    reason = f.m.recommendation.reason if f.m.recommendation is not None else ""
    drafter = reason[reason.find("Trained drafter") :] if "Trained drafter" in reason else ""
    if not drafter:  # no recommendation: the conversion's own words, if a job said them
        for e in reversed(f.m.events):
            m = ACCEPT.search(str(e.get("text", ""))) if e["type"] == "tool_result" else None
            if m:
                drafter = f"Trained drafter: {m.group(0)}."
                break
    if drafter:
        out.append(Para(drafter))
    return out


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
