"""The rules on files and disks: recursive delete, move or chmod of a system or home directory;
any delete of passwd/shadow/sudoers/fstab; writing a disk, memory or sysrq device; formatting,
partitioning or erasing a device; rsync --delete into a system directory.

A rule takes the operands after the command name and the directory it runs in; it returns the
reason (`{cmd}` stands for the command's name) or None.
"""

from __future__ import annotations

from collections.abc import Callable

from tools.guard import paths

Rule = Callable[[list[str], str | None], str | None]


def split(args: list[str]) -> tuple[list[str], list[str]]:
    """(options, operands), honouring `--`."""
    opts: list[str] = []
    for i, a in enumerate(args):
        if a == "--":
            return opts, [*(x for x in args[:i] if not x.startswith("-")), *args[i + 1 :]]
        if a.startswith("-") and len(a) > 1:
            opts.append(a)
    return opts, [a for a in args if not (a.startswith("-") and len(a) > 1)]


def has(opts: list[str], short: str, long: str) -> bool:
    """`-r` in a cluster (`-rf`), or `--recursive` or an abbreviation GNU accepts (`--rec`)."""
    for o in opts:
        if o.startswith("--"):
            name = o.split("=", 1)[0]
            if len(name) >= 3 and ("--" + long).startswith(name):
                return True
        elif any(ch in o[1:] for ch in short):
            return True
    return False


def resolved(operands: list[str], cwd: str | None) -> list[str]:
    return [p for p in (paths.resolve(a, cwd) for a in operands) if p is not None]


def _rm(args: list[str], cwd: str | None) -> str | None:
    opts, operands = split(args)
    recursive = has(opts, "rR", "recursive")
    if recursive and has(opts, "", "no-preserve-root"):
        return "rm --no-preserve-root"
    for p in resolved(operands, cwd):
        if recursive and paths.protected(p):
            return f"recursive delete of {p} (a system or home directory, or all that is in one)"
        if paths.critical(p):
            return f"deletes {p}"
    return None


def _perm(args: list[str], cwd: str | None) -> str | None:
    opts, operands = split(args)
    if not has(opts, "R", "recursive"):
        return None
    for p in resolved(operands[1:], cwd):
        if paths.protected(p):
            return f"recursive {{cmd}} of {p} (a system or home directory)"
    return None


def _mv(args: list[str], cwd: str | None) -> str | None:
    opts, operands = split(args)
    into_dir = any(o.startswith(("-t", "--target")) for o in opts)
    sources = operands if into_dir else operands[:-1]
    for p in resolved(sources, cwd):
        if paths.protected(p) or paths.critical(p):
            return f"moves {p} away (a system or home directory)"
    return _writes_device(operands[-1:], cwd)


def _writes_device(operands: list[str], cwd: str | None) -> str | None:
    for p in resolved(operands, cwd):
        if paths.device(p):
            return f"{{cmd}} writes {p} (a disk or system device)"
        if paths.critical(p):
            return f"{{cmd}} overwrites {p}"
    return None


def _dd(args: list[str], cwd: str | None) -> str | None:
    return _writes_device([a[3:] for a in args if a.startswith("of=")], cwd)


def _last_operand(args: list[str], cwd: str | None) -> str | None:
    return _writes_device(split(args)[1][-1:], cwd)


def _all_operands(args: list[str], cwd: str | None) -> str | None:
    return _writes_device(split(args)[1], cwd)


def _format(args: list[str], cwd: str | None) -> str | None:
    for p in resolved(split(args)[1], cwd):
        if paths.under_dev(p):
            return f"{{cmd}} formats or wipes {p}"
    return None


def _partition(args: list[str], cwd: str | None) -> str | None:
    if set(args) & {"-l", "--list", "-p", "--print", "print", "-d", "--dump"}:
        return None
    return _format(args, cwd)


def _subcommand(verbs: set[str], what: str) -> Rule:
    def rule(args: list[str], cwd: str | None) -> str | None:
        operands = split(args)[1]
        return f"{{cmd}} {operands[0]} {what}" if operands and operands[0] in verbs else None

    return rule


def _rsync(args: list[str], cwd: str | None) -> str | None:
    opts, operands = split(args)
    if any(o.startswith("--del") for o in opts) and operands:
        dest = paths.resolve(operands[-1], cwd)
        if paths.protected(dest):
            return f"rsync --delete into {dest} (a system or home directory)"
    return None


FILE_RULES: dict[str, Rule] = {
    "rm": _rm,
    "chmod": _perm,
    "chown": _perm,
    "chgrp": _perm,
    "mv": _mv,
    "cp": _last_operand,
    "install": _last_operand,
    "dd": _dd,
    "tee": _all_operands,
    "shred": _all_operands,
    "truncate": _all_operands,
    "wipefs": _format,
    "blkdiscard": _format,
    "mkswap": _format,
    "mke2fs": _format,
    "badblocks": lambda a, c: _format(a, c) if has(split(a)[0], "w", "") else None,
    "hdparm": lambda a, c: (
        "hdparm erases or writes a disk"
        if any(o.startswith(("--security-erase", "--write-sector", "--trim-sector")) for o in a)
        else None
    ),
    "nvme": _subcommand({"format", "sanitize", "delete-ns", "ns-delete"}, "erases an NVMe disk"),
    "cryptsetup": _subcommand({"luksFormat", "erase", "luksErase"}, "destroys encrypted data"),
    "zpool": _subcommand({"destroy", "labelclear"}, "destroys a pool"),
    "rsync": _rsync,
    **{p: _partition for p in ("fdisk", "sfdisk", "parted", "sgdisk", "gdisk", "cfdisk")},
}
PREFIX_RULES: list[tuple[str, Rule]] = [
    ("mkfs", _format),
    ("mkdosfs", _format),
    ("mkntfs", _format),
]
