"""`agent report RUN`, and the report every run writes at its end: report.md with the chart PNG
beside it, and a self-contained report.html (the chart embedded). See docs/report.md."""

from __future__ import annotations

import sys
from pathlib import Path

from agent.report_build import build
from agent.report_facts import Facts, gather
from agent.report_render import Image, to_html, to_markdown
from state.atomic import write_atomic
from state.events import read_events
from state.run import Run, RunError, resolve_run


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


def main(argv: list[str]) -> int:
    from agent.cli import Parser, runs_dir_arg  # bad usage: one line on stderr, exit 2

    parser = Parser(
        prog="agent report", description="Write a run's report (report.md, report.html, chart)."
    )
    parser.add_argument("run", metavar="RUN", help="a run id under the runs folder, or a path")
    runs_dir_arg(parser)
    parser.add_argument("--out", type=Path, help="write the files here (default: the run folder)")
    args = parser.parse_args(argv)
    try:
        path = resolve_run(args.run, args.runs_dir)
        contents = read_events(path / "events.jsonl")
        if not contents.events:
            raise RunError(f"{path}: events.jsonl is empty")
    except (RunError, ValueError) as err:
        print(f"agent report: {err}", file=sys.stderr)
        return 2
    out = args.out or path
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = render_files(gather(path, contents.events), out)
    except OSError as err:
        print(f"agent report: cannot write to {out}: {err.strerror or err}", file=sys.stderr)
        return 1
    for p in written:
        print(p)
    return 0
