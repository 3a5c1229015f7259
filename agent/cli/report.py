"""`agent report RUN [--out DIR]`: write a run's report again."""

from __future__ import annotations

import sys
from pathlib import Path

from agent.cli.args import Parser, runs_dir_arg
from agent.report import gather, render_files
from state.event_types import skipped_note
from state.events import read_events
from state.fold import BadEvent
from state.run import RunError, resolve_run


def parser() -> Parser:
    parser = Parser(
        prog="agent report", description="Write a run's report (report.md, report.html, chart)."
    )
    parser.add_argument("run", metavar="RUN", help="a run id under the runs folder, or a path")
    runs_dir_arg(parser)
    parser.add_argument("--out", type=Path, help="write the files here (default: the run folder)")
    return parser


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        path = resolve_run(args.run, args.runs_dir)
        try:
            contents = read_events(path / "events.jsonl")
        except ValueError as err:  # a damaged line or a broken sequence, not a torn tail
            damaged = f"{path / 'events.jsonl'}: {err}; the log was damaged, not torn"
            raise RunError(damaged) from None
        if not contents.events:
            raise RunError(f"{path}: events.jsonl is empty")
    except RunError as err:
        print(f"agent report: {err}", file=sys.stderr)
        return 2
    out = args.out or path
    try:
        gathered = gather(path, contents.events)
    except BadEvent as err:  # an event edited into the log (state/fold.py)
        print(f"agent report: {path / 'events.jsonl'}: {err}", file=sys.stderr)
        return 2
    note = skipped_note(gathered.m.state.skipped)
    if note is not None:
        print(f"agent report: {path / 'events.jsonl'}: {note}", file=sys.stderr)
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = render_files(gathered, out)
    except OSError as err:
        print(f"agent report: cannot write to {out}: {err.strerror or err}", file=sys.stderr)
        return 1
    for p in written:
        print(p)
    return 0
