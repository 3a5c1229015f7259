"""Paths as the guard judges them: normalised, home kept as `~`, globs matched against what matters.

A resolved path is absolute (`/etc`), home-based (`~`, `~/x`, `~bob`) or relative to the host's
workdir (`.`, `build`, `../..` - the parent of the workdir may well be home). None: unknown (a
relative path after `cd $SOMEWHERE`).
"""

from __future__ import annotations

import posixpath
import re
from fnmatch import fnmatchcase

GLOB = re.compile(r"[*?\[]")
EVERYTHING = re.compile(r"[*?.\[\]!]*[*?][*?.\[\]!]*")  # a glob with no name in it: *, .*, ?*
# deleting, moving or chmod -R-ing one of these (or everything in it) wrecks the box
PROTECTED = frozenset(
    {
        "/",
        *(
            f"/{d}"
            for d in [
                "bin",
                "boot",
                "dev",
                "etc",
                "home",
                "lib",
                "lib32",
                "lib64",
                "libx32",
                "opt",
                "proc",
                "root",
                "run",
                "sbin",
                "srv",
                "sys",
                "usr",
                "var",
                "tmp",
                "mnt",
                "media",
                "snap",
            ]
        ),
        *(f"/usr/{d}" for d in ["bin", "sbin", "lib", "lib64", "local", "share", "include"]),
        "/usr/local/bin",
        "/usr/local/lib",
        "/var/lib",
        "/var/log",
        "/etc/ssh",
        "/boot/efi",
        "/root/.ssh",
        "~",
        "~/.ssh",
    }
)
HOME_DIR = re.compile(r"/home/[^/]+|~[^/]+")  # someone's home: /home/bob, ~bob
ABOVE_WORKDIR = re.compile(r"\.\.(?:/\.\.)*")  # the workdir's parents: ~ itself, often
# files whose loss or truncation leaves a box nobody can log in to or boot
CRITICAL = frozenset(
    {"/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow", "/etc/sudoers", "/etc/fstab"}
)
DEVICE = re.compile(
    r"/dev/(?:(?:sd|hd|vd|xvd)[a-z]+\d*|nvme\d+(?:n\d+(?:p\d+)?)?|mmcblk\d+(?:p\d+)?|md\d+"
    r"|md/.+|dm-\d+|mapper/.+|disk/.+|block/.+|mem|kmem|port|root|sr\d+)"
    r"|/proc/sysrq-trigger"
)
# what a glob over /dev or /proc is tested against: /dev/sd* is a disk, /dev/nvidia* is not
DEVICE_SAMPLES = [
    "/dev/sda",
    "/dev/sda1",
    "/dev/hda",
    "/dev/vda",
    "/dev/xvda",
    "/dev/nvme0",
    "/dev/nvme0n1",
    "/dev/nvme0n1p1",
    "/dev/mmcblk0",
    "/dev/md0",
    "/dev/dm-0",
    "/dev/mapper/root",
    "/dev/disk/by-id/x",
    "/dev/mem",
    "/dev/sr0",
    "/proc/sysrq-trigger",
]
HOME_MARK = "/\x00home"  # a stand-in root while `~/..` paths are normalised


def resolve(path: str, cwd: str | None) -> str | None:
    """`path` normalised against `cwd` (see the module doc); None when it cannot be known."""
    if not path:
        return None
    if path == "~" or path.startswith("~/"):
        return _home(path[1:])
    if path.startswith("~"):  # ~bob/x
        user, _, rest = path.partition("/")
        return user + (("/" + posixpath.normpath(rest)) if rest else "")
    if path.startswith("/"):
        return _absolute(path)
    if cwd is None:
        return None
    if cwd == ".":
        return posixpath.normpath(path)
    return resolve(cwd.rstrip("/") + "/" + path, None)


def _absolute(path: str) -> str:
    return posixpath.normpath(re.sub("/+", "/", path)) or "/"


def _home(rest: str) -> str:
    """`~` + rest, normalised; a path that climbs out of home becomes `/` (home's parent)."""
    p = posixpath.normpath(HOME_MARK + "/" + rest)
    if p == HOME_MARK:
        return "~"
    if p.startswith(HOME_MARK + "/"):
        return "~" + p[len(HOME_MARK) :]
    return "/"


def protected(path: str | None) -> bool:
    """A system or home directory, an ancestor of the workdir, or a glob over one's contents."""
    if path is None:
        return False
    if _literal_protected(path):
        return True
    if not GLOB.search(path):
        return False
    parent, base = posixpath.split(path.rstrip("/"))
    if _literal_protected(parent or "/") and EVERYTHING.fullmatch(base):
        return True  # /etc/*, ~/.*, ../* - not /tmp/campaign-*
    return any(fnmatchcase(p, path) for p in PROTECTED)  # /e?c, /*


def _literal_protected(path: str) -> bool:
    return (
        path in PROTECTED
        or HOME_DIR.fullmatch(path) is not None
        or ABOVE_WORKDIR.fullmatch(path) is not None
    )


def device(path: str | None) -> bool:
    """A disk, memory or sysrq device: writing to it destroys data or stops the machine."""
    if path is None:
        return False
    if DEVICE.fullmatch(path):
        return True
    return bool(GLOB.search(path)) and any(fnmatchcase(d, path) for d in DEVICE_SAMPLES)


def critical(path: str | None) -> bool:
    return path is not None and (
        path in CRITICAL
        or (bool(GLOB.search(path)) and any(fnmatchcase(c, path) for c in CRITICAL))
    )


def under_dev(path: str | None) -> bool:
    """Under /dev, but not a harmless pseudo-device: what a formatting tool must not touch."""
    if path is None or not path.startswith("/dev/"):
        return False
    return not re.match(r"/dev/(?:null|zero|u?random|full|tty|std(?:in|out|err)|fd/|shm/)", path)


def expand_braces(word: str, limit: int = 64) -> list[str]:
    """Brace expansion of `{a,b}` lists (nested too), at most `limit` words."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", word)
    if not m:
        return [word]
    out: list[str] = []
    for alt in m.group(1).split(","):
        out.extend(expand_braces(word[: m.start()] + alt + word[m.end() :], limit))
        if len(out) >= limit:
            break
    return out[:limit]
