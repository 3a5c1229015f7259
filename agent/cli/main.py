"""The `agent` command. Bad usage is one line on stderr and exit 2; see docs/cli.md."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.cli.args import Parser, fleet_args, positive, runs_dir_arg, within
from state.event_types import skipped_note
from state.files import LinkedRunFile, read_run_file
from state.numbers import Dollars, Minutes, Steps
from state.run import RunError, read_state, resolve_run
from state.text import repair
from tools.domain.config import (
    BudgetConfig,
    ConfigError,
    ModelConfig,
    UsageError,
    defaults_note,
    load_config,
)

# subcommands that parse their own arguments (options may come before RUN)
DELEGATED = ("watch", "report", "bench", "duet", "sim", "lab", "allow")


EPILOG = """\
examples:
  agent run --goal "beat baseline"               a campaign on the built-in lab (no GPU, no key)
  agent run --goal "beat baseline" --run-id demo --config agent.toml   on your GPU box
  agent watch demo                               the live view, from another terminal
  agent say demo "skip speculation"              a note the agent reads before its next step
  agent stop demo                                stop gracefully: servers killed, report written
  agent report demo                              write report.md / report.html again

exit codes of run and resume:
  0 finished   1 internal error   2 bad usage or config   3 budget exhausted
  4 stuck (repeating itself)   130 stopped (agent stop, Ctrl-C)

