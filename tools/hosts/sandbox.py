"""The sandbox a bash command runs in when the rules do not allow it outright: bubblewrap.

`Sandbox.wrap(command, cwd, writable, readonly, hide, inner)` is shell text for the host's `run`:
bwrap with the root read-only, the given folders (the workdir) and a private /tmp writable, then
`readonly` on top (the run folder: its control files - events, todos, inbox, results, config, the
lock - cannot be written inside), then `inner` writable again (the run's outputs/ and logs/), /dev
minimal with the GPU devices (/dev/nvidia*, /dev/dri) and /dev/shm passed through, /proc of its own
pid namespace with /proc/sys read-only (root may write sysctls without a capability), /run hidden
(systemd's, dbus's and docker's sockets answer root), every capability dropped, and the whole
process tree killed when the call ends (--unshare-pid --die-with-parent: the namespace's init dies
with bwrap, and every process in it). The network is shared: commands reach the servers on
loopback.

Secrets (issue 47): the environment is an allow-list (bwrap runs under `env -i` with only the
variables tools/guard/boundary.py ENV_ALLOWED names and that do not look like a secret's:
DATABASE_URL, GH_PAT or SLACK_WEBHOOK_URL are not there, whatever their name); every dot-entry of
the home is empty inside but the caches and installed programs (boundary.HOME_KEPT, and any that
holds a folder of PATH), and within those the credential files (boundary.SECRET_PATHS); `hide`
empties more (the agent's own SSH keys, the runs' inbox keys). A folder that holds the workdir
or the run is never emptied.

`probe(host)` asks the host once whether bwrap works there (a real run, not only `command -v`:
bwrap can be installed yet refused by the kernel) and which environment variable names it has.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tools.guard.boundary import HOME_KEPT, SECRET_PATHS, env_allowed

if TYPE_CHECKING:
    from tools.hosts.base import Host

# parts of the kernel's /proc that root writes without a capability: read-only in the sandbox
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/fs", "/proc/driver", "/proc/acpi")
BWRAP_BASE = (
    "--unshare-pid --unshare-ipc --unshare-uts --die-with-parent --cap-drop ALL --new-session"
)
PROBE = (
    "command -v bwrap >/dev/null 2>&1 && bwrap --ro-bind / / --dev /dev --proc /proc "
    "--unshare-pid --die-with-parent --cap-drop ALL true >/dev/null 2>&1 && echo BWRAP_OK; "
    'echo "HOME=$HOME"; compgen -e'
)


# the variables every sandbox keeps when the host has them (the probe adds the host's names that
# boundary.env_allowed keeps, LC_*, CUDA_* ...)
ENV_BASE: tuple[str, ...] = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TZ")
# and the host's mark of the call (tools/hosts/base.py CALL_MARK: a token, no secret), by which a
# timed-out call's processes are found wherever they moved
ENV_BASE += ("CAMPAIGN_AGENT_CALL",)


@dataclass(frozen=True)
class Sandbox:
    keep_env: tuple[str, ...] = ENV_BASE  # the environment inside: these names only

    def wrap(
        self,
        command: str,
        cwd: str,
        writable: list[str],
        readonly: list[str] | None = None,
        hide: list[str] | None = None,
        inner: list[str] | None = None,
    ) -> str:
        """Shell text that runs `bash -c command` in the sandbox (cwd must be writable or
        visible). `readonly`: folders inside a writable one kept read-only (the run folder);
        `inner`: folders inside those writable again (its outputs/ and logs/); `hide`: more
        files or folders to empty (key files; `~/` is the host's home)."""
        q = shlex.quote
        secrets = " ".join(f'"$HOME"/{q(p)}' for p in SECRET_PATHS)
        hidden = " ".join(_home_word(p) for p in hide or [])
        binds = " ".join(f"--bind {q(w)} {q(w)}" for w in dict.fromkeys(writable))
        reopened = " ".join(f"--bind {q(w)} {q(w)}" for w in dict.fromkeys(inner or []))
        keep = " ".join(q(p) for p in readonly or [])
        held = " ".join(q(p.rstrip("/")) for p in [cwd, *writable, *(readonly or [])] if p)
        kept = "|".join(HOME_KEPT)
        names = " ".join(q(n) for n in dict.fromkeys([*ENV_BASE, *self.keep_env]))
        return (
            # a path to empty, unless it holds the workdir or the run (a link: its target)
            's=(); h() { local p=$1 w; [ -L "$p" ] && p=$(readlink -f -- "$p"); '
            '[ -n "$p" ] && [ "$p" != / ] || return 0; '
            f'for w in {held}; do case "$w/" in "$p"/*) return 0;; esac; done; '
            'if [ -d "$p" ]; then s+=(--tmpfs "$p"); '
            'elif [ -e "$p" ]; then s+=(--dev-bind /dev/null "$p"); fi; }; '
            # every dot-entry of the home but the kept ones (not when the home is a workdir)
            f'sweep=1; for w in {held}; do case "$HOME/" in "$w"/*) sweep=0;; esac; done; '
            'if [ "$sweep" = 1 ] && [ -d "$HOME" ]; then '
            'for p in "$HOME"/.[!.]* "$HOME"/..?*; do [ -e "$p" ] || [ -L "$p" ] || continue; '
            # (one that holds a folder of PATH is kept too: a ~/.venv the programs run from)
            'case ":$PATH:" in *":$p/"*|*":$p:"*) continue;; esac; '
            f'case "${{p##*/}}" in {kept}) ;; *) h "$p";; esac; done; fi; '
            "for p in " + (secrets + " " + hidden).strip() + '; do h "$p"; done; '
            # the environment: the allowed names only, with their values here - bwrap itself
            # too (it is pid 1 inside: its /proc/1/environ must hold no secret either)
            f"e=(); for n in {names}; do "
            '[ -n "${!n+x}" ] && e+=("$n=${!n}"); done; b=$(command -v bwrap); '
            "g=(); for p in /dev/nvidia* /dev/dri /dev/shm; do "
            '[ -e "$p" ] && g+=(--dev-bind "$p" "$p"); done; '
            "r=(); for p in " + " ".join(PROC_READ_ONLY) + (" " + keep if keep else "") + "; do "
            '[ -e "$p" ] && r+=(--ro-bind "$p" "$p"); done; '
            'exec env -i "${e[@]}" "$b" --ro-bind / / --dev /dev "${g[@]}" --proc /proc '
            f'--tmpfs /tmp --tmpfs /run {binds} "${{r[@]}}" {reopened} "${{s[@]}}" {BWRAP_BASE} '
            f"--chdir {q(cwd)} -- bash --norc --noprofile -c {q(command)}"
        )


@dataclass(frozen=True)
class Probe:
    sandbox: Sandbox | None  # None: no working bwrap on the host
    home: str | None  # the home of the host's user (for `~/x` paths)


async def probe(host: Host) -> Probe:
    """bubblewrap on the host (None where it is missing or does not work there), and its home."""
    res = await host.run(PROBE, timeout=30, cwd="/")
    lines = res.stdout.splitlines()
    home = next((line[5:] for line in lines if line.startswith("HOME=/")), None)
    if "BWRAP_OK" not in lines:
        return Probe(None, home)
    names = sorted({n for n in lines if n != "BWRAP_OK" and env_allowed(n)})
    return Probe(Sandbox(tuple(names)), home)


def _home_word(path: str) -> str:
    if path == "~" or path.startswith("~/"):
        return '"$HOME"' + shlex.quote(path[1:]) if len(path) > 1 else '"$HOME"'
    return shlex.quote(path)
