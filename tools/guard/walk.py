"""The bashlex parse tree walked into the simple commands a line would run.

Every compound form is entered (lists, pipelines, `!`, `( )`, `{ }`, if/while/until/for, function
bodies, command and process substitutions, redirections of compounds). Along the way it follows
what a reader of the line can know: the working directory (`cd /; rm -rf *` deletes `/*`),
variables assigned on the line (`D=/etc; rm -rf $D`), a for loop's values, `echo`/`printf`
substitutions (`rm -rf $(echo /)`). A variable it cannot know expands to nothing, as an unset one
would (`rm -rf $X/` is `rm -rf /`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import bashlex
from bashlex import ast

from tools.guard.command import Refused, Simple
from tools.guard.paths import expand_braces, resolve

WRITES = {">", ">|", ">>", "&>", "&>>", "<>", ">&"}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]")
LOOP_VALUES = 16  # a for loop's body is judged once per value, up to this many
# a word that starts with an unquoted glob (`*`, `?x`, `[a-z]*`, `{*,x}`): bash may expand it to a
# file name that starts with `-`, an option (`--pre=./x.sh` for rg, `--checkpoint-action=` for tar)
LEADING_GLOB = re.compile(r"[*?\[]|\{[^}'\"]*[*?\[]")


@dataclass
class Env:
    cwd: str | None = "."
    vars: dict[str, str] = field(default_factory=dict)

    def copy(self) -> Env:
        return Env(self.cwd, dict(self.vars))


@dataclass
class Line:
    """A line's simple commands, and the forms of the line itself that no one of them shows."""

    commands: list[Simple]
    background: bool = False  # a job sent to the background (`&`): it outlives the call
    substitution: bool = False  # a command or process substitution, anywhere
    function: bool = False  # a function defined: a later word may not be the program it names


def simple_commands(source: str, literal_heredocs: set[str]) -> list[Simple]:
    return parse_line(source, literal_heredocs).commands


def parse_line(source: str, literal_heredocs: set[str]) -> Line:
    try:
        trees = bashlex.parse(source)
    except NotImplementedError as err:
        raise Refused(f"uses a bash form the guard cannot parse ({_first_line(err)})") from None
    except Exception as err:  # bashlex raises ParsingError and a few internal errors
        raise Refused(f"cannot be parsed as bash ({_first_line(err)})") from None
    walker = _Walker(source, literal_heredocs)
    env = Env()
    for tree in trees:
        walker.node(tree, env)
    return Line(walker.found, walker.background, walker.substitution, walker.defines)


DYNAMIC = ("parameter", "commandsubstitution", "processsubstitution")


def _has_expansion(n: Any, kinds: tuple[str, ...] = DYNAMIC) -> bool:
    """A word holding `$X`, `$(...)`, a backquote or `<(...)`: its value is not what it reads."""
    return any(p.kind in kinds for p in getattr(n, "parts", []))


def _first_line(err: BaseException) -> str:
    return (str(err).splitlines() or [type(err).__name__])[0][:120]


