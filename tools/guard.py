"""The destructive-command guard: refuses the few shell commands that wreck a box.

`check(command, allow)` returns a one-line reason, or None when the command may run. It is a seat
belt against an accident (a model that "cleans up" with `rm -rf ~`), not a sandbox: it looks at
each simple command of a line (split on ; && || | & and newlines, with sudo/env/nohup/... and
`bash -c '...'` unwrapped). `[guard] allow` regexes in agent.toml let a matching command through.
"""

from __future__ import annotations

import re
import shlex

SYSTEM_DIRS = {
    "/",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/opt",
    "/proc",
    "/root",
    "/sbin",
    "/srv",
    "/sys",
    "/usr",
    "/var",
    "/usr/bin",
    "/usr/lib",
    "/usr/local",
    "/var/lib",
    "~",
    "$HOME",
    "${HOME}",
}
DISK = r"/dev/(?:sd[a-z]|nvme\d|hd[a-z]|vd[a-z]|xvd[a-z]|mmcblk\d|disk/)"
SPLIT = re.compile(r"&&|\|\||[;|&\n]|\$\(|`|\)")
PREFIXES = {
    "sudo",
    "env",
    "nohup",
    "time",
    "nice",
    "ionice",
    "exec",
    "command",
    "builtin",
    "xargs",
    "doas",
    "stdbuf",
    "setsid",
}
# the name starts at a word boundary and is bounded: an unanchored (\S+) backtracks
# quadratically, and a 2 MB command wedged the guard for hours
# options of the prefixes that take a separate value: `sudo -u root rm -rf /` is still rm
VALUE_OPTIONS = {
    "sudo": {"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R"},
    "doas": {"-u", "-C"},
    "nice": {"-n", "--adjustment"},
    "ionice": {"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"},
    "env": {"-u", "-C", "--unset", "--chdir"},
    "stdbuf": {"-i", "-o", "-e"},
    "exec": {"-a"},
    "xargs": {"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s"},
    "timeout": {"-s", "-k", "--signal", "--kill-after"},
}
FORK_BOMB = re.compile(
    r"(?<![^\s;&|(){}])([^\s;&|(){}]{1,64})\s*\(\)\s*\{[^}]*\1\s*\|\s*\1\s*&[^}]*\}"
)
SHLEX_MAX = 65_536  # shlex builds tokens by string concatenation: quadratic on huge words
POWER = {"shutdown", "reboot", "poweroff", "halt"}


def check(command: str, allow: list[str] | None = None) -> str | None:
    """The reason `command` is refused, or None."""
    for pattern in allow or []:
        if re.search(pattern, command):
            return None
    if FORK_BOMB.search(command):
        return "a fork bomb"
    if re.search(r">\s*" + DISK, command):
        return "a redirect that overwrites a disk device"
    for part in SPLIT.split(command):
        reason = _simple(part.strip())
        if reason:
            return reason
    return None


def _words(text: str) -> list[str]:
    if len(text) > SHLEX_MAX:
        return text.split()
    try:
        return shlex.split(text, comments=True)
    except ValueError:  # unbalanced quotes: judge the plain words
        return text.split()


def _unwrap(argv: list[str]) -> list[str]:
    """Drop sudo/env/nohup/timeout and their options, and VAR=value assignments."""
    while argv:
        head = argv[0].rsplit("/", 1)[-1]
        if "=" in argv[0] and not argv[0].startswith("-"):
            argv = argv[1:]
        elif head in PREFIXES or head == "timeout":
            argv = _skip_options(argv[1:], VALUE_OPTIONS.get(head, set()))
            if head == "timeout":
                argv = argv[1:]  # the duration
        else:
            break
    return argv


def _skip_options(argv: list[str], with_value: set[str]) -> list[str]:
    """Drop leading options; those that take a value (`sudo -u root`) take the next word too."""
    while argv and argv[0].startswith("-"):
        argv = argv[2:] if argv[0] in with_value else argv[1:]
    return argv


def _simple(text: str) -> str | None:
    argv = _unwrap(_words(text))
    if not argv:
        return None
    cmd = argv[0].rsplit("/", 1)[-1]
    args = argv[1:]
    flags = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
    longs = {a for a in args if a.startswith("--")}
    targets = [a for a in args if not a.startswith("-")]
    if cmd in ("bash", "sh", "zsh", "dash") and "-c" in args:
        inner = args[args.index("-c") + 1 :]
        return check(inner[0]) if inner else None
    if cmd == "rm" and ("r" in flags.lower() or "--recursive" in longs):
        if "--no-preserve-root" in longs:
            return "rm --no-preserve-root"
        for t in targets:
            if _system_path(t):
                return f"recursive delete of {t} (a system or home directory)"
    if cmd in ("chmod", "chown", "chgrp") and ("R" in flags or "--recursive" in longs):
        for t in targets:
            if _system_path(t):
                return f"recursive {cmd} of {t} (a system directory)"
    if cmd.startswith("mkfs") or cmd in ("mkswap", "wipefs"):
        return f"{cmd} formats or wipes a device"
    if cmd in ("dd", "shred") and any(re.match(r"(?:of=)?" + DISK, a) for a in args):
        return f"{cmd} overwrites a disk device"
    if cmd in POWER or (cmd in ("systemctl", "loginctl") and set(targets) & {*POWER, "kexec"}):
        return "shuts down or reboots the machine"
    if cmd in ("init", "telinit") and set(targets) & {"0", "6"}:
        return "shuts down or reboots the machine"
    if cmd == "kill" and _kills_everything(args):
        return "signals init or every process (kill 1 / kill -1)"
    if cmd == "find" and targets and _system_path(targets[0]) and "-delete" in args:
        return f"find {targets[0]} -delete deletes a system or home directory"
    return None


def _system_path(path: str) -> bool:
    p = path[:-2] or "/" if path.endswith("/*") else path
    p = p.rstrip("/") or "/"
    return p in SYSTEM_DIRS or p in ("/.", "/..")


def _kills_everything(args: list[str]) -> bool:
    """`kill 1`, `kill -9 1`, `kill -1`, `kill -9 -1`, `kill -- -1`: pid 1, or every process."""
    rest = list(args)
    if rest and rest[0] in ("-s", "-n") and len(rest) > 1:
        rest = rest[2:]
    elif rest and re.fullmatch(r"-(?:[A-Z]+|SIG[A-Z]+|\d+)", rest[0]) and len(rest) > 1:
        rest = rest[1:]  # the signal, when something follows it
    if rest and rest[0] == "--":
        rest = rest[1:]
    return any(a in ("1", "-1") for a in rest)
