"""The rules on the machine itself: powering off or rebooting (not `shutdown -c`), stopping SSH
or the network, killing init or every process."""

from __future__ import annotations

import re

from tools.guard.files import Rule, split

POWER_VERBS = {"reboot", "poweroff", "halt", "kexec", "suspend", "hibernate", "hybrid-sleep"}
POWER_VERBS |= {"emergency", "rescue", "soft-reboot", "suspend-then-hibernate"}
LIFELINES = re.compile(r"(?:ssh|sshd|networking|NetworkManager|systemd-networkd)(?:\.service)?")


def _power(args: list[str], cwd: str | None) -> str | None:
    if set(args) & {"--help", "-c", "--cancel", "-k", "--show"}:
        return None  # shutdown -c cancels one, -k only warns
    return "shuts down or reboots the machine"


def _systemctl(args: list[str], cwd: str | None) -> str | None:
    operands = split(args)[1]
    verb, units = (operands[0], operands[1:]) if operands else ("", [])
    if verb in POWER_VERBS:
        return "shuts down or reboots the machine"
    if verb == "isolate" and any(
        re.match(r"(rescue|emergency|poweroff|reboot|halt)", u) for u in units
    ):
        return "shuts down or reboots the machine"
    if verb in ("stop", "disable", "mask", "kill") and any(LIFELINES.fullmatch(u) for u in units):
        return "stops SSH or the network: the host would be cut off"
    return None


def _init(args: list[str], cwd: str | None) -> str | None:
    return "shuts down or reboots the machine" if set(args) & {"0", "6"} else None


def _kexec(args: list[str], cwd: str | None) -> str | None:
    return "reboots the machine" if set(args) & {"-e", "--exec"} else None


def _kill(args: list[str], cwd: str | None) -> str | None:
    """`kill 1`, `kill -9 -1`, `kill -s KILL -- -1`: pid 1, or every process; not `kill -l 1`."""
    if set(args) & {"-l", "-L", "--list", "--table"}:
        return None
    rest = list(args)
    if rest[:1] in (["-s"], ["-n"]) and len(rest) > 1:
        rest = rest[2:]
    elif rest and re.fullmatch(r"-(?:[A-Z]+|SIG[A-Z]+|\d+)", rest[0]) and len(rest) > 1:
        rest = rest[1:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    if any(a in ("1", "-1") for a in rest):
        return "signals init or every process (kill 1 / kill -1)"
    return None


def _pkill(args: list[str], cwd: str | None) -> str | None:
    operands = [a for a in split(_drop_values(args))[1] if not re.fullmatch(r"\d+", a)]
    if not operands or any(re.fullmatch(r"\^?\.?\*?\$?|\.\+", o) for o in operands):
        return "{cmd} without a name, or with a pattern that matches every process"
    return None


def _drop_values(args: list[str]) -> list[str]:
    """pkill/killall options whose value is a separate word: -u root, -s 9, --signal KILL."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-u", "-U", "-g", "-G", "-P", "-s", "-t", "--signal", "--user", "-o", "-y"):
            skip = True
        else:
            out.append(a)
    return out


MACHINE_RULES: dict[str, Rule] = {
    "shutdown": _power,
    "reboot": _power,
    "poweroff": _power,
    "halt": _power,
    "systemctl": _systemctl,
    "loginctl": _systemctl,
    "init": _init,
    "telinit": _init,
    "kexec": _kexec,
    "kill": _kill,
    "pkill": _pkill,
    "killall": _pkill,
    "killall5": lambda a, c: "killall5 signals every process",
}
