"""What the bash tool does with a command: allow it, run it in the sandbox, or refuse it.

Per simple command of the parse, in order: a supervisor's deny rule refuses; the deny gate
(rules.py: recursive deletes of system folders, disks, reboots, fork bombs...) refuses with its
reason unless a supervisor's allow rule names that very command; a supervisor's allow rule allows;
else the command must be a known shape (shapes.py), its redirections must write under the workdir
or the run folder, and any shell text it runs must be allowed too. The line is allowed when every
simple command is; otherwise it runs in the sandbox where the host has one, or is refused with one
line that says what the model may do instead. A line the parser cannot read is refused (fails
closed), as before.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Literal

from tools.domain.permission_rules import Rule, Rules, suggest
from tools.guard import boundary, paths
from tools.guard.command import Refused, Simple
from tools.guard.context import Context
from tools.guard.launches import public_bind
from tools.guard.prepare import prepare
from tools.guard.rules import judge
from tools.guard.shapes import SHELL_NAMES, shape
from tools.guard.unwrap import SHELLS, WRAPPERS, name_of, shell_text, unwrap
from tools.guard.walk import parse_line

Action = Literal["allow", "sandbox", "refuse"]
MAX_CHARS = 131_072  # the kernel runs no longer single argument (MAX_ARG_STRLEN): bash -c fails
MAX_DEPTH = 6  # bash -c 'sh -c "eval ..."' nested deeper than this is refused
FILE_OPS = {"rm", "rmdir", "unlink", "mkdir", "touch", "truncate", "cp", "install", "mv", "ln"}
FILE_OPS |= {"chmod", "chown", "tee", "gzip", "gunzip", "sed", "tar", "find"}
# variables that make an allowed program run other code (a preload, a pager, a shell's rc file,
# the search path): set on the line, the commands after are not allowed outright
RISKY_ENV = re.compile(
    r"LD_\w+|BASH_ENV|ENV|BASH_FUNC_.*|LESSOPEN|LESSCLOSE|\w*PAGER|GIT_\w+|PERL5?OPT|PERL5?LIB|"
    r"RUBYOPT|NODE_OPTIONS|PYTHONSTARTUP|PYTHONINSPECT|PROMPT_COMMAND|PS4|SHELLOPTS|BASHOPTS|IFS|"
    r"PATH|EDITOR|VISUAL|CDPATH|GLOBIGNORE|SSH_ASKPASS|SUDO_ASKPASS|MANPAGER|BROWSER"
)
SETS_ENV = {"export", "declare", "typeset", "local", "readonly", "env"}
# wrappers whose effect is certain: they run the command they wrap, in the call, as the same user
# (not sudo/doas: root; not setsid: it outlives the call; not env: it sets variables or prints
# them; not flock: it creates its lock file; not strace -o, chrt -f 99, busybox's own applets)
CERTAIN_WRAPPERS = {"nice", "timeout", "stdbuf", "taskset", "numactl", "time", "command"}
CERTAIN_WRAPPERS |= {"builtin", "exec", "nohup", "watch", "ionice"}
# wrappers that run the command as root (or another user): a supervisor's rule lets such a line
# run only where the rule names the wrapper (`Bash(sudo nvidia-smi -pm:*)`), the program is one
# of ROOT_PROGRAMS, and the deny gate passes what it runs - whatever the rules (issue 47)
ROOT_WRAPPERS = {"sudo", "doas", "pkexec", "run0"}
# programs that run no code of the line's: root for these is the machine's settings and
# processes, not a shell (a python, a bash, an installer, an editor would hold the run's key)
ROOT_PROGRAMS = {"nvidia-smi", "sysctl", "cpupower", "kill", "pkill", "killall", "fuser"}
ROOT_PROGRAMS |= {"renice", "ionice", "taskset", "sync", "dmesg", "ps", "lsof", "ss"}
UNCERTAIN = (set(WRAPPERS) | {"env", "watch"}) - CERTAIN_WRAPPERS - ROOT_WRAPPERS
# a parameter expansion, a substitution or arithmetic, even in single quotes: builtins evaluate
# an array subscript's `$(...)` (`printf -v 'a[$(cmd)]'`, `test -v`, `read`), bash 5.2
EXPANSION = re.compile(r"\$[\w{(\[@*#?$!-]|`")
# redirections whose effect is certain: output thrown away, stderr joined to stdout
QUIET = {">", ">>", "&>", "&>>", ">|", "<"}
INSTEAD = (
    "use a dedicated tool (start_server, kill_server, read_log, put_file, get_file) or a "
    "command the rules allow (read-only inspection; files, scripts and pip under the workdir)"
)


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str | None  # None for allow; one line
    # refuse/sandbox: the rule that would allow the command outright (`agent allow RUN RULE`);
    # allow: the supervisor's rule that allowed it, if one did
    rule: str | None = None
    writes: tuple[str, ...] = ()  # paths an allowed line writes: checked against symlinks
    # sandbox: whether the line ran with the host's network (False: a namespace of its own)
    network: bool = True


@dataclass
class _Verdict:
    kind: Literal["allow", "confine", "deny"] = "allow"
    reason: str | None = None
    rule: str | None = None
    used: list[Rule] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    effects: int = 0  # commands that write or run code (two in a line are not certain)
    wrote: int = 0  # commands that write (a script that writes may rewrite itself as bash reads)
    unruled: int = 0  # commands no supervisor's rule allowed (the line's form is judged for them)

    def take(self, other: _Verdict) -> None:
        """Fold a part's verdict in: deny beats confine beats allow; the first reason stays."""
        order = {"allow": 0, "confine": 1, "deny": 2}
        if order[other.kind] > order[self.kind]:
            self.kind, self.reason, self.rule = other.kind, other.reason, other.rule
        self.used.extend(other.used)
        self.writes.extend(other.writes)
        self.effects += other.effects
        self.wrote += other.wrote
        self.unruled += other.unruled


