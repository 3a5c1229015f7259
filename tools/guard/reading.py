"""What a command allowed outright may read: no secret. `secret(path, ctx)` is why reading a path
may show one (a home's dot-files but its caches, keys and tokens by name, a process's
environment or memory under /proc, /etc/shadow and the like, disks and memory devices), and
`reads(words, cmd, ctx, recursive)` judges a command's operands - a recursive read of a folder
that holds a home, /proc or /etc is one too. tools/guard/boundary.py judges the line's text
for the same secrets whatever the shapes say; this is the shapes' own check of their operands."""

from __future__ import annotations

import posixpath
import re

from tools.guard import paths
from tools.guard.command import Simple
from tools.guard.context import Context

# under a home (~, /root, /home/x): its dot-entries hold keys and tokens (.ssh, .aws, .netrc,
# .config/gcloud, .kube, .docker, .git-credentials...), except the caches (logs, compile caches)
SECRET_NAMES = re.compile(
    r".*(?:\.pem|\.key|id_rsa\w*|id_ed25519\w*|id_ecdsa\w*|\.p12|\.pfx)|\.env"
)
SECRET_FILES = {"/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh", "/etc/security/opasswd"}
SECRET_FILES |= {"/etc/ssl/private", "/etc/kubernetes", "/etc/letsencrypt", "/run/secrets"}
SECRET_FILES |= {"/var/run/secrets", "/var/lib/kubelet"}
# devices whose bytes are data (a disk, memory): reading one reads every file on it
DEVICE_READ = re.compile(r"/dev/(?:null|zero|u?random|full|stdin|fd/0)")
# /proc files that show no secret (not environ, mem, root/, cwd/, fd/, maps of other processes)
PROC_READ = re.compile(
    r"/proc/(?:cpuinfo|meminfo|loadavg|uptime|version|stat|mounts|partitions|diskstats|vmstat|"
    r"swaps|interrupts|buddyinfo|zoneinfo|pressure/\w+|net/(?:tcp6?|udp6?|dev|unix|sockstat)|"
    r"driver/nvidia/.*|sys/(?:kernel|vm|fs|net)/[\w/.-]+|"
    r"(?:\d+|self)/(?:status|cmdline|stat|statm|comm|limits|oom_score|oom_score_adj|io|cgroup))"
)


def _below_home(full: str, ctx: Context) -> str | None:
    """The part of `full` below a home directory ("" for the home itself), or None."""
    for h in {ctx.home or "/root", "/root"}:
        if full == h:
            return ""
        if full.startswith(h.rstrip("/") + "/"):
            return full[len(h.rstrip("/")) + 1 :]
    m = re.fullmatch(r"/home/[^/]+(?:/(.*))?", full)
    return (m.group(1) or "") if m else None


def secret(path: str | None, ctx: Context) -> str | None:
    """Why reading `path` may show a secret, or None. A glob is judged by its folder and by
    whether it may match dot-files."""
    if path is None:
        return "a path the rules cannot read"
    full = ctx.absolute(path)
    if full is None and (path == "~" or path.startswith("~/")):
        full = "/root" + path[1:]
    if full is None:
        return "a path the rules cannot read" if path.startswith(("/", "~")) else None
    base = posixpath.basename(full)
    if any(full == r or full.startswith(r.rstrip("/") + "/") for r in ctx.roots() if r != "/"):
        return f"reads {path} (a key or a token)" if SECRET_NAMES.fullmatch(base) else None
    glob = paths.GLOB.search(full)
    if glob:
        folder = posixpath.dirname(full[: glob.start()])
        rest = full[len(folder) :]
        if re.search(r"/[.\[]", rest) or SECRET_NAMES.fullmatch(base):
            return f"reads {path} (a glob that may match dot-files, keys or tokens)"
        return secret(folder + "/x", ctx) or secret(folder, ctx)
    if full.startswith("/dev/") and not DEVICE_READ.fullmatch(full):
        return f"reads {full} (a device: a disk or memory holds every file)"
    if full.startswith("/proc/") or full == "/proc":
        if PROC_READ.fullmatch(full):
            return None
        return f"reads {full} (a process's environment, memory or files)"
    if any(full == s or full.startswith(s + "/") for s in SECRET_FILES):
        return f"reads {full}"
    if SECRET_NAMES.fullmatch(base):
        return f"reads {full} (a key or a token)"
    below = _below_home(full, ctx)
    if below is not None and below.startswith(".") and not below.startswith(".cache/"):
        return f"reads {full} (a home's dot-files hold keys and tokens)"
    if below is not None and "huggingface/token" in below:
        return f"reads {full}"
    return None


def reads(words: list[str], cmd: Simple, ctx: Context, recursive: bool = False) -> str | None:
    """The first reason one of `words` (paths read) is not certain, or None."""
    for w in words:
        if w == "-":
            continue
        p = paths.resolve(w, cmd.cwd)
        why = secret(p, ctx)
        if why:
            return why
        if recursive:
            full = ctx.absolute(p) if p else None
            if full is None or holds_secrets(full, ctx):
                return f"a recursive read of {w}, which holds a home or /proc"
    return None


def holds_secrets(full: str, ctx: Context) -> bool:
    """A folder above a home, /proc or /etc/ssh: reading it all reads their secrets."""
    full = full.rstrip("/") or "/"
    above = ["/root", "/home", "/proc", "/etc/ssh", "/etc", ctx.home or "/root"]
    return any(a == full or a.startswith(full.rstrip("/") + "/") for a in above) or (
        _below_home(full, ctx) == ""
    )
