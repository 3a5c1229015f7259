"""One simple command as the guard sees it, after the parse and the expansions it can know."""

from __future__ import annotations

from dataclasses import dataclass, field


class Refused(Exception):
    """A line the guard refuses while reading it (it cannot parse it, or a fork bomb)."""


@dataclass
class Simple:
    argv: list[str]  # words after quote removal, variables it knows expanded, `$HOME` as `~`
    text: str  # its source text: what a [guard] allow regex must match whole
    cwd: str | None  # where it runs (paths.resolve); "." is the host's workdir
    writes: list[str] = field(default_factory=list)  # files its redirections write, resolved
    stdin: str | None = None  # a here-document or here-string it reads
    piped_from: Simple | None = None  # the command before it in a pipeline
    # argv positions whose word held a variable or a substitution (its value may not be what the
    # guard took it for), and whether a redirection target did
    dynamic: set[int] = field(default_factory=set)
    dynamic_writes: bool = False
    # argv positions of words that start with an unquoted glob (they may expand to an option)
    globbed: set[int] = field(default_factory=set)
    assignments: list[str] = field(default_factory=list)  # VAR=value words before the command
    # every redirection as written: (operator, the fd it applies to or None, its target word)
    redirects: list[tuple[str, int | None, str]] = field(default_factory=list)
