"""`agent allow RUN "RULE"`: let a running campaign's bash run matching commands outright.

The rule (`Bash(nvidia-smi -pm:*)`, `kill -9:*`, as [guard] allow in agent.toml writes it) goes to
the run's inbox; the loop delivers it as a `guard_allowed` event before its next model call, and
the bash tool applies it from then on (docs/cli.md, docs/configuration.md [guard]).
"""

from __future__ import annotations

import json
import sys

from agent.cli.args import Parser, runs_dir_arg
from state.inbox import InboxError, send
from state.run import RunError, read_state, resolve_run
from tools.domain.permission_rules import RuleError, parse_rule


def parser() -> Parser:
    p = Parser(
        prog="agent allow",
        description="Allow a running campaign's bash to run commands matching RULE outright "
        "(outside the sandbox): Bash(nvidia-smi -pm:*), kill -9:*, or an exact command.",
    )
    p.add_argument("run", metavar="RUN", help="a run id under the runs folder, or a path")
    p.add_argument("rule", metavar="RULE", help="a rule as [guard] allow writes it")
    p.add_argument("--json", action="store_true", help='print {"queued": "allow", ...}')
    runs_dir_arg(p)
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        rule = parse_rule(args.rule)
        path = resolve_run(args.run, args.runs_dir)
        finished = read_state(path).finished
    except (RuleError, RunError) as err:
        print(f"agent allow: {err}", file=sys.stderr)
        return 2
    try:
        send(path, "allow", rule=rule.text)
    except (InboxError, ValueError, OSError) as err:
        print(f"agent allow: cannot queue it for run {path.name}: {err}", file=sys.stderr)
        return 2
    if args.json:
        ended = {"ended": finished.get("status")} if finished else {}
        print(json.dumps({"queued": "allow", "run": path.name, "rule": rule.text, **ended}))
    elif finished:
        print(
            f"rule {rule.text} queued for run {path.name}: the run has ended "
            f"({finished.get('status')}); it applies when `agent resume` goes on"
        )
    else:
        print(f"rule {rule.text} queued for run {path.name}: bash applies it before the next step")
    return 0