def decide(
    command: str,
    rules: Rules | None = None,
    sandbox: bool = True,
    context: Context | None = None,
    no_sandbox: str | None = None,
) -> Decision:
    """What the bash tool would do with `command` on a host with (sandbox=True) or without a
    sandbox (`no_sandbox`: why not, in words). A destructive command is never "allow" (unless a
    supervisor's rule names it)."""
    v = _verdict(command, rules or Rules(), context or Context(), 0)
    if v.kind == "allow":
        used = max(v.used, key=lambda r: r.specificity).text if v.used else None
        return Decision("allow", None, used, tuple(dict.fromkeys(v.writes)))
    if v.kind == "deny":
        return Decision("refuse", v.reason, v.rule)
    if sandbox:
        return Decision("sandbox", v.reason, v.rule)
    return Decision(
        "refuse",
        f"not allowed outright ({v.reason}) and this host has no sandbox to run it in"
        f"{f' ({no_sandbox})' if no_sandbox else ''}: {INSTEAD}",
        v.rule,
    )


def _verdict(command: str, rules: Rules, ctx: Context, depth: int) -> _Verdict:
    if len(command) > MAX_CHARS:
        return _Verdict(
            "deny",
            f"a command over {MAX_CHARS // 1024} KiB: Argument list too long for `bash -c`; "
            "write it to a file (put_file) and run that",
        )
    if depth > MAX_DEPTH:
        return _Verdict("deny", f"shells nested more than {MAX_DEPTH} deep")
    try:
        source, literal = prepare(command)
        line = parse_line(source, literal)
    except Refused as err:
        return _Verdict("deny", str(err))
    except RecursionError:
        return _Verdict("deny", "nested too deeply to judge")
    except Exception as err:  # bashlex or the walk failing on a form it does not expect
        return _Verdict("deny", f"the guard could not read this command ({type(err).__name__})")
    out = _Verdict()
    for cmd in line.commands:
        try:
            out.take(_simple(cmd, rules, ctx, depth))
        except Exception as err:  # a bug in a rule must not let the command through
            out.take(_Verdict("deny", f"the guard could not judge {cmd.text[:60]!r} ({err!r})"))
        if out.kind == "deny":
            break
    if out.kind == "allow" and out.unruled and line.commands:
        first = line.commands[0]
        if line.background:
            out.take(_confine("a job in the background outlives the call", first))
        elif line.substitution:
            out.take(_confine("a command or process substitution", first))
        elif line.function:
            out.take(_confine("a function defined on the line", first))
        elif out.effects > 1:
            why = "more than one command that writes or runs code (one may run what another wrote)"
            out.take(_confine(why, first))
    if out.kind == "allow":  # secrets, keys, the environment: never outright, allow rule or not
        crossing = boundary.confines(command, ctx)
        if crossing and line.commands:
            out.take(_confine(crossing, line.commands[0]))
    return out


