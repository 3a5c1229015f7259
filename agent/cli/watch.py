"""`agent watch RUN [--json]`: follow a run from another process (docs/supervising.md)."""

from __future__ import annotations

import sys

from rich.console import Console

from agent.cli.args import Parser, runs_dir_arg
from agent.view.watch import NoEvents, stream_json, watch_view
from state.files import LinkedRunFile
from state.fold import BadEvent
from state.run import RunError, resolve_run


def parser() -> Parser:
    parser = Parser(
        prog="agent watch",
        description="Follow a run live: todos, the running tool, servers, benchmarks, spend.",
    )
    parser.add_argument("run", metavar="RUN", help="a run id under the runs folder, or a path")
    parser.add_argument("--json", action="store_true", help="stream the events as NDJSON")
    parser.add_argument("--once", action="store_true", help="show the current state and exit")
    parser.add_argument(
        "--fleet",
        action="store_true",
        help="with --json: after each fleet event, a fleet_view line (boxes, trials, utilisation)",
    )
    runs_dir_arg(parser)
    parser.add_argument("--interval", type=float, default=0.25, help="poll period, seconds")
    parser.add_argument(
        "--grace",
        type=float,
        default=2.0,
        help="after run_finished, wait this long for a resume before exiting (seconds)",
    )
    return parser


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.interval <= 0 or args.grace < 0:
        print("agent watch: --interval must be > 0 and --grace >= 0", file=sys.stderr)
        return 2
    try:
        path = resolve_run(args.run, args.runs_dir) / "events.jsonl"
    except RunError as err:
        print(f"agent watch: {err}", file=sys.stderr)
        return 2
    if args.fleet and not args.json:
        print(
            "agent watch: --fleet goes with --json (the view shows a fleet already)",
            file=sys.stderr,
        )
        return 2
    try:
        if args.json:
            return stream_json(path, sys.stdout, args.interval, args.grace, args.once, args.fleet)
        board = watch_view(path, Console(), args.interval, args.grace, args.once)
    except NoEvents as err:
        print(f"agent watch: {err}", file=sys.stderr)
        return 1
    except LinkedRunFile as err:  # the log is a symbolic link: not followed
        sys.stdout.flush()
        print(f"agent watch: {err}", file=sys.stderr)
        return 2
    except ValueError as err:  # a line damaged or the sequence broken: as `todos` says it
        sys.stdout.flush()
        # an event edited into the log (state/fold.py BadEvent) is no torn line either
        why = "" if isinstance(err, BadEvent) else "; the log was damaged, not torn"
        print(f"agent watch: {path}: {err}{why}", file=sys.stderr)
        return 2
    return 1 if board.gone else 0