docs: docs/cli.md (every command), docs/supervising.md, docs/configuration.md; `agent CMD --help`
"""


def build_parser() -> Parser:
    parser = Parser(
        prog="agent",
        description="Run ML-serving optimization campaigns unattended.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    budget = BudgetConfig()
    p = sub.add_parser("run", help="start a campaign")
    p.add_argument("--goal", required=True, help='what to achieve, e.g. "beat baseline"')
    p.add_argument("--config", type=Path, help="agent.toml (default: the built-in lab)")
    p.add_argument(
        "--model",
        help=f"a Claude model id, or 'autopilot' (the offline brain); default: [model] name of "
        f"the config ({ModelConfig().name}) with ANTHROPIC_API_KEY set, else autopilot",
    )
    runs_dir_arg(p)
    p.add_argument("--run-id", help="name of the run folder (default: a timestamp)")
    off = " (leave the option out for the default; agent.toml [budget] sets it too)"
    p.add_argument(
        "--max-steps",
        type=within(Steps, off),
        help=f"budget: model turns (default: [budget] max_steps, {budget.max_steps})",
    )
    p.add_argument(
        "--max-cost",
        type=within(Dollars, off),
        help=f"budget: USD of model usage (default: [budget] max_usd, {budget.max_usd:g})",
    )
    p.add_argument(
        "--max-minutes",
        type=within(Minutes, off),
        help=f"budget: wall-clock minutes (default: [budget] max_minutes, {budget.max_minutes:g})",
    )
    fleet_args(p)

    p = sub.add_parser("resume", help="continue a run from its event log")
    p.add_argument("run", metavar="RUN")
    runs_dir_arg(p)

    p = sub.add_parser("todos", help="print a run's todo list")
    p.add_argument("run", metavar="RUN")
    p.add_argument("--json", action="store_true", help="print exactly todos.json")
    runs_dir_arg(p)

    p = sub.add_parser("replay", help="replay a recorded session (a run or an events file)")
    p.add_argument("source", metavar="RUN_OR_FILE")
    p.add_argument("--check", action="store_true", help="fail with a diff on any drift")
    p.add_argument(
        "--max-steps",
        type=positive(int),
        help="stop the replay after N model turns; --check compares that part (exit 3)",
    )
    runs_dir_arg(p)

    p = sub.add_parser("runs", help="list the runs")
    p.add_argument("--all", action="store_true", help="list the replays (agent replay) too")
    runs_dir_arg(p)

    for name, help_text in (
        ("say", "send the running agent a message"),
        ("stop", "ask a run to stop gracefully"),
        ("budget", "raise a run's limits"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("run", metavar="RUN")
        p.add_argument("--json", action="store_true", help='print {"queued": ..., "run": ...}')
        if name == "say":
            p.add_argument("text")
        if name == "budget":
            raise_it = " (a limit cannot be switched off; give the new, higher value)"
            p.add_argument("--steps", type=within(Steps, raise_it))
            p.add_argument("--usd", type=within(Dollars, raise_it))
            p.add_argument("--minutes", type=within(Minutes, raise_it))
        runs_dir_arg(p)

    for name, help_text in (
        ("watch", "follow a run live"),
        ("report", "write a run's report"),
        ("allow", "let a run's bash run commands matching a rule outright"),
    ):
        p = sub.add_parser(name, help=help_text, add_help=False)
        p.add_argument("rest", nargs=argparse.REMAINDER)
    for name, help_text in (
        ("bench", "benchmark a server over concurrency levels"),
        ("duet", "is B faster than A: both up, measured in alternated blocks"),
        ("sim", "the simulated inference server"),
        ("lab", "set up a real lab on this machine (llama.cpp)"),
    ):
        p = sub.add_parser(name, help=help_text, add_help=False)
        p.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def main(argv: list[str] | None = None) -> int:
    # a non-UTF-8 byte in an argument arrives as a lone surrogate: U+FFFD from here on
    argv = [repair(a) for a in (sys.argv[1:] if argv is None else argv)]
    if argv and argv[0] in DELEGATED:  # everything after the name is the delegate's
        try:
            return delegate(argv[0], argv[1:])
        except KeyboardInterrupt:
            return 130
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = HANDLERS[args.command]
    try:
        return handler(args)
    except (UsageError, ConfigError, RunError, LinkedRunFile) as err:
        print(f"agent {args.command}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `agent todos RUN | head -1`: the reader left, which is fine
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # or the flush at exit raises again
        return 141  # 128 + SIGPIPE, as a tool killed by the signal


def cmd_run(args: argparse.Namespace) -> int:
    from agent.cli.runner import run_campaign
    from agent.session import Limits, choose_model

    if not args.goal.strip():
        raise UsageError("the goal is empty: say what to achieve, e.g. --goal 'beat baseline'")
    config = load_config(args.config)
    defaults = defaults_note(config)  # a box's defaults that are not the lab's: said, not hidden
    if defaults:
        print(defaults, file=sys.stderr)
    model, notice = choose_model(args.model, config)
    if notice:
        print(notice, file=sys.stderr)
    limits = Limits(args.max_steps, args.max_cost, args.max_minutes)
    if args.fleet or args.boxes:
        from agent.fleet.run import run_fleet_campaign

        return run_fleet_campaign(
            args.goal, config, model, args.runs_dir, args.run_id, limits, args.boxes
        )
    return run_campaign(args.goal, config, model, args.runs_dir, args.run_id, limits)


def cmd_resume(args: argparse.Namespace) -> int:
    from agent.cli.runner import resume_campaign

    return resume_campaign(resolve_run(args.run, args.runs_dir))


def cmd_todos(args: argparse.Namespace) -> int:
    from state.todos import render

    path = resolve_run(args.run, args.runs_dir)
    if args.json:
        try:  # exactly the file, never what a link in its place points to
            sys.stdout.write(read_run_file(path / "todos.json").decode(errors="replace"))
        except FileNotFoundError:
            sys.stdout.write('{"todos": []}\n')
    else:
        state = read_state(path)
        print(render(state.todos))
        note = skipped_note(state.skipped)
        if note is not None:
            print(f"agent todos: {path / 'events.jsonl'}: {note}", file=sys.stderr)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from agent.session_replay import replay

    source = Path(args.source)
    if not source.exists():
        source = resolve_run(args.source, args.runs_dir)
    try:
        code, run, drift = asyncio.run(replay(source, args.runs_dir, max_steps=args.max_steps))
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(str(err)) from None
    run.close()  # the replay is over: its folder is anyone's to read
    print(f"replayed {source} into {run.path}: exit {code}")
    if not args.check:  # the replayed run's own exit code, as `agent run` would have ended
        if drift:
            print(f"DRIFT: {drift}", file=sys.stderr)
        return code
    # --check: whether the replay matched, whatever the recorded run's own end (a stop: 130)
    if drift:
        print(f"DRIFT: {drift}", file=sys.stderr)
        return 1
    ended = run.state.finished or {}
    if ended.get("status") == "cut":
        print(
            f"check: the first {run.state.steps} model turns match the recording "
            f"(--max-steps cut the replay; the rest is not compared)"
        )
        return 3
    print("check: no drift")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from state.events import read_events
    from state.fold import fold

    if not args.runs_dir.is_dir():
        raise RunError(f"runs folder {args.runs_dir} does not exist")
    rows: list[tuple[str, ...]] = []
    replays = 0  # `agent replay`'s runs: checks of a recording, not campaigns
    for path in sorted(args.runs_dir.iterdir()):
        if (path / "events.jsonl").is_file():
            try:
                state = fold(read_events(path / "events.jsonl").events)
            except (ValueError, LinkedRunFile) as err:  # corrupt, or a link: list it, go on
                rows.append((path.name, "?", "?", f"unreadable: {err}", ""))
                continue
            end = state.finished["status"] if state.finished else "running or interrupted"
            if state.replay_of is not None:
                replays += 1
                if not args.all:
                    continue
                end = f"replay: {end}"
            rows.append((path.name, state.brain, str(state.steps), end, state.goal))
    hidden = (
        ""
        if args.all or not replays
        else (f"{replays} replay{'s' * (replays > 1)} not listed (agent runs --all)")
    )
    if not rows:
        print(f"no runs in {args.runs_dir}" + (f"; {hidden}" if hidden else ""))
        return 0
    rows.insert(0, ("RUN", "BRAIN", "STEPS", "STATUS", "GOAL"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:  # the goal, free text of any length, goes last and unpadded
        cells = [
            c.rjust(w) if i == 2 else c.ljust(w)
            for i, (c, w) in enumerate(zip(row[:4], widths, strict=True))
        ]
        print("  ".join([*cells, row[4]]).rstrip())
    if hidden:
        print(hidden)
    return 0


def cmd_inbox(args: argparse.Namespace) -> int:
    from state.inbox import InboxError
    from state.inbox import send as queue

    def send(path: Path, kind: str, **body: Any) -> None:
        try:
            queue(path, kind, **body)
        except (InboxError, ValueError, OSError) as err:  # the key, or a message it refuses
            raise RunError(f"cannot queue it for run {path.name}: {err}") from None

    path = resolve_run(args.run, args.runs_dir)
    finished = read_state(path).finished
    if args.command == "stop" and finished:  # nothing to stop: queueing it would stop a resume
        status = finished.get("status") or "ended"
        if args.json:
            print(json.dumps({"queued": None, "run": path.name, "ended": status}))
        else:
            print(f"run {path.name} has already ended ({status}); nothing to stop")
        return 0
    if args.command == "say":
        if not args.text.strip():
            raise UsageError("the message is empty")
        send(path, "say", text=args.text)
        said = "the agent reads it before its next step"
    elif args.command == "stop":
        send(path, "stop")
        said = "the run stops shortly: servers killed, report written, exit 130"
    else:
        limits = {"max_steps": args.steps, "max_usd": args.usd, "max_minutes": args.minutes}
        if all(v is None for v in limits.values()):
            raise UsageError("say which limit to raise: --steps, --usd or --minutes")
        send(path, "budget", limits=limits)
        said = "the new limits apply before the next step"
    if finished:
        said = f"the run has ended ({finished.get('status')}); it waits for `agent resume`"
    if args.json:
        ended = {"ended": finished.get("status")} if finished else {}
        print(json.dumps({"queued": args.command, "run": path.name, **ended}))
    else:
        what = {"say": "message", "stop": "stop request", "budget": "new budget"}[args.command]
        print(f"{what} queued for run {path.name}: {said}")
    return 0


def delegate(command: str, argv: list[str]) -> int:
    """Subcommands that own their argument parsing."""
    if command == "sim":
        from sim.cli import main as sim_main
        from tools.domain import lab_truth  # the campaign's objective ranks the sim's truth

        return sim_main(argv, lab_truth)
    if command == "bench":
        from agent.cli.bench import main as bench_main

        return bench_main(argv)
    if command == "duet":
        from agent.cli.duet import main as duet_main

        return duet_main(argv)
    if command == "lab":
        from agent.cli.lab import main as lab_main

        return lab_main(argv)
    if command == "allow":
        from agent.cli.allow import main as allow_main

        return allow_main(argv)
    if command == "watch":
        from agent.cli.watch import main as watch_main

        return watch_main(argv)
    from agent.cli.report import main as report_main

    return report_main(argv)


def cmd_delegate(args: argparse.Namespace) -> int:
    return delegate(args.command, args.rest)


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": cmd_run,
    "resume": cmd_resume,
    "todos": cmd_todos,
    "replay": cmd_replay,
    "runs": cmd_runs,
    "say": cmd_inbox,
    "stop": cmd_inbox,
    "budget": cmd_inbox,
    "sim": cmd_delegate,
    "bench": cmd_delegate,
    "duet": cmd_delegate,
    "watch": cmd_delegate,
    "report": cmd_delegate,
    "lab": cmd_delegate,
    "allow": cmd_delegate,
}

if __name__ == "__main__":
    raise SystemExit(main())
