"""The sandbox a bash command runs in when the rules do not allow it outright: bubblewrap.

`Sandbox.wrap(command, cwd, writable, readonly)` is shell text for the host's `run`: bwrap with the
root read-only, the given folders (the workdir, the run folder) and a private /tmp writable, /dev
minimal with the GPU devices (/dev/nvidia*, /dev/dri) and /dev/shm passed through, /proc of its own
pid namespace with /proc/sys read-only (root may write sysctls without a capability), /run hidden
(systemd's, dbus's and docker's sockets answer root), every capability dropped, the user's secrets
hidden (~/.ssh, cloud credentials, the agent's own key file: empty in the sandbox) and the
environment's secrets unset, and the whole process tree killed when the call ends
(--unshare-pid --die-with-parent: the namespace's init dies with bwrap, and every process in it).
The network is shared: commands reach the servers on loopback.

`probe(host)` asks the host once whether bwrap works there (a real run, not only `command -v`:
bwrap can be installed yet refused by the kernel) and which environment variable names it has.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from state.secrets import is_secret_name

if TYPE_CHECKING:
    from tools.hosts.base import Host

# files and folders holding credentials, relative to the host's home: empty in the sandbox
SECRET_PATHS = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".gnupg",
    ".pypirc",
    ".huggingface/token",
    ".cache/huggingface/token",
    ".config/anthropic",
    ".anthropic",
)
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


@dataclass(frozen=True)
class Sandbox:
    secret_env: tuple[str, ...] = ()  # environment variables unset inside

    def wrap(
        self,
        command: str,
        cwd: str,
        writable: list[str],
        readonly: list[str] | None = None,
        hide: list[str] | None = None,
    ) -> str:
        """Shell text that runs `bash -c command` in the sandbox (cwd must be writable or
        visible). `readonly`: paths inside a writable folder kept read-only (the run's log);
        `hide`: more files to empty (the agent's own key files; `~/` is the host's home)."""
        q = shlex.quote
        secrets = " ".join(f'"$HOME"/{q(p)}' for p in SECRET_PATHS)
        hidden = " ".join(_home_word(p) for p in hide or [])
        binds = " ".join(f"--bind {q(w)} {q(w)}" for w in dict.fromkeys(writable))
        keep = " ".join(q(p) for p in readonly or [])
        unset = " ".join(f"--unsetenv {q(n)}" for n in self.secret_env)
        return (
            "s=(); for p in " + (secrets + " " + hidden).strip() + "; do "
            'if [ -d "$p" ]; then s+=(--tmpfs "$p"); '
            'elif [ -e "$p" ]; then s+=(--dev-bind /dev/null "$p"); fi; done; '
            "g=(); for p in /dev/nvidia* /dev/dri /dev/shm; do "
            '[ -e "$p" ] && g+=(--dev-bind "$p" "$p"); done; '
            "r=(); for p in " + " ".join(PROC_READ_ONLY) + (" " + keep if keep else "") + "; do "
            '[ -e "$p" ] && r+=(--ro-bind "$p" "$p"); done; '
            'exec bwrap --ro-bind / / --dev /dev "${g[@]}" --proc /proc --tmpfs /tmp '
            f'--tmpfs /run {binds} "${{r[@]}}" "${{s[@]}}" {BWRAP_BASE} {unset} '
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
    names = sorted({n for n in lines if n != "BWRAP_OK" and is_secret_name(n)})
    return Probe(Sandbox(tuple(names)), home)


def _home_word(path: str) -> str:
    if path == "~" or path.startswith("~/"):
        return '"$HOME"' + shlex.quote(path[1:]) if len(path) > 1 else '"$HOME"'
    return shlex.quote(path)
