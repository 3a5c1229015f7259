"""The verdict on one simple command: the reason it wrecks the box, or None.

Wrappers are unwrapped first (unwrap.py); shell text a command hands to a shell is returned to be
judged as a line of its own; xargs and find -exec are judged as the commands they run; the rest by
the rules in files.py and machine.py, on the argv with paths resolved.
"""

from __future__ import annotations

import fnmatch
import re

from tools.guard import paths
from tools.guard.command import Simple
from tools.guard.files import FILE_RULES, PREFIX_RULES, Rule, resolved
from tools.guard.machine import MACHINE_RULES
from tools.guard.unwrap import name_of, shell_text, unwrap, xargs_runs

FIND_FILTERS = {
    "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
    "-newer", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-size", "-empty",
    "-samefile", "-inum", "-links", "-user", "-uid", "-lname",
}  # fmt: skip
FIND_ACTIONS = ("-exec", "-execdir", "-ok", "-okdir")
DELETERS = {"rm", "shred", "unlink", "truncate", "mv", "dd", "chmod", "chown", "chgrp", "rmdir"}
# where find may delete what a filter picks (`find ~ -name '*.lock' -delete`); not in /etc, /usr
SCRATCH = re.compile(r"~(?:/.*)?|/root|/home/[^/]+(?:/.*)?|/tmp|/var/tmp|/dev/shm")
RULES: dict[str, Rule] = {**FILE_RULES, **MACHINE_RULES}
KNOWN = [*RULES, "mkfs", "mkfs.ext4", "mkfs.xfs"]  # what a globbed command name is matched to


def judge(cmd: Simple) -> tuple[str | None, list[str]]:
    """(the reason `cmd` is refused or None, shell texts it runs that must be judged too)."""
    for path in cmd.writes:
        if paths.device(path):
            return f"a redirect that writes {path} (a disk or system device)", []
        if paths.critical(path):
            return f"a redirect that overwrites {path}", []
    scripts: list[str] = []
    return judge_argv(cmd.argv, cmd, scripts), scripts


def judge_argv(argv: list[str], cmd: Simple, scripts: list[str]) -> str | None:
    argv = unwrap(argv, scripts)
    if not argv or not argv[0]:
        return None
    text = shell_text(argv, cmd.stdin if cmd.stdin is not None else _piped_text(cmd))
    if text is not None:
        scripts.append(text)
        return None
    head = name_of(argv[0])
    if head == "alias":  # alias ls='rm -rf /': judged as what it will run
        scripts.extend(a.split("=", 1)[1] for a in argv[1:] if "=" in a)
        return None
    if head == "xargs":
        words = (cmd.stdin or _piped_text(cmd) or "").split() or None
        for inner in xargs_runs(argv, words):
            reason = judge_argv(inner, cmd, scripts)
            if reason:
                return reason
        return None
    if head == "find":
        return _find(argv[1:], cmd, scripts)
    names = (
        [n for n in KNOWN if fnmatch.fnmatchcase(n, head)] if paths.GLOB.search(head) else [head]
    )
    for name in names:
        rule = RULES.get(name) or next((r for p, r in PREFIX_RULES if name.startswith(p)), None)
        reason = rule(argv[1:], cmd.cwd) if rule else None
        if reason:
            return reason.replace("{cmd}", name)
    return None


def _piped_text(cmd: Simple) -> str | None:
    """What the command before it in a pipe feeds it, when plainly known: the words of echo or
    printf (`echo / | xargs rm -rf`), the roots of an unfiltered find (`find / | xargs rm -rf`)."""
    src = cmd.piped_from
    if src is None or not src.argv:
        return None
    if src.argv[0] in ("echo", "printf"):
        return " ".join(a for a in src.argv[1:] if not re.fullmatch(r"-[neE]+", a))
    if src.argv[0] == "find" and not FIND_FILTERS & set(src.argv):
        return " ".join(a for a in src.argv[1:] if not a.startswith("-"))
    return None


def _find(args: list[str], cmd: Simple, scripts: list[str]) -> str | None:
    args = [a for i, a in enumerate(args) if a not in ("-H", "-L", "-P")]
    roots: list[str] = []
    while args and not args[0].startswith(("-", "(", "!", ")")):
        roots.append(args.pop(0))
    where = resolved(roots or ["."], cmd.cwd)
    filtered = bool(FIND_FILTERS & set(args))
    execs = _find_execs(args)
    deletes = "-delete" in args or any(name_of(e[0]) in DELETERS for e in execs if e)
    for root in where:
        if deletes and paths.protected(root) and (not filtered or not SCRATCH.fullmatch(root)):
            return f"find {root} deletes in a system or home directory"
        for e in execs:
            target = root + "/match" if filtered else root
            reason = judge_argv([w.replace("{}", target) for w in e], cmd, scripts)
            if reason:
                return reason
    return None


def _find_execs(args: list[str]) -> list[list[str]]:
    out: list[list[str]] = []
    i = 0
    while i < len(args):
        if args[i] in FIND_ACTIONS:
            j = i + 1
            while j < len(args) and args[j] not in (";", "+"):
                j += 1
            out.append(args[i + 1 : j])
            i = j
        i += 1
    return out
