"""The destructive-command guard: refuses the shell commands that wreck a box.

`check(command, allow)` returns a one-line reason, or None when the command may run. It is a seat
belt against an accident (a model that "cleans up" with `rm -rf ~`), not a sandbox. The line is
parsed as bash by bashlex (a maintained port of bash's own grammar; regexes and shlex cannot see
`if`, `{ }`, substitutions or quoting as bash does), rewritten first where bashlex falls short
(prepare.py), and walked into the simple commands it would run (walk.py); each is judged on its
unwrapped argv with paths resolved (rules.py). A line the guard cannot parse is refused: it fails
closed. A `[guard] allow` regex in agent.toml that matches a whole simple command lets that one
command through (its substitutions are still judged).
"""

from __future__ import annotations

import re

from tools.guard.command import Refused
from tools.guard.prepare import prepare
from tools.guard.rules import judge
from tools.guard.walk import simple_commands

MAX_CHARS = (
    131_072  # the kernel runs no longer single argument (MAX_ARG_STRLEN): bash -c would fail
)
MAX_DEPTH = 6  # bash -c 'sh -c "eval ..."' nested deeper than this is refused


def check(command: str, allow: list[str] | None = None) -> str | None:
    """The reason `command` is refused, or None."""
    try:
        patterns = [re.compile(p) for p in allow or []]
    except re.error as err:
        return f"a [guard] allow regex is invalid ({err})"
    return _check(command, patterns, 0)


def _check(command: str, allow: list[re.Pattern[str]], depth: int) -> str | None:
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
        if any(p.fullmatch(cmd.text) for p in allow):
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
