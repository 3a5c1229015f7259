"""The shapes the campaign needs, allowed outright: a simple command is one of them or it is not.

`shape(argv, cmd, ctx)` returns None when the (unwrapped) argv is a known shape, else a short
reason it is not. Known: read-only inspection (ls, cat, grep, nvidia-smi without a setting, ps,
ss, df, free, systemctl status, git status, ...), the engine launches the profiles describe,
kill/pkill/fuser of what the run recorded (its pids, its ports, the engines' processes, the GPU
devices' holders), pip into the workdir's venv, scripts inside the workdir, and file operations
whose every target lies under the workdir or the run folder. Anything else - an interpreter
one-liner, a word the rules do not know, a path they cannot read - is not, and the caller
sandboxes or refuses it. The redirections of the command are judged by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tools.guard import paths
from tools.guard.command import Simple
from tools.guard.context import ENGINE_EXECUTABLES, ENGINE_MODULES, ENGINE_NAMES, Context
from tools.guard.files import split
from tools.guard.unwrap import name_of

Shape = Callable[[list[str], Simple, Context], str | None]

# read-only whatever their arguments (their output goes where the redirections say)
READ_ONLY = frozenset({
    "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "zgrep", "zcat", "rg", "df",
    "free", "du", "uptime", "whoami", "id", "uname", "pwd", "echo", "printf", "true", "false",
    "test", "[", "sleep", "which", "type", "whereis", "ps", "pgrep", "netstat", "lsof",
    "nproc", "lscpu", "lsblk", "lspci", "lsmod", "stat", "file", "realpath", "readlink",
    "basename", "dirname", "cut", "tr", "column", "diff", "cmp", "md5sum", "sha256sum",
    "sha1sum", "jq", "xxd", "od", "hexdump", "strings", "seq", "tac", "nl", "printenv", "cd",
    "pushd", "popd", "export", "declare", "typeset", "local", "unset", "set", "shift", "wait",
    "ulimit", "getconf", "locale", "tty", "tree", "less", "more", "blkid", "findmnt", "nvcc",
    "pip3-show", ":", "exit", "return", "break", "continue", "read", "sha512sum", "top",
    "htop", "nvtop", "iostat", "vmstat", "mpstat", "numastat", "dpkg-query", "getent",
    "groups", "last", "w", "who",
})  # fmt: skip
NVIDIA_SETTINGS = re.compile(
    r"-(?:r|pm|e|p|c|pl|ac|rac|acp|lgc|rgc|lmc|rmc|mig|cc|am|caa|f)(?:=.*)?|--(?:gpu-reset|"
    r"persistence-mode|ecc-config|reset-ecc-errors|compute-mode|power-limit|applications-clocks|"
    r"reset-applications-clocks|lock-gpu-clocks|reset-gpu-clocks|lock-memory-clocks|"
    r"reset-memory-clocks|multi-instance-gpu|filename|auto-boost.*|cuda-clocks.*)(?:=.*)?"
)
NVIDIA_READ_SUBCOMMANDS = {"topo", "dmon", "pmon", "nvlink", "clocks", "-q", "-L"}
SYSTEMCTL_READ = {"status", "is-active", "is-enabled", "is-failed", "list-units", "show", "cat"}
SYSTEMCTL_READ |= {"list-unit-files", "list-timers", "list-sockets"}
GIT_READ = {"status", "log", "diff", "show", "rev-parse", "ls-files", "describe", "blame", "grep"}
GIT_READ |= {"shortlog", "remote", "tag", "branch", "config", "reflog", "cat-file", "ls-tree"}
DOCKER_READ = {"logs", "ps", "inspect", "images", "version", "info", "top", "port"}
PIP_READ = {"list", "show", "freeze", "check", "--version", "-V", "help", "debug", "index"}
PIP_WRITE = {"install", "uninstall", "download", "wheel"}
PYTHONS = re.compile(r"python(?:\d+(?:\.\d+)?)?")
SHELL_NAMES = {"bash", "sh", "dash", "zsh"}
LOOPBACK_URL = re.compile(
    r"(?:https?://)?(?:127\.0\.0\.1|localhost|\[::1\]|0\.0\.0\.0)(?::\d+)?(?:[/?#].*)?"
)
SIGNAL = re.compile(r"-(?:[A-Z]+|SIG[A-Z]+|\d+)")
ENGINE_PATTERN = re.compile(r"[\w.:/ -]+")  # a plain name, no alternation or wildcards
SED_READ_SCRIPT = re.compile(
    r"(?:(?:\d+|\$)(?:,(?:\d+|\$))?|/[^/]*/(?:,/[^/]*/)?)?[pdq]?|s/[^/]*/[^/]*/[gpI0-9]*"
)


def shape(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    if not argv:
        return None  # assignments or redirections only: the caller judges the writes
    head = name_of(argv[0])
    if argv[0] != head and head not in ENGINE_EXECUTABLES and not _pip(argv[0], ctx):
        if "/" in argv[0] and not ctx.writable(argv[0]):  # /usr/bin/ls is not ./ls
            return _program(head, argv, cmd, ctx)
        return _script(argv[0], argv, cmd, ctx)
    return _program(head, argv, cmd, ctx)


def _program(head: str, argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    if head in READ_ONLY:
        return _read_only(head, argv)
    rule = SHAPES.get(head)
    if rule is not None:
        return rule(argv, cmd, ctx)
    if PYTHONS.fullmatch(head):
        return _python(argv, cmd, ctx)
    if head in ENGINE_EXECUTABLES:
        return None
    return f"`{head}` is not a command the rules know"


def _read_only(head: str, argv: list[str]) -> str | None:
    args = argv[1:]
    if head == "date" and any(a.startswith(("-s", "--set")) for a in args):
        return "date --set changes the clock"
    if head in ("sort", "uniq") and ("-o" in args or any(a.startswith("--output") for a in args)):
        return f"{head} -o writes a file"
    if head == "uniq" and len(split(args)[1]) > 1:
        return "uniq with two operands writes the second"
    return None


def _nvidia_smi(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    args = argv[1:]
    sub = args[0] if args and not args[0].startswith("-") else None
    if sub is not None and sub not in NVIDIA_READ_SUBCOMMANDS:
        return f"nvidia-smi {sub} may change the GPU's settings"
    if sub in ("dmon", "pmon"):
        return "nvidia-smi -f writes a file" if "-f" in args else None
    bad = next((a for a in args if NVIDIA_SETTINGS.fullmatch(a)), None)
    return f"nvidia-smi {bad} changes the GPU's settings" if bad else None


def _systemctl(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    operands = split(argv[1:])[1]
    verb = operands[0] if operands else "list-units"
    return None if verb in SYSTEMCTL_READ else f"systemctl {verb} changes the services"


def _journalctl(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    bad = [a for a in argv[1:] if a.startswith(("--vacuum", "--rotate", "--flush", "--sync"))]
    return f"journalctl {bad[0]} changes the journal" if bad else None


def _dmesg(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    bad = set(argv[1:]) & {"-c", "-C", "-D", "-E", "-n", "--clear", "--read-clear"}
    return "dmesg clears or changes the kernel log" if bad else None


def _git(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    rest = argv[1:]
    while rest[:1] in (["-C"], ["-c"]) and len(rest) > 1:
        rest = rest[2:]
    verb = rest[0] if rest else "status"
    if verb not in GIT_READ:
        return f"git {verb} changes a repository"
    if verb == "branch" and set(rest) & {"-d", "-D", "-m", "-M", "--delete", "--move"}:
        return "git branch -d/-m changes a repository"
    if verb in ("config", "remote", "tag") and len(split(rest[1:])[1]) > 1:
        return f"git {verb} with a value changes a repository"
    return None


def _docker(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    verb = next((a for a in argv[1:] if not a.startswith("-")), "")
    return None if verb in DOCKER_READ else f"docker {verb} changes containers"


def _pip(program: str, ctx: Context) -> bool:
    """`.venv/bin/pip` (or its python) inside the workdir: the campaign's own venv."""
    return "/bin/" in program and ctx.writable(program)


