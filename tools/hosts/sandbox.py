"""The sandbox a bash command runs in when the rules do not allow it outright: bubblewrap.

`Sandbox.wrap(command, cwd, writable, readonly, hide, inner)` is shell text for the host's `run`:
bwrap with the root read-only, the given folders (the workdir) and a private /tmp writable, then
`readonly` on top (the run folder: its control files - events, todos, inbox, results, config, the
lock - cannot be written inside), then `inner` writable again (the run's outputs/ and logs/), /dev
minimal with the GPU devices (/dev/nvidia*, /dev/dri) passed through, /proc of its own
pid namespace with /proc/sys read-only (root may write sysctls without a capability), /run hidden
(systemd's, dbus's and docker's sockets answer root), every capability dropped, and the whole
process tree killed when the call ends (--unshare-pid --die-with-parent: the namespace's init dies
with bwrap, and every process in it). The network: a namespace of its own (--unshare-net: its own
loopback, no other interface, no other host) unless the line names the network (`network=True`,
tools/guard/network.py: a URL, a host:port, pip, curl, git clone...), which then shares the host's:
it reaches the run's servers on loopback and the package index.

Limits of a call (issue 47): at most MAX_TASKS processes and threads (a pids cgroup where the host
lets one be made - root, cgroup v1 - else, for a user that is not root, RLIMIT_NPROC at the
machine's task count plus MAX_TASKS: the kernel counts the user's tasks, so the line may add
MAX_TASKS and the other users' count; root is exempt from RLIMIT_NPROC, even in a user namespace,
so root without a writable pids cgroup has no limit, and the probe says so); no file larger
than the workdir's free space less a reserve (RLIMIT_FSIZE: one file cannot fill the disk), nor
more than that in all (the wrapper reads the disk every POLL_S and kills a call whose writes leave
it under the reserve: many files cannot fill it either, _watch); /tmp,
/dev/shm and /run private tmpfs capped at SCRATCH_MB (a quarter of the memory at most, where bwrap
takes --size): /dev/shm is the line's own, the engines' IPC segments outside are not there.

Who the line is (issue 47): where the host's user is root and bwrap makes a user namespace, nobody
(UNPRIVILEGED) inside - no capability, not root by name; the kernel still maps it to the user for
files, so the read-only binds keep root's files, and the system's secret files (/etc/shadow, ...)
are emptied.

Secrets (issue 47): the environment is an allow-list (bwrap runs under `env -i` with only the
variables tools/guard/boundary.py ENV_ALLOWED names and that do not look like a secret's:
DATABASE_URL, GH_PAT or SLACK_WEBHOOK_URL are not there, whatever their name); every dot-entry of
the home is empty inside but the caches and installed programs (boundary.HOME_KEPT, and any that
holds a folder of PATH), and within those the credential files (boundary.SECRET_PATHS); `hide`
empties more (the agent's own SSH keys, the runs' inbox keys). A folder that holds the workdir
or the run is never emptied.

`probe(host)` asks the host once whether bwrap works there (a real run, not only `command -v`:
bwrap can be installed yet refused by the kernel), whether it can give a line a network namespace
of its own (a container may refuse it), and which environment variable names it has; `Probe.line`
says what it found in one line.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tools.guard.boundary import HOME_KEPT, SECRET_PATHS, env_allowed
from tools.guard.reading import SECRET_FILES

if TYPE_CHECKING:
    from tools.hosts.base import Host

# parts of the kernel's /proc that root writes without a capability: read-only in the sandbox
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/fs", "/proc/driver", "/proc/acpi")
BWRAP_BASE = (
    "--unshare-pid --unshare-ipc --unshare-uts --die-with-parent --cap-drop ALL --new-session"
)
PIDS = "/sys/fs/cgroup/pids"  # cgroup v1's pids hierarchy: writable for root
# who a line runs as inside when the host's user is root: nobody, in a user namespace of its own
# (the user's files outside stay its own: the kernel maps it back to the user, uid 0)
UNPRIVILEGED = 65534
USER = f"--unshare-user --uid {UNPRIVILEGED} --gid {UNPRIVILEGED}"
_TRY = "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-pid --die-with-parent --cap-drop ALL"
PROBE = (
    "command -v bwrap >/dev/null 2>&1 && echo BWRAP_FOUND && "
    f"{_TRY} true >/dev/null 2>&1 && echo BWRAP_OK && "
    f"{{ {_TRY} --unshare-net true >/dev/null 2>&1 && echo NET_OK; }}; "
    f"{{ {_TRY} --size 1048576 --tmpfs /tmp true >/dev/null 2>&1 && echo SIZE_OK; }}; "
    f"{{ {_TRY} {USER} true >/dev/null 2>&1 && echo USER_OK; }}; "
    f"[ -w {PIDS}/cgroup.procs ] && echo PIDS_CGROUP; "
    # why bwrap may not run for a user that is not root: user namespaces off or restricted
    "for f in /proc/sys/user/max_user_namespaces /proc/sys/kernel/unprivileged_userns_clone "
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns; do "
    '[ -r "$f" ] && echo "USERNS ${f##*/}=$(cat "$f")"; done; '
    'echo "UID=$(id -u)"; echo "HOME=$HOME"; compgen -e'
)
MARKS = ("BWRAP_FOUND", "BWRAP_OK", "NET_OK", "SIZE_OK", "USER_OK", "PIDS_CGROUP")
# the limits of a call (read when a line is wrapped)
MAX_TASKS = 4096  # processes and threads in the sandbox
SCRATCH_MB = 8192  # each of /tmp and /dev/shm, and at most a quarter of the memory
RUN_MB = 64  # /run
FILE_RESERVE = 20  # RLIMIT_FSIZE: the free space less 1/20 of the disk (at least 1 GiB)
RESERVE_MIN = 1 << 30
POLL_S = 0.5  # how often the workdir's disk is read while a call runs (the total it writes)
QUOTA_EXIT = 122  # a call stopped for what it wrote
NO_SANDBOX = "what the rules do not allow outright is refused there"
# and on the machine of the run, what a supervisor's rule lets run code (tools/guarded.py)
NO_MASK = "so is a line a supervisor's rule allows that runs code (it would hold the inbox key)"


# the variables every sandbox keeps when the host has them (the probe adds the host's names that
# boundary.env_allowed keeps, LC_*, CUDA_* ...)
ENV_BASE: tuple[str, ...] = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TZ")
# and the host's mark of the call (tools/hosts/base.py CALL_MARK: a token, no secret), by which a
# timed-out call's processes are found wherever they moved
ENV_BASE += ("CAMPAIGN_AGENT_CALL",)


@dataclass(frozen=True)
class Sandbox:
    keep_env: tuple[str, ...] = ENV_BASE  # the environment inside: these names only
    net: bool = True  # the host gives a line a network namespace of its own
    sized: bool = True  # its bwrap caps a tmpfs (--size)
    pids: str = "cgroup"  # how processes are bounded: "cgroup", "rlimit" or "none" (root)
    # the host's user is root and a user namespace makes the line nobody inside (False: the
    # line runs as the host's user - root with no capability where no user namespace is given)
    user: bool = False

    def describe(self) -> str:
        """What this sandbox bounds, in words (the probe's line)."""
        net = (
            "a network namespace of its own unless a line names the network"
            if self.net
            else "the host's network shared (no network namespace there)"
        )
        pids = {
            "cgroup": f"at most {MAX_TASKS} processes (a pids cgroup)",
            "rlimit": f"at most {MAX_TASKS} processes more than the user has (RLIMIT_NPROC)",
            "none": "no process limit (root without a writable pids cgroup)",
        }[self.pids]
        scratch = (
            f"/tmp and /dev/shm private, {SCRATCH_MB} MiB at most"
            if self.sized
            else "/tmp and /dev/shm private, not capped (bwrap without --size)"
        )
        who = f"as nobody (uid {UNPRIVILEGED}) in a user namespace" if self.user else "as the user"
        return f"bubblewrap, {who}; {net}; {pids}; {scratch}; no file past the disk's reserve"

    def wrap(
        self,
        command: str,
        cwd: str,
        writable: list[str],
        readonly: list[str] | None = None,
        hide: list[str] | None = None,
        inner: list[str] | None = None,
        network: bool = True,
        free: tuple[int, int] | None = None,
    ) -> str:
        """Shell text that runs `bash -c command` in the sandbox (cwd must be writable or
        visible). `readonly`: folders inside a writable one kept read-only (the run folder);
        `inner`: folders inside those writable again (its outputs/ and logs/); `hide`: more
        files or folders to empty (key files; `~/` is the host's home); `network`: the host's
        network shared (else a namespace of its own, where the host gives one); `free`: the
        workdir disk's free and total bytes where the caller read them (else the shell does)."""
        q = shlex.quote
        secrets = " ".join(f'"$HOME"/{q(p)}' for p in SECRET_PATHS)
        secrets += " " + " ".join(q(p) for p in sorted(SECRET_FILES))  # /etc/shadow, host keys
        hidden = " ".join(_home_word(p) for p in hide or [])
        binds = " ".join(f"--bind {q(w)} {q(w)}" for w in dict.fromkeys(writable))
        reopened = " ".join(f"--bind {q(w)} {q(w)}" for w in dict.fromkeys(inner or []))
        keep = " ".join(q(p) for p in readonly or [])
        held = " ".join(q(p.rstrip("/")) for p in [cwd, *writable, *(readonly or [])] if p)
        kept = "|".join(HOME_KEPT)
        names = " ".join(q(n) for n in dict.fromkeys([*ENV_BASE, *self.keep_env]))
        own_net = " --unshare-net" if self.net and not network else ""
        own_net += f" {USER}" if self.user else ""
        run_size = f"--size {RUN_MB << 20} " if self.sized else ""
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
            "g=(); for p in /dev/nvidia* /dev/dri; do "
            '[ -e "$p" ] && g+=(--dev-bind "$p" "$p"); done; '
            "r=(); for p in " + " ".join(PROC_READ_ONLY) + (" " + keep if keep else "") + "; do "
            '[ -e "$p" ] && r+=(--ro-bind "$p" "$p"); done; '
            + self._limits(cwd, quota_kb(*free) if free else None)
            + 'env -i "${e[@]}" "$b" --ro-bind / / --dev /dev "${g[@]}" --proc /proc '
            f'"${{t[@]}}" --tmpfs /tmp "${{t[@]}}" --tmpfs /dev/shm {run_size}--tmpfs /run '
            f'{binds} "${{r[@]}}" {reopened} "${{s[@]}}" '
            f"{BWRAP_BASE}{own_net} "
            f"--chdir {q(cwd)} -- bash --norc --noprofile -c {q(command)} 0<&0 & " + _watch(cwd)
        )

    def mask(self, command: str, hide: list[str], readonly: list[str], inner: list[str]) -> str:
        """Shell text that runs `bash -c command` as a supervisor's rule lets it run: the whole
        root writable as the user has it, the agent's environment, the host's network - but in a
        pid namespace and /proc of its own, with no capability, /dev minimal (GPUs passed), `hide`
        emptied and `readonly` (the run folder) read-only but `inner` (its outputs/ and logs/).
        A rule may name a program that runs any code (`python3 -c:*`): the kernel keeps the
        run's inbox keys and control files from it - not only their names, as the rules do -
        and /proc/PID/root of the processes outside (the same files, unmasked) is not there."""
        q = shlex.quote
        hidden = " ".join(q(p) for p in dict.fromkeys(hide)) or "''"
        keep = " ".join(f"--ro-bind {q(p)} {q(p)}" for p in dict.fromkeys(readonly))
        reopen = " ".join(f"--bind {q(p)} {q(p)}" for p in dict.fromkeys(inner))
        return (
            f"a=(); for p in {hidden}; do "
            'if [ -d "$p" ]; then a+=(--tmpfs "$p"); '
            'elif [ -e "$p" ]; then a+=(--ro-bind /dev/null "$p"); fi; done; '
            "g=(); for p in /dev/nvidia* /dev/dri /dev/shm; do "
            '[ -e "$p" ] && g+=(--dev-bind "$p" "$p"); done; '
            'exec bwrap --bind / / --dev /dev "${g[@]}" --proc /proc "${a[@]}" '
            f"{keep} {reopen} --unshare-pid --die-with-parent --cap-drop ALL "
            f'--chdir "$PWD" -- bash -c {q(command)}'
        )

    def _limits(self, cwd: str, quota: tuple[int, int] | None) -> str:
        """Shell text that sets the call's limits on the wrapper (bwrap and the line inherit
        them), `t`, the --size of /tmp and /dev/shm, and `qf` and `qs`, what the call may write
        and the free KiB under which it is stopped (_watch). Few programs started: a call pays
        each (`quota`, quota_kb's, is given where the caller can read the disk itself)."""
        q = shlex.quote
        if quota is not None:
            text = f"qf={quota[0]}; qs={quota[1]}; ulimit -f $qf; "
        else:  # the workdir's disk, from here (KiB: ulimit -f), as quota_kb reads it
            text = (
                f"read -r qf qs <<< \"$(df -Pk -- {q(cwd)} 2>/dev/null | awk 'NR == 2 {{ "
                f"r = int($2 / {FILE_RESERVE}); if (r < {RESERVE_MIN >> 10}) r = "
                f"{RESERVE_MIN >> 10}; f = int($4 - r); if (f < 1024) f = 1024; "
                "print f, int($4 - f) }')\"; "
                '[ "${qf:-0}" -ge 1024 ] 2>/dev/null || { qf=1024; qs=-1; }; ulimit -f "$qf"; '
            )
        text += "t=(); "
        if self.sized:  # /tmp and /dev/shm: SCRATCH_MB, at most a quarter of the memory
            text += (
                'm=0; while read -r k v _; do [ "$k" = MemTotal: ] && '
                "{ m=$((v / 4096)); break; }; done < /proc/meminfo; "
                f"[ $m -gt 0 ] && [ $m -lt {SCRATCH_MB} ] || m={SCRATCH_MB}; "
                "t=(--size $((m << 20))); "
            )
        if self.pids == "cgroup":  # a cgroup of its own; now and then, empty ones removed
            text += (
                f"c={PIDS}; (( RANDOM % 16 )) || find $c -maxdepth 1 -name "
                "'campaign-sandbox-*' -mmin +1 -exec rmdir {} + 2>/dev/null; "
                "d=$(mktemp -d $c/campaign-sandbox-XXXXXXXX 2>/dev/null) && "
                f'echo {MAX_TASKS} > "$d/pids.max" && echo $$ > "$d/cgroup.procs" || '
                "{ echo 'the sandbox could not make its pids cgroup' >&2; exit 126; }; "
            )
        elif self.pids == "rlimit":  # every task of the machine now (the user's are fewer;
            # RLIMIT_NPROC counts the user's), and MAX_TASKS more - read without a program
            text += (
                "read -r _ _ _ u _ < /proc/loadavg; u=${u#*/}; "
                f"ulimit -u $((${{u:-0}} + {MAX_TASKS})); "
            )
        return text


