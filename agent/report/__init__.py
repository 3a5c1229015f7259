"""`agent report RUN`, and the report every run writes at its end: report.md with the chart PNG
beside it, and a self-contained report.html (the chart embedded). See docs/report.md.

One report flows one way: what was measured (measured.py: the run folder read into typed results
grouped by configuration) -> the figures (figures.py: baseline, winner, ratios, noise floors, all
from tools/domain/stats.py) -> the sections (outcome.py, ablation.py, trust.py, runbook.py: words
and tables) -> rendering (chart.py, render.py: Markdown, HTML, PNG).
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent.report import advice, deploy
from agent.report.ablation import ablation
from agent.report.figures import Figures, compute
from agent.report.jobs import jobs
from agent.report.measured import read_run
from agent.report.outcome import all_configs, conclusion, curves
from agent.report.over_time import section as over_time_section
from agent.report.pareto import section as pareto_section
from agent.report.render import Block, Heading, Image, Para, to_html, to_markdown
from agent.report.runbook import cost_section, reproduce, setup
from agent.report.trust import caveats, drift_warning, failed, incomplete, noise
from state.atomic import write_atomic
from state.events import Event, read_events
from state.run import Run

SECTIONS = [
    incomplete,
    drift_warning,
    conclusion,
    deploy.section,
    jobs,
    curves,
    pareto_section,
    over_time_section,
    all_configs,
    ablation,
    failed,
    noise,
    advice.section,
]
SECTIONS += [setup, reproduce, cost_section, caveats]


def gather(run_path: Path, events: list[Event], status: str | None = None) -> Figures:
    """The figures of a run folder (its events, and its result files where present)."""
    return compute(read_run(run_path, events, status))


def build(f: Figures) -> list[Block]:
    s = f.m.state
    head = f"Run `{s.run_id or f.m.run_path.name}` · brain {s.brain or '?'}"
    head += f" ({s.model})" if s.model and s.model != s.brain else ""
    head += f" · status **{f.m.status}** · started {s.started_ts[:19].replace('T', ' ')} UTC"
    blocks: list[Block] = [Heading(1, f"Campaign report: {s.goal}"), Para(head)]
    for section in SECTIONS:
        blocks += section(f)
    return blocks


def render_files(f: Figures, out_dir: Path) -> list[Path]:
    """Write report.md, its chart, report.html and deploy/ (the winner's launch script, compose
    and Kubernetes files) into out_dir; returns the paths written."""
    blocks = build(f)
    written = []
    for block in blocks:
        if isinstance(block, Image):
            write_atomic(out_dir / block.file, block.png)  # 0600 like the whole run folder
            written.append(out_dir / block.file)
    title = f"Campaign report: {f.m.state.goal or f.m.run_path.name}"
    for name, text in (("report.md", to_markdown(blocks)), ("report.html", to_html(blocks, title))):
        write_atomic(out_dir / name, text.encode())
        written.append(out_dir / name)
    return written + deploy.write(f, out_dir)  # last: a failure there leaves the report written


def write_report(run: Run, status: str | None = None) -> None:
    """Called by the runner at the end of every run, before run_finished: it never raises, a
    report that cannot be written must not cost the run its clean ending."""
    try:
        render_files(gather(run.path, read_events(run.events_path).events, status), run.path)
    except Exception as err:  # the run's own results are safe in events.jsonl either way
        print(f"report: not written: {type(err).__name__}: {err}", file=sys.stderr)