class _Walker:
    def __init__(self, source: str, literal_heredocs: set[str]) -> None:
        self.source = source
        self.literal = literal_heredocs
        self.found: list[Simple] = []
        self.background = False
        self.substitution = False
        self.defines = False  # a function defined on the line
        self.loops = 0  # loop bodies being walked: a background job in one is a fork flood

    def node(self, n: Any, env: Env, piped_from: Simple | None = None) -> Simple | None:
        kind = n.kind
        if kind == "command":
            return self.command(n, env, piped_from)
        if kind == "pipeline":
            prev = None
            for part in n.parts:
                if part.kind not in ("pipe", "reservedword"):
                    prev = self.node(part, env.copy(), prev)
        elif kind == "list":
            for part in n.parts:
                if part.kind != "operator":
                    self.node(part, env)
                elif part.op == "&":
                    self.background = True
                    if self.loops:
                        raise Refused("a loop that starts background jobs (a fork flood)")
        elif kind == "compound":
            inner = env.copy() if n.list and getattr(n.list[0], "word", "") == "(" else env
            for part in n.list:
                if part.kind != "reservedword":
                    self.node(part, inner)
            self.redirects(getattr(n, "redirects", []), env, n)
        elif kind == "for":
            self.for_loop(n, env)
        elif kind in ("if", "while", "until"):
            self.loops += kind != "if"
            for part in n.parts:
                if part.kind not in ("reservedword", "operator"):
                    self.node(part, env)
            self.loops -= kind != "if"
        elif kind == "function":
            self.function(n, env)
        elif kind in ("reservedword", "operator", "pipe"):
            pass
        else:
            raise Refused(f"a {kind} the guard does not know")
        return None

    def command(self, n: Any, env: Env, piped_from: Simple | None) -> Simple:
        argv: list[str] = []
        assignments: list[str] = []
        dynamic: set[int] = set()
        globbed: set[int] = set()
        for part in n.parts:
            if part.kind == "word":
                words = self.expand(part, env)
                if _has_expansion(part):
                    dynamic.update(range(len(argv), len(argv) + max(1, len(words))))
                if LEADING_GLOB.match(self.source[part.pos[0] : part.pos[1]]):
                    globbed.update(range(len(argv), len(argv) + max(1, len(words))))
                argv.extend(words)
            elif part.kind == "assignment":
                assignments.extend(self.expand(part, env))
        cmd = Simple(argv, self.text(n), env.cwd, piped_from=piped_from, dynamic=dynamic)
        cmd.assignments = assignments
        cmd.globbed = globbed
        self.redirects([p for p in n.parts if p.kind == "redirect"], env, n, cmd)
        self.found.append(cmd)
        if not argv:
            for a in assignments:
                self.assign(a, env)
        else:
            self.track(argv, env)
        return cmd

    def track(self, argv: list[str], env: Env) -> None:
        """What a command changes for those after it: the directory, variables."""
        name, args = argv[0], argv[1:]
        if name in ("cd", "pushd"):
            target = next((a for a in args if not a.startswith("-") or a == "-"), "~")
            env.cwd = None if target == "-" else resolve(target, env.cwd)
        elif name == "popd":
            env.cwd = None
        elif name in ("export", "declare", "typeset", "local", "readonly"):
            for a in args:
                self.assign(a, env)
        elif name == "unset":
            for a in args:
                env.vars.pop(a, None)

    def assign(self, word: str, env: Env) -> None:
        key, eq, value = word.partition("=")
        if eq and NAME.fullmatch(key.rstrip("+")):
            env.vars[key.rstrip("+")] = value

    def redirects(self, parts: list[Any], env: Env, owner: Any, cmd: Simple | None = None) -> None:
        if not parts:
            return
        if cmd is None:  # a compound's redirections: judged as a command of its own
            cmd = Simple([], self.text(owner), env.cwd)
            self.found.append(cmd)
        for r in parts:
            target = r.output if isinstance(r.output, ast.node) else None
            word = target.word if target is not None else str(r.output)
            cmd.redirects.append((r.type, r.input, word))
            if target is not None and r.type not in WRITES and r.type not in ("<<", "<<-", "<<<"):
                self.expand(target, env)  # `< <(rm -rf ~)`: what the substitution runs
            if r.type in ("<<", "<<-") and getattr(r, "heredoc", None) is not None:
                cmd.stdin = self.heredoc(r, target)
            elif r.type == "<<<" and target is not None:
                cmd.stdin = " ".join(self.expand(target, env))
            elif r.type in WRITES and target is not None:
                cmd.dynamic_writes = cmd.dynamic_writes or _has_expansion(target, DYNAMIC[:2])
                for word in self.expand(target, env):
                    path = resolve(word, env.cwd)
                    if path:
                        cmd.writes.append(path)

    def heredoc(self, r: Any, delimiter: Any) -> str:
        body = r.heredoc.value
        word = getattr(delimiter, "word", "")
        lines = body.split("\n")
        if lines and lines[-1].strip() == word:
            body = "\n".join(lines[:-1])
        if word not in self.literal and ("$(" in body or "`" in body):
            raise Refused(
                "a command substitution inside a here-document is not judged; quote its "
                "delimiter (<<'EOF') or run the command apart"
            )
        return body

    def for_loop(self, n: Any, env: Env) -> None:
        parts = n.parts
        var = parts[1].word
        words = [p for p in parts[2:] if p.kind == "word"]
        has_in = any(getattr(p, "word", "") == "in" for p in parts[2:4])
        values: list[str] = []
        for w in words if has_in else []:
            values.extend(self.expand(w, env))
        body = [p for p in parts if p.kind not in ("reservedword", "word", "operator")]
        self.loops += 1
        for value in (values or [""])[:LOOP_VALUES]:
            inner = env.copy()
            inner.vars[var] = value
            for b in body:
                self.node(b, inner)
        self.loops -= 1

    def function(self, n: Any, env: Env) -> None:
        name = next(p.word for p in n.parts if p.kind == "word")
        self.defines = True
        before = len(self.found)
        self.node(n.body, env.copy())
        calls = sum(1 for c in self.found[before:] if c.argv[:1] == [name])
        body_text = self.text(n.body)
        if calls >= 2 or (calls and re.search(r"[|&]", body_text)):
            raise Refused(f"a fork bomb (the function {name} spawns itself)")

    def expand(self, n: Any, env: Env) -> list[str]:
        """A word's values: substitutions and variables replaced, braces expanded."""
        text: str = n.word
        split = False
        for part in sorted(getattr(n, "parts", []), key=lambda p: p.pos[0]):
            piece = self.source[part.pos[0] : part.pos[1]]
            value = self.part_value(part, env)
            if value is None or piece not in text:
                continue
            text = text.replace(piece, value, 1)
            split = split or bool(re.search(r"\s", value))
        raw = self.source[n.pos[0] : n.pos[1]]
        words = text.split() if split and not re.search("['\"]", raw) else [text]
        return [e for w in words for e in expand_braces(w)]

    def part_value(self, part: Any, env: Env) -> str | None:
        kind = part.kind
        if kind == "parameter":
            return self.parameter(part, env)
        if kind == "commandsubstitution":
            self.substitution = True
            return self.substitute(part.command, env)
        if kind == "processsubstitution":
            self.substitution = True
            self.node(part.command, env.copy())
            return "/dev/fd/63"
        return None  # a tilde stays as written: paths.resolve knows `~`

    def parameter(self, part: Any, env: Env) -> str:
        value = getattr(part, "value", "")
        if not value:
            raise Refused("a $'...' or $ form the guard could not read")
        if re.search(r"\$\(|`|[<>]\(", value):
            raise Refused("a command substitution inside ${...} is not judged; run it apart")
        m = NAME.match(value)
        name = m.group(0) if m else ""
        rest = value[len(name) :]
        if name == "HOME":
            return "~"
        if name == "PWD" and env.cwd and env.cwd != ".":
            return env.cwd
        if name in env.vars:
            return env.vars[name]
        default = re.match(r":?[-=](.*)", rest, re.S)
        return default.group(1) if default else ""

    def substitute(self, command: Any, env: Env) -> str:
        """Judge the inner command; its output when it is plainly known (echo, printf, pwd)."""
        before = len(self.found)
        self.node(command, env.copy())
        inner = self.found[before:]
        if len(inner) == 1 and inner[0].argv[:1] in (["echo"], ["printf"]):
            return " ".join(a for a in inner[0].argv[1:] if not re.fullmatch(r"-[neE]+", a))
        if len(inner) == 1 and inner[0].argv == ["pwd"] and env.cwd not in (None, "."):
            return env.cwd or ""
        return ""

    def text(self, n: Any) -> str:
        return str(self.source[n.pos[0] : n.pos[1]]).strip()