def _simple(cmd: Simple, rules: Rules, ctx: Context, depth: int) -> _Verdict:
    written = [a for a in cmd.argv]
    scratch: list[str] = []
    unwrapped = unwrap(list(written), scratch)
    forms = [written, unwrapped] if unwrapped != written else [written]
    denied = rules.denied(forms) if written else None
    if denied is not None:
        return _Verdict("deny", f"the supervisor's rule {denied.text!r} denies it")
    allowed = rules.allowed(forms) if written else None
    reason, scripts = judge(cmd)
    prefix = written[: len(written) - len(unwrapped)]
    root = next((name_of(w) for w in prefix if name_of(w) in ROOT_WRAPPERS), None)
    if root is not None:  # runs as root: only a rule that names the wrapper, never the gate's
        allowed = rules.allowed([written]) if allowed is not None else None
        if reason:
            return _Verdict(
                "deny", f"{root} of a destructive command, whatever the rules: {reason}"
            )
        head = name_of(unwrapped[0]) if unwrapped else "a shell"
        if allowed is not None and (head not in ROOT_PROGRAMS or scripts):
            return _Verdict(
                "deny",
                f"{root} would run {head} as root, out of any sandbox (root reads the run's inbox "
                f"key): a supervisor's rule lets {root} run only programs that run no code of the "
                f"line's ({', '.join(sorted(ROOT_PROGRAMS))}); run it at the terminal",
            )
        extra = next((name_of(w) for w in prefix if name_of(w) in UNCERTAIN), None)
        if allowed is not None and extra:  # sudo setsid X: it outlives the call, as root
            return _Verdict(
                "deny", f"{root} {extra}: a rule lets {root} run a program, not {extra}"
            )
        named = len(allowed.words) - len(prefix) if allowed is not None else 0
        why = shape(unwrapped, cmd, ctx)[0] if allowed is not None and named < 2 else None
        if why and allowed is not None:  # `sudo:*`: as root, only what the rules find certain
            return _Verdict(
                "deny",
                f"the rule {allowed.text!r} names no option of {head}, and as root it runs only "
                f"what the rules find certain ({why}); the supervisor names the option: "
                f"`Bash({shlex.join(written[: len(prefix) + 2])}:*)`",
            )
    device = next((p for p in cmd.writes if paths.device(p) or paths.critical(p)), None)
    if device is not None:
        return _Verdict("deny", reason or f"a redirect that writes {device}")
    if reason and allowed is None:
        return _Verdict("deny", reason, suggest(unwrapped or written, exact=True))
    exposed = public_bind(unwrapped) if not ctx.public_bind else None
    if exposed is not None:
        return _Verdict(
            "deny",
            f"{exposed} would serve the model to every network the host is on; servers bind "
            "loopback (--host 127.0.0.1) and the benchmark reaches them through it - start it "
            "with start_server, or the user sets server.allow_public_bind = true in agent.toml",
        )
    v = _Verdict()
    v.writes.extend(cmd.writes)
    for path in cmd.writes:
        if not ctx.writable(path):
            v.take(_confine(f"a redirect writes {path}, outside the workdir and the run", cmd))
    if cmd.dynamic_writes:
        v.take(_confine("a redirect to a path the rules cannot read", cmd))
    if allowed is not None:
        v.used.append(allowed)
        v.unruled = int(root is not None)  # as root, the line's form is judged still (`&`)
        return v
    v.unruled = 1
    form = _form(cmd, written, unwrapped)
    if form:  # the rule to suggest names the wrapper where it makes the line root
        v.take(_confine(form, cmd, written if root else unwrapped or written))
    for text in scripts:  # shell text it runs: judged as a line of its own
        sub = _verdict(text, rules, ctx, depth + 1)
        if sub.kind == "deny":
            return sub
    v.take(_runs(unwrapped, scratch, scripts, cmd, rules, ctx, depth))
    if v.kind == "allow" and unwrapped and name_of(unwrapped[0]) in FILE_OPS:
        v.writes.extend(
            p
            for p in (paths.resolve(a, cmd.cwd) for a in unwrapped[1:] if not a.startswith("-"))
            if p and ctx.writable(p)
        )
    return v


