"""`agent report RUN`, and the report every run writes at its end: report.md with the chart PNG
beside it, and a self-contained report.html (the chart embedded). See docs/report.md."""

from __future__ import annotations

import sys
from pathlib import Path

from agent.report.build import build
from agent.report.facts import Facts, gather
from agent.report.render import Image, to_html, to_markdown
from state.atomic import write_atomic
from state.events import read_events
from state.run import Run


def render_files(facts: Facts, out_dir: Path) -> list[Path]:
    """Write report.md, its chart and report.html into out_dir; returns the paths written."""
    blocks = build(facts)
    written = []
    for block in blocks:
        if isinstance(block, Image):
            write_atomic(out_dir / block.file, block.png, mode=0o644)
            written.append(out_dir / block.file)
    title = f"Campaign report: {facts.state.goal or facts.run_path.name}"
    for name, text in (("report.md", to_markdown(blocks)), ("report.html", to_html(blocks, title))):
        write_atomic(out_dir / name, text.encode(), mode=0o644)
        written.append(out_dir / name)
    return written


def write_report(run: Run, status: str | None = None) -> None:
    """Called by the runner at the end of every run, before run_finished: it never raises, a
    report that cannot be written must not cost the run its clean ending."""
    try:
        facts = gather(run.path, read_events(run.events_path).events, status)
        render_files(facts, run.path)
    except Exception as err:  # the run's own results are safe in events.jsonl either way
        print(f"report: not written: {type(err).__name__}: {err}", file=sys.stderr)
