"""The supervisor's rules (a domain type: agent.toml validates them, tools/guard applies them).

A rule is written as Claude Code writes its Bash permission rules: `Bash(npm run test:*)` or
plainly `pip install:*` (a prefix: the command's first words), `Bash(nvidia-smi -pm 1)` (exactly
that command). It matches one simple command of a line - never the line as a whole, so
`fuser -k:*` does not let `fuser -k x; rm -rf /` through - on its words as written (VAR=value
prefixes left out) or as unwrapped (`sudo nice X` is also tried as `X`). Deny wins over allow;
among allows the most specific (the most words; exact before prefix) is the one reported.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

RULE = re.compile(r"Bash\((.*)\)", re.S)
SHELL_OPERATORS = re.compile(r"[;&|<>()`\n]|\$\(")
REGEX_HINTS = re.compile(r"^\^|(?<!\\)\$$|\.\*|\\[sdwb]")


class RuleError(ValueError):
    """A rule that cannot be read; the message is one line saying how to write it."""


@dataclass(frozen=True)
class Rule:
    text: str  # as the user wrote it
    words: tuple[str, ...]
    prefix: bool  # `...:*`: the command's first words; else the whole command

    @property
    def specificity(self) -> tuple[int, int]:
        return (len(self.words), 0 if self.prefix else 1)

    def matches(self, argv: list[str]) -> bool:
        n = len(self.words)
        if self.prefix:
            return tuple(argv[:n]) == self.words
        return tuple(argv) == self.words


def parse_rule(text: str) -> Rule:
    body = text.strip()
    m = RULE.fullmatch(body)
    if m:
        body = m.group(1).strip()
    elif body.startswith("Bash(") or (body.startswith(("Bash", "bash")) and "(" in body[:6]):
        raise RuleError(f"{text!r}: unbalanced Bash(...); write Bash(pip install:*)")
    if REGEX_HINTS.search(body):
        raise RuleError(
            f"{text!r} looks like a regex; rules are prefixes as Claude Code writes them: "
            "Bash(kill -0:*) or kill -0:* (the command's first words), or an exact command"
        )
    prefix = body.endswith(":*") or body.endswith(" *")
    if prefix:
        body = body[:-2].rstrip()
    if not body:
        raise RuleError(f"{text!r}: an empty rule would match every command")
    unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", "", body)
    if SHELL_OPERATORS.search(unquoted):
        raise RuleError(
            f"{text!r}: a rule names one simple command (no ; && | < > ( ) or substitutions)"
        )
    try:
        words = tuple(shlex.split(body))
    except ValueError as err:
        raise RuleError(f"{text!r}: {err}") from None
    if not words:
        raise RuleError(f"{text!r}: an empty rule would match every command")
    return Rule(text.strip(), words, prefix)


@dataclass(frozen=True)
class Rules:
    """The allow and deny rules in force: the config's, then the supervisor's (agent allow)."""

    allow: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()

    @classmethod
    def parse(
        cls, allow: list[str] | tuple[str, ...] = (), deny: list[str] | tuple[str, ...] = ()
    ) -> Rules:
        return cls(tuple(parse_rule(r) for r in allow), tuple(parse_rule(r) for r in deny))

    def with_allow(self, texts: list[str]) -> Rules:
        return Rules(self.allow + tuple(parse_rule(t) for t in texts), self.deny)

    def denied(self, forms: list[list[str]]) -> Rule | None:
        return next((r for r in self.deny for f in forms if r.matches(f)), None)

    def allowed(self, forms: list[list[str]]) -> Rule | None:
        hits = [r for r in self.allow for f in forms if r.matches(f)]
        return max(hits, key=lambda r: r.specificity) if hits else None


def suggest(argv: list[str], exact: bool = False) -> str:
    """The rule that would allow this simple command: its first two words as a prefix (the
    command and its subcommand or first option), or the command exactly."""
    words = [w for w in argv if w]
    if not words:
        return ""
    if exact or len(words) <= 2:
        return f"Bash({shlex.join(words)})"
    return f"Bash({shlex.join(words[:2])}:*)"