def _runs(
    argv: list[str],
    scratch: list[str],
    scripts: list[str],
    cmd: Simple,
    rules: Rules,
    ctx: Context,
    depth: int,
) -> _Verdict:
    """Whether the command itself (wrappers taken off) is a shape the rules allow."""
    risky = _risky_env(cmd, argv)
    if risky:
        return _confine(f"sets {risky}, which makes programs run other code", cmd, argv)
    if scratch:  # watch X, flock -c X, env -S X: shell text from a wrapper, judged as a line
        if cmd.dynamic:
            return _confine("a wrapper running text the rules cannot read", cmd, cmd.argv)
        out = _Verdict()
        for wrapped in scratch:
            out.take(_verdict(wrapped, rules, ctx, depth + 1))
        return out
    if not argv:
        return _Verdict()
    if 0 in cmd.dynamic and len(cmd.argv) == len(argv):
        return _confine("a command name from a variable or a substitution", cmd, argv)
    head = name_of(argv[0])
    text = shell_text(argv, cmd.stdin)
    if head == "eval":
        return _confine("eval runs text the rules do not read as a command", cmd, argv)
    if head in ("ssh", "mosh"):
        return _confine("a command on another machine", cmd, argv)
    if head in ("su", "runuser", "alias"):
        return _confine(f"{head} runs shell text", cmd, argv)
    if head in SHELLS and text is not None:
        if _reads_stdin(argv):
            return _confine("a shell reading text from a pipe or a here-document", cmd, argv)
        if _text_dynamic(argv, cmd):
            return _confine("a shell running text the rules cannot read", cmd, argv)
        return _verdict(text, rules, ctx, depth + 1)
    why, kind = shape(argv, cmd, ctx)
    if why:
        return _confine(why, cmd, argv)
    if ctx.busy and kind in ("write", "run"):
        why = "a job of the run is running: the workdir may change between this check and the run"
        return _confine(why, cmd, argv)
    own = "/" in argv[0] and ctx.writable(paths.resolve(argv[0], cmd.cwd))
    if kind == "run" and (head in SHELL_NAMES or head in ("source", ".") or own):
        return _script_text(argv, cmd, rules, ctx, depth)
    return _Verdict(effects=int(kind in ("write", "run")), wrote=int(kind == "write"))


def _script_text(argv: list[str], cmd: Simple, rules: Rules, ctx: Context, depth: int) -> _Verdict:
    """A shell script inside the workdir, judged by its text where the host lets it be read."""
    head = name_of(argv[0])
    if head in SHELL_NAMES or head in ("source", "."):
        target = next((a for a in argv[1:] if not a.startswith(("-", "+"))), None)
    elif "/" in argv[0] and ctx.writable(paths.resolve(argv[0], cmd.cwd)):
        target = argv[0]
    else:
        return _confine("a program the rules do not know", cmd, argv)
    full = ctx.absolute(paths.resolve(target, cmd.cwd) or "") if target else None
    text = ctx.read(full) if (ctx.read is not None and full) else None
    if text is None:
        return _confine(f"a script whose text the rules cannot read here ({target})", cmd, argv)
    first = text.split("\n", 1)[0]
    if head not in SHELL_NAMES and head not in ("source", ".") and not _shell_shebang(first):
        return _confine(
            f"a program of the workdir ({target}) runs code the rules cannot read", cmd, argv
        )
    sub = _verdict(text, rules, ctx, depth + 1)
    if sub.kind == "allow" and sub.wrote:
        # bash reads a script as it runs it: one that writes files may rewrite its own rest
        return _confine(f"the script {target} writes files (bash reads it as it runs)", cmd, argv)
    if sub.kind == "allow":
        sub.effects, sub.wrote = 1, 0
        return sub
    return _Verdict(sub.kind, f"the script {target}: {sub.reason}", sub.rule or suggest(argv))