def _pip_args(argv: list[str], venv: bool) -> str | None:
    verb = next((a for a in argv[1:] if not a.startswith("-") or a in ("-V", "--version")), "")
    if verb in PIP_READ or not verb:
        return None
    if verb in PIP_WRITE and venv:
        return None
    return f"pip {verb} outside the workdir's venv (use WORKDIR/.venv/bin/pip)"


def _pip_cmd(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    return _pip_args(argv, _pip(argv[0], ctx))


def _python(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-m", "-c"):
        i += 2 if argv[i] in ("-W", "-X") else 1
    rest = argv[i:]
    if not rest:
        return "a python reading its standard input"
    if rest[0] == "-c":
        return "a python one-liner (-c) runs code the rules cannot read"
    if rest[0] == "-m":
        module = rest[1] if len(rest) > 1 else ""
        if module == "pip":
            return _pip_args(["pip", *rest[2:]], _pip(argv[0], ctx))
        if module in ENGINE_MODULES or module.startswith(("sglang.", "vllm.")):
            return None  # an engine launch or benchmark the profiles describe
        return f"python -m {module} is not a module the rules know"
    return _inside(rest[0], ctx, "a python script")


def _script(path: str, argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    """`./x.sh`, `scripts/train.sh`: a program inside the workdir."""
    return _inside(path, ctx, "a program")


def _inside(path: str, ctx: Context, what: str) -> str | None:
    resolved = paths.resolve(path, ".")
    if resolved is None or not ctx.writable(resolved) or resolved.startswith("/dev/"):
        return f"{what} outside the workdir ({path})"
    return None


def _shell(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    """`bash x.sh` inside the workdir (a `-c` text or a shell reading stdin: the caller)."""
    args = [a for a in argv[1:] if a != "--"]
    while args and args[0].startswith(("-", "+")):
        args = args[2:] if args[0] in ("-o", "+o", "-O", "+O") else args[1:]
    if not args:
        return "a shell reading its standard input"
    return _inside(args[0], ctx, "a script")


def _kill(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    args = argv[1:]
    if set(args) & {"-l", "-L", "--list", "--table", "-0"} or args[:2] in (["-s", "0"],):
        return None  # lists signals, or only asks whether a process exists
    if cmd.dynamic:
        return "kill of pids the rules cannot read ($(...) or a variable)"
    rest = args[2:] if args[:1] in (["-s"], ["-n"]) else args
    rest = rest[1:] if rest and SIGNAL.fullmatch(rest[0]) and len(rest) > 1 else rest
    pids = [a for a in rest if a != "--"]
    if not pids or not all(re.fullmatch(r"-?\d+", p) for p in pids):
        return "kill of something that is not a pid"
    strangers = [p for p in pids if abs(int(p)) not in ctx.pids]
    return f"kill of pid {strangers[0]}, which this run did not start" if strangers else None


def _pkill(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    if cmd.dynamic:
        return f"{name_of(argv[0])} of a pattern the rules cannot read"
    args, skip = [], False
    for a in argv[1:]:
        if skip:
            skip = False
        elif a in ("-u", "-U", "-g", "-G", "-P", "-s", "-t", "--signal", "-o"):
            skip = True
        elif not a.startswith("-"):
            args.append(a)
    if not args:
        return f"{name_of(argv[0])} without a name"
    for pattern in args:
        if not ENGINE_PATTERN.fullmatch(pattern) or not any(n in pattern for n in ENGINE_NAMES):
            return f"{name_of(argv[0])} {pattern!r} does not name an engine's processes"
    return None


def _fuser(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    args = argv[1:]
    killing = any(a == "-k" or (re.fullmatch(r"-[a-zA-Z]+", a) and "k" in a) for a in args)
    if not killing:
        return None
    if cmd.dynamic:
        return "fuser -k of targets the rules cannot read"
    targets = [a for a in args if not a.startswith("-")]
    for t in targets:
        port = re.fullmatch(r"(\d+)/(?:tcp|udp)", t)
        if port and int(port.group(1)) in ctx.ports:
            continue
        if re.fullmatch(r"/dev/nvidia[\w*?\[\]-]*", t):
            continue  # the GPU's holders: the zombie workers of an engine
        return f"fuser -k {t}: not a GPU device or a port this run's servers used"
    return None if targets else "fuser -k without a target"


def _file_op(writes_from: Callable[[list[str]], list[str]], globs_ok: bool = True) -> Shape:
    def rule(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
        if cmd.dynamic:
            return f"{name_of(argv[0])} of paths the rules cannot read ($(...) or a variable)"
        for target in writes_from(argv[1:]):
            p = paths.resolve(target, cmd.cwd)
            if not globs_ok and paths.GLOB.search(target):
                return f"{name_of(argv[0])} of a glob ({target}): it follows the symlinks it meets"
            if not ctx.writable(p):
                return f"{name_of(argv[0])} writes {p or target}, outside the workdir and the run"
        return None

    return rule


def _operands(args: list[str]) -> list[str]:
    return split(args)[1]


def _last(args: list[str]) -> list[str]:
    opts, ops = split(args)
    target = [o.split("=", 1)[1] for o in opts if o.startswith("--target-directory=")]
    t_opt = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-t"]
    return target or t_opt or ops[-1:]


def _chmod(args: list[str]) -> list[str]:
    """The paths of chmod (a mode such as -x or 755 is no path) or chown (the owner first)."""
    words = [a for a in args if a not in ("-R", "-v", "-c", "-f", "-h", "--recursive", "--")]
    reference = any(a.startswith("--reference") for a in words)
    words = [a for a in words if not a.startswith("--")]
    return words if reference else words[1:]


def _dd(args: list[str]) -> list[str]:
    return [a[3:] for a in args if a.startswith("of=")]


def _sed(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    args = argv[1:]
    in_place = any(
        a.startswith(("-i", "--in-place")) or re.fullmatch(r"-[a-zA-Z]*i", a) for a in args
    )
    scripts = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-e", "--expression")]
    operands = _operands(
        [
            a
            for i, a in enumerate(args)
            if a not in scripts or args[i - 1] not in ("-e", "--expression")
        ]
    )
    if not scripts and operands:
        scripts, operands = operands[:1], operands[1:]
    for s in scripts:
        for part in s.split(";"):
            if not SED_READ_SCRIPT.fullmatch(part.strip()):
                return "a sed script beyond print, delete and substitute (w and e write and run)"
    if in_place:
        return _file_op(lambda _a: operands)(argv, cmd, ctx)
    return None


def _find(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    args = argv[1:]
    if set(args) & {"-fprint", "-fprint0", "-fprintf", "-fls"}:
        return "find writes a file (-fprint/-fls)"
    roots = []
    for a in args:
        if a.startswith(("-", "(", "!", ")")):
            break
        roots.append(a)
    root_paths = [paths.resolve(r, cmd.cwd) for r in roots or ["."]]
    execs = [i for i, a in enumerate(args) if a in ("-exec", "-execdir", "-ok", "-okdir")]
    if "-delete" in args and not all(ctx.writable(p) for p in root_paths):
        return "find -delete outside the workdir and the run"
    for i in execs:
        j = i + 1
        while j < len(args) and args[j] not in (";", "+"):
            j += 1
        inner = args[i + 1 : j]
        for root in root_paths:
            sub = Simple([w.replace("{}", f"{root}/x") for w in inner], cmd.text, cmd.cwd)
            why = shape(sub.argv, sub, ctx)
            if why:
                return f"find -exec: {why}"
    return None


def _xargs(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    rest = argv[1:]
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        if opt in ("-I", "-a", "-d", "-E", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter"):
            rest = rest[1:]
    head = name_of(rest[0]) if rest else "echo"
    if head in READ_ONLY or head in ("grep", "wc", "head", "tail", "cat", "ls", "stat", "du"):
        return None
    return f"xargs {head}: the commands it runs take words the rules cannot read"


def _curl(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    args = argv[1:]
    urls = [
        a
        for a in args
        if not a.startswith("-") and re.match(r"[\w.\[\]:-]+(?::\d+)?(/|$)|https?://", a)
    ]
    for i, a in enumerate(args):
        if a in ("-o", "--output") and i + 1 < len(args):
            urls = [u for u in urls if u != args[i + 1]]
            if not ctx.writable(paths.resolve(args[i + 1], cmd.cwd)):
                return f"curl -o {args[i + 1]} writes outside the workdir"
        if a in ("-K", "--config"):
            return "curl -K reads its options from a file"
    values = {
        args[i + 1]
        for i, a in enumerate(args[:-1])
        if re.fullmatch(r"-[dHXwAeuUFTm]|--\w[\w-]*", a)
    }
    urls = [u for u in urls if u not in values]
    if not urls:
        return "curl without a URL the rules can read"
    far = [u for u in urls if not LOOPBACK_URL.fullmatch(u)]
    return f"curl to {far[0]} (only this machine's loopback is allowed outright)" if far else None


def _tar(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    args = argv[1:]
    mode = args[0] if args else ""
    creating = (mode.startswith("-") is False and "c" in mode) or "-c" in args or "--create" in args
    listing = (not mode.startswith("-") and "t" in mode) or "-t" in args or "--list" in args
    archive = None
    for i, a in enumerate(args):
        if a in ("-f", "--file") and i + 1 < len(args):
            archive = args[i + 1]
        elif not a.startswith("-") and i == 0 and "f" in a and len(args) > 1:
            archive = args[1]
    if listing:
        return None
    if creating:
        return _file_op(lambda _a: [archive] if archive else [])(argv, cmd, ctx)
    where = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-C", "--directory")]
    return _file_op(lambda _a: where or ["."])(argv, cmd, ctx)


def _rsync(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    ops = _operands(argv[1:])
    if any(":" in o.split("/", 1)[0] for o in ops):
        return "rsync to or from another machine"
    return _file_op(lambda _a: ops[-1:])(argv, cmd, ctx)


def _mv(args: list[str]) -> list[str]:
    return _operands(args)  # a move deletes its sources: every operand must be writable


def _ln(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    ops = _operands(argv[1:])
    # a link inside the workdir that points out of it would let later writes escape
    return _file_op(lambda _a: ops)(argv, cmd, ctx)


def _agent(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    sub = argv[1] if len(argv) > 1 else ""
    ok = sub in ("sim", "bench", "todos", "watch", "runs", "report") or sub in ("--help", "-h")
    return None if ok else f"agent {sub} is not a command the rules know"


def _source(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    return _inside(argv[1], ctx, "a sourced script") if len(argv) > 1 else "source of nothing"


def _mount(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    return None if len(argv) == 1 else "mount with arguments changes the mounts"


def _listing(verbs: set[str]) -> Shape:
    def rule(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
        return None if set(argv[1:]) & verbs else f"{name_of(argv[0])} without {sorted(verbs)[0]}"

    return rule


def _ss(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    killing = any(a in ("-K", "--kill") or re.fullmatch(r"-[a-zA-Z]*K[a-zA-Z]*", a) for a in argv)
    return "ss -K closes sockets" if killing else None


def _hostname(argv: list[str], cmd: Simple, ctx: Context) -> str | None:
    return None if all(a.startswith("-") for a in argv[1:]) else "hostname NAME renames the box"


SHAPES: dict[str, Shape] = {
    "nvidia-smi": _nvidia_smi,
    "systemctl": _systemctl,
    "journalctl": _journalctl,
    "dmesg": _dmesg,
    "git": _git,
    "docker": _docker,
    "pip": _pip_cmd,
    "pip3": _pip_cmd,
    "kill": _kill,
    "pkill": _pkill,
    "killall": _pkill,
    "fuser": _fuser,
    "find": _find,
    "xargs": _xargs,
    "sed": _sed,
    "curl": _curl,
    "tar": _tar,
    "rsync": _rsync,
    "ln": _ln,
    "agent": _agent,
    "source": _source,
    ".": _source,
    "mount": _mount,
    "hostname": _hostname,
    "ss": _ss,
    "date": lambda a, c, x: _read_only("date", a),
    "sort": lambda a, c, x: _read_only("sort", a),
    "uniq": lambda a, c, x: _read_only("uniq", a),
    "fdisk": _listing({"-l", "--list"}),
    "sfdisk": _listing({"-l", "--list", "-d", "--dump"}),
    "parted": _listing({"-l", "--list"}),
    "mkdir": _file_op(_operands),
    "touch": _file_op(_operands),
    "rm": _file_op(_operands),
    "rmdir": _file_op(_operands),
    "unlink": _file_op(_operands),
    "truncate": _file_op(_operands),
    "cp": _file_op(_last),
    "install": _file_op(_last),
    "mv": _file_op(_mv),
    "chmod": _file_op(_chmod, globs_ok=False),
    "chown": _file_op(_chmod, globs_ok=False),
    "tee": _file_op(_operands),
    "dd": _file_op(_dd),
    "gzip": _file_op(_operands),
    "gunzip": _file_op(_operands),
    "unzip": _file_op(lambda a: [a[a.index("-d") + 1]] if "-d" in a[:-1] else ["."]),
    **{s: _shell for s in SHELL_NAMES},
}
