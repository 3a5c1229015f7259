"""The destructive-command guard: refuses the shell commands that wreck a box.

`check(command, allow)` returns a one-line reason, or None when the command may run. It is a seat
belt against an accident (a model that "cleans up" with `rm -rf ~`), not a sandbox. The line is
parsed as bash by bashlex (a maintained port of bash's own grammar; regexes and shlex cannot see
`if`, `{ }`, substitutions or quoting as bash does), rewritten first where bashlex falls short
(prepare.py), and walked into the simple commands it would run (walk.py); each is judged on its
unwrapped argv with paths resolved (rules.py). A line the guard cannot parse is refused: it fails
closed. A `[guard] allow` rule in agent.toml (`Bash(kill -0:*)`, tools/domain/permission_rules.py)
that matches a simple command lets that one command through (its substitutions are still judged).

This is the deny gate, a fast first check with clear reasons; `decide` (decision.py) is what the
bash tool asks: allowed outright, run in the sandbox, or refused.
"""

from __future__ import annotations

from tools.domain.permission_rules import Rule, RuleError, Rules, parse_rule
from tools.guard.command import Refused
from tools.guard.context import Context
from tools.guard.decision import MAX_CHARS, MAX_DEPTH, Decision, decide
from tools.guard.prepare import prepare
from tools.guard.rules import judge
from tools.guard.unwrap import unwrap
from tools.guard.walk import simple_commands

__all__ = [
    "Context",
    "Decision",
    "Rule",
    "RuleError",
    "Rules",
    "check",
    "decide",
    "parse_rule",
]


def check(command: str, allow: list[str] | None = None) -> str | None:
    """The reason `command` is refused by the deny gate, or None."""
    try:
        rules = Rules.parse(allow or [])
    except RuleError as err:
        return f"a [guard] allow rule is invalid ({err})"
    return _check(command, rules, 0)


def _check(command: str, allow: Rules, depth: int) -> str | None:
    if len(command) > MAX_CHARS:
        return (
            f"a command over {MAX_CHARS // 1024} KiB: Argument list too long for `bash -c`; "
            "write it to a file (put_file) and run that"
        )
    if depth > MAX_DEPTH:
        return f"shells nested more than {MAX_DEPTH} deep"
    try:
        source, literal = prepare(command)
        commands = simple_commands(source, literal)
    except Refused as err:
        return str(err)
    except RecursionError:
        return "nested too deeply to judge"
    except Exception as err:  # bashlex or the walk failing on a form it does not expect
        return f"the guard could not read this command ({type(err).__name__}); simplify it"
    for cmd in commands:
        if allow.allowed([cmd.argv, unwrap(list(cmd.argv), [])]):
            continue
        try:
            reason, scripts = judge(cmd)
        except Exception as err:  # a bug in a rule must not let the command through: fail closed
            return f"the guard could not judge {cmd.text[:60]!r} ({type(err).__name__})"
        for script in scripts:
            reason = reason or _check(script, allow, depth + 1)
        if reason:
            return reason
    return None