def _risky_env(cmd: Simple, argv: list[str]) -> str | None:
    """A variable from RISKY_ENV set before the command, by export/declare/env, or `-c` options
    of git (core.pager, core.fsmonitor run commands)."""
    words = list(cmd.assignments) + [w for w in cmd.argv[: len(cmd.argv) - len(argv)] if "=" in w]
    if argv and name_of(argv[0]) in SETS_ENV:
        words += [w for w in argv[1:] if "=" in w]
    if argv and name_of(argv[0]) == "git" and "-c" in argv:
        return "git -c (a configuration that may run commands)"
    for w in words:
        name = w.split("=", 1)[0].rstrip("+")
        if RISKY_ENV.fullmatch(name):
            return name
    return None


def _form(cmd: Simple, written: list[str], argv: list[str]) -> str | None:
    """Why the command's form is not certain, whatever its program: a redirection other than to
    /dev/null or stderr to stdout, a here-document, an assignment, an expansion, a wrapper that
    changes who runs it or for how long."""
    for op, _fd, target in cmd.redirects:
        if op in ("<<", "<<-", "<<<"):
            return "a here-document or a here-string (text fed to a program)"
        if op == ">&" and target in ("1", "2"):
            continue
        if op in QUIET and target == "/dev/null":
            continue
        return f"a redirection ({op} {target}) other than to /dev/null or stderr to stdout"
    prefix = written[: len(written) - len(argv)]
    if cmd.assignments or any(re.match(r"[A-Za-z_]\w*\+?=", w) for w in prefix):
        return "an assignment (a variable the programs after it may read)"
    if EXPANSION.search(cmd.text) or any(EXPANSION.search(w) for w in written):
        return "an expansion ($VAR, $(...), `...`, $((...))) the rules cannot read"
    ends = written.index("--") if "--" in written else len(written)
    if any(i < ends for i in cmd.globbed):
        return "a glob at a word's start may expand to an option (a file named --pre=x.sh)"
    if "time" in map(name_of, prefix) and any(
        w in ("-o", "-a", "--output", "--append") or w.startswith("--output=") for w in prefix
    ):
        return "time -o writes its report to a file"
    for w in prefix:
        if (name_of(w) in WRAPPERS or name_of(w) in ("env", "watch")) and (
            name_of(w) not in CERTAIN_WRAPPERS
        ):
            return (
                f"{name_of(w)} (runs the command as another user, outlives the call or sets it up)"
            )
    return None


def _shell_shebang(first: str) -> bool:
    return first.startswith("#!") and any(s in first for s in ("bash", "/sh", " sh", "dash", "zsh"))


def _reads_stdin(argv: list[str]) -> bool:
    args = argv[1:]
    i = 0
    while i < len(args) and args[i].startswith(("-", "+")) and args[i] != "--":
        if args[i] in ("-o", "+o", "-O", "+O"):
            i += 1
        elif not args[i].startswith("--") and "c" in args[i][1:]:
            return False
        i += 1
    return not [a for a in args[i:] if a != "--"]


def _text_dynamic(argv: list[str], cmd: Simple) -> bool:
    """The `-c` text came from a variable or a substitution."""
    offset = len(cmd.argv) - len(argv)
    return any(i >= offset for i in cmd.dynamic)


def _confine(why: str, cmd: Simple, argv: list[str] | None = None) -> _Verdict:
    return _Verdict("confine", why, suggest(argv if argv is not None else cmd.argv))
