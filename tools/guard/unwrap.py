"""Commands that run another command: the wrapped argv, or the shell text they would run.

`sudo -u root nice -n 19 rm -rf /` is judged as `rm -rf /`; `bash -lc 'X'`, `su -c 'X'`,
`eval X`, `ssh host X`, `watch X`, `env -S 'X'` and a shell reading a here-document give the text
X, which the guard parses and judges like a line of its own.
"""

from __future__ import annotations

import posixpath
import re
import shlex

# wrapper -> its options that take a separate value (`sudo -u root`), and how many positional
# words come before the wrapped command (`timeout 5 cmd`, `taskset -c 0-3 cmd`, `flock f cmd`)
WRAPPERS: dict[str, tuple[set[str], int]] = {
    "sudo": ({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R"}, 0),
    "doas": ({"-u", "-C"}, 0),
    "env": ({"-u", "-C", "--unset", "--chdir"}, 0),
    "nohup": (set(), 0),
    "time": ({"-f", "-o", "--format", "--output"}, 0),
    "nice": ({"-n", "--adjustment"}, 0),
    "ionice": ({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}, 0),
    "timeout": ({"-s", "-k", "--signal", "--kill-after"}, 1),
    "stdbuf": ({"-i", "-o", "-e"}, 0),
    "setsid": (set(), 0),
    "exec": ({"-a"}, 0),
    "command": (set(), 0),
    "builtin": (set(), 0),
    "taskset": (set(), 1),
    "numactl": ({"-N", "-m", "-C", "-p", "-i", "-P"}, 0),
    "chrt": (set(), 1),
    "flock": ({"-w", "-E", "--timeout", "--conflict-exit-code"}, 1),
    "unbuffer": (set(), 0),
    "busybox": (set(), 0),
    "strace": ({"-o", "-e", "-p", "-s", "-u"}, 0),
    "caffeinate": (set(), 0),
    "catchsegv": (set(), 0),
}
SHELLS = {"bash", "sh", "zsh", "dash", "ksh", "ash", "mksh", "fish"}
SSH_VALUE_OPTIONS = set(
    [
        "-b",
        "-c",
        "-D",
        "-E",
        "-e",
        "-F",
        "-I",
        "-i",
        "-J",
        "-L",
        "-l",
        "-m",
        "-O",
        "-o",
        "-p",
        "-Q",
        "-R",
        "-S",
        "-W",
        "-w",
        "-B",
    ]
)


def name_of(word: str) -> str:
    return posixpath.basename(word)


def skip_options(argv: list[str], with_value: set[str]) -> list[str]:
    """Drop leading options (a valued one takes the next word too) and a `--`."""
    while argv and argv[0].startswith("-") and argv[0] != "-":
        if argv[0] == "--":
            return argv[1:]
        argv = argv[2:] if argv[0] in with_value else argv[1:]
    return argv


def unwrap(argv: list[str], scripts: list[str]) -> list[str]:
    """The command `argv` runs in the end; shell text it hands to a shell goes to `scripts`."""
    while argv:
        head = name_of(argv[0])
        if "=" in argv[0] and not argv[0].startswith("-"):
            argv = argv[1:]  # VAR=value before the command
        elif head in ("command", "type", "hash") and argv[1:2] in (["-v"], ["-V"]):
            return []  # looks a name up, runs nothing
        elif head == "env" and _env_split(argv, scripts):
            return []
        elif head in WRAPPERS:
            with_value, positional = WRAPPERS[head]
            argv = skip_options(argv[1:], with_value)[positional:]
            if head == "flock" and argv[:1] in (["-c"], ["--command"]):
                scripts.extend(argv[1:2])
                return []
        elif head == "watch":
            rest = skip_options(argv[1:], {"-n", "--interval", "-d"})
            scripts.append(" ".join(rest))
            return []
        else:
            return argv
    return argv


def _env_split(argv: list[str], scripts: list[str]) -> bool:
    for i, a in enumerate(argv[1:], 1):
        if a in ("-S", "--split-string") and i + 1 < len(argv):
            scripts.append(" ".join(argv[i + 1 :]))
            return True
        if a.startswith(("-S", "--split-string=")) and len(a) > 2:
            scripts.append(a.split("=", 1)[1] if a.startswith("--") else a[2:])
            return True
    return False


def shell_text(argv: list[str], stdin: str | None) -> str | None:
    """The text a shell, `eval`, `su -c`, `ssh host ...` would run, if `argv` is one of those."""
    head, args = name_of(argv[0]), argv[1:]
    if head in SHELLS:
        i = 0
        while i < len(args) and args[i].startswith(("-", "+")) and args[i] != "--":
            if args[i] in ("-o", "+o", "-O", "+O"):
                i += 1  # takes a value: `bash -o pipefail -c X`
            elif not args[i].startswith("--") and "c" in args[i][1:]:
                return args[i + 1] if i + 1 < len(args) else ""
            i += 1
        script_args = [a for a in args[i:] if a != "--"]
        return stdin if not script_args else None
    if head == "eval":
        return " ".join(args)
    if head in ("su", "runuser"):
        for i, a in enumerate(args):
            if a in ("-c", "--command", "--session-command") and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(("--command=", "--session-command=")):
                return a.split("=", 1)[1]
            if re.fullmatch(r"-[a-z]*c", a) and i + 1 < len(args):
                return args[i + 1]
        if head == "runuser" and "--" in args:  # runuser -u bob -- cmd args
            return shlex.join(args[args.index("--") + 1 :])
        return None
    if head in ("ssh", "mosh"):
        rest = skip_options(args, SSH_VALUE_OPTIONS)
        words = rest[2:] if rest[1:2] == ["--"] else rest[1:]
        return " ".join(words) if words else None
    return None


def xargs_runs(argv: list[str], stdin_words: list[str] | None) -> list[list[str]]:
    """The commands `xargs ... cmd` runs, its input appended (or put in for -I's string)."""
    replace: str | None = None
    rest = argv[1:]
    while rest and rest[0].startswith("-") and rest[0] != "-":
        opt = rest.pop(0)
        if opt == "--":
            break
        if opt in ("-I", "-i", "--replace") or opt.startswith(("-I", "--replace=")):
            replace = (rest.pop(0) if opt == "-I" and rest else opt[2:] or "{}").split("=")[-1]
        elif opt in ("-a", "-d", "-E", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter"):
            rest = rest[1:]
    inner = rest or ["echo"]
    if not stdin_words:
        return [inner]
    if replace:
        return [[w.replace(replace, item) for w in inner] for item in stdin_words[:16]]
    return [inner + stdin_words]