def file_limit_kb(free: int, total: int) -> int:
    """RLIMIT_FSIZE in KiB (as `ulimit -f` takes it): the free space less a reserve of 1/20 of
    the disk (at least 1 GiB), and 1 MiB at the least - the formula the shell above computes."""
    reserve = max(total // FILE_RESERVE, RESERVE_MIN)
    return max((free - reserve) >> 10, 1024)


def quota_kb(free: int, total: int) -> tuple[int, int]:
    """What a call may write on the workdir's disk, in KiB - one file (RLIMIT_FSIZE) or all
    together - and the free KiB under which it is stopped: the free space at its start less
    that quota (the disk's reserve, unless it already had less)."""
    limit = file_limit_kb(free, total)
    return limit, (free >> 10) - limit


def _watch(cwd: str) -> str:
    """Shell text that waits for the sandbox (`$!`) while it reads the workdir's disk every
    POLL_S: a call that takes more than its quota, however many files it spread it over, is
    killed (the pid namespace ends its every process) and says why; else bwrap's status."""
    q = shlex.quote
    stop = (
        "the call was stopped: what it wrote left the workdir's disk with $((w >> 10)) MiB free, "
        "under its reserve; a call may write $((qf >> 10)) MiB there in all (the free space at "
        "its start less the reserve) - remove what is not needed, or write less"
    )
    return (
        "p=$!; while :; do "
        f"sleep {POLL_S} & z=$!; wait -n; kill -0 $p 2>/dev/null || break; "
        f"w=$(df -Pk -- {q(cwd)} 2>/dev/null); read -r _ _ _ w _ <<< \"${{w##*$'\\n'}}\"; "
        '[ "${w:-0}" -lt "$qs" ] 2>/dev/null || continue; '
        f'{{ kill -KILL $p $z; wait $p $z; }} 2>/dev/null; echo "{stop}" >&2; exit {QUOTA_EXIT}; '
        "done; { kill -KILL $z; wait $z; } 2>/dev/null; wait $p"
    )


@dataclass(frozen=True)
class Probe:
    sandbox: Sandbox | None  # None: no working bwrap on the host
    home: str | None  # the home of the host's user (for `~/x` paths)
    line: str = ""  # what the probe found, in one line (said when the run starts)
    why: str = ""  # no sandbox: why not, in words (a refusal says it)


async def probe(host: Host) -> Probe:
    """bubblewrap on the host (None where it is missing or does not work there), and its home."""
    res = await host.run(PROBE, timeout=30, cwd="/")
    lines = res.stdout.splitlines()
    home = next((line[5:] for line in lines if line.startswith("HOME=/")), None)
    if "BWRAP_OK" not in lines:
        why = (
            f"bubblewrap is installed but does not run there ({_userns(lines)})"
            if "BWRAP_FOUND" in lines
            else "bubblewrap is not installed (apt-get install -y bubblewrap)"
        )
        said = f"{NO_SANDBOX}; {NO_MASK}" if host.is_local else NO_SANDBOX
        return Probe(None, home, f"no sandbox on {host.name}: {why}; {said}", why)
    names = sorted({n for n in lines if n not in MARKS and env_allowed(n)})
    uid = next((line[4:] for line in lines if line.startswith("UID=")), "")
    pids = "cgroup" if "PIDS_CGROUP" in lines else "none" if uid == "0" else "rlimit"
    user = uid == "0" and "USER_OK" in lines  # a user that is not root is not root inside
    sandbox = Sandbox(
        tuple(names), net="NET_OK" in lines, sized="SIZE_OK" in lines, pids=pids, user=user
    )
    return Probe(sandbox, home, f"sandbox on {host.name}: {sandbox.describe()}")


def _userns(lines: list[str]) -> str:
    """Why bwrap may be refused: the user namespace settings the probe read."""
    found = dict(
        line[7:].split("=", 1) for line in lines if line.startswith("USERNS ") and "=" in line
    )
    if found.get("max_user_namespaces") == "0":
        return "user namespaces are off: user.max_user_namespaces = 0"
    if found.get("unprivileged_userns_clone") == "0":
        return "user namespaces are off for users: kernel.unprivileged_userns_clone = 0"
    if found.get("apparmor_restrict_unprivileged_userns") == "1":
        return (
            "AppArmor restricts user namespaces: kernel.apparmor_restrict_unprivileged_userns = 1"
            " (a profile for bwrap, or the setting off)"
        )
    return "the kernel or a container refused its namespaces"


def _home_word(path: str) -> str:
    if path == "~" or path.startswith("~/"):
        return '"$HOME"' + shlex.quote(path[1:]) if len(path) > 1 else '"$HOME"'
    return shlex.quote(path)
