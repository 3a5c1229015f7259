"""The Host interface: what tools need from a machine, local or over SSH.

Most operations are small shell commands run through `run`, so the local and the SSH host share
them and behave the same; each implementation overrides what it can do faster (the local host
reads files directly, the SSH host reads byte ranges over SFTP).
"""

from __future__ import annotations

import re
import shlex
import stat
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tools.hosts.output import MAX_CAPTURE
from tools.hosts.sandbox import Probe, Sandbox, probe

if TYPE_CHECKING:
    from tools.domain.config import HostConfig


class HostError(Exception):
    """A host could not do what was asked (unreachable, refused, lost); one line for the model."""


@dataclass
class CommandResult:
    exit_code: int | None  # None when the command was killed by the timeout
    stdout: str
    stderr: str
    duration: float
    timed_out: bool = False
    dropped: int = 0  # bytes dropped from the middle of the output (beyond the capture limit)
    # after a timeout: processes of the command still alive, moved into a session of their own
    # (setsid) beyond the reach of the group kill; found by the CALL_MARK in their environment
    survivors: list[int] = field(default_factory=list)


# put in the environment of every command `run` starts: its descendants inherit it, whatever
# session or group they move to
CALL_MARK = "CAMPAIGN_AGENT_CALL"


def marked_sh(token: str, pgid: int) -> str:
    """A shell command printing the pids whose environment holds CALL_MARK=token, but for the
    members of group `pgid` (killed, maybe not yet gone)."""
    return (
        f"for f in $(grep -lzxF -- {CALL_MARK}={token} /proc/[0-9]*/environ 2>/dev/null); do "
        'p=${f#/proc/}; p=${p%/environ}; g=$(ps -o pgid= -p "$p" 2>/dev/null | tr -d " "); '
        f'[ -n "$g" ] && [ "$g" != {int(pgid)} ] && echo "$p"; done; true'
    )


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    args: str


# `ps` everywhere procps exists; zombies are left out (PID 1 in a container may never reap them,
# and a zombie holds no port, no GPU memory and no files)
PS = "ps -eo pid=,ppid=,pgid=,stat=,args="
LISTEN = re.compile(r"^\s*\d+:\s*[0-9A-F]+:([0-9A-F]{4})\s+[0-9A-F]+:[0-9A-F]{4}\s+0A\s")


def parse_ps(text: str) -> list[Proc]:
    procs = []
    for line in text.splitlines():
        parts = line.split(None, 4)
        if len(parts) < 4 or not parts[0].isdigit() or parts[3].startswith("Z"):
            continue
        args = parts[4] if len(parts) > 4 else ""
        procs.append(Proc(int(parts[0]), int(parts[1]), int(parts[2]), args))
    return procs


def listening_ports(proc_net_tcp: str) -> set[int]:
    """Ports in LISTEN state from /proc/net/tcp and tcp6 (no `ss` needed)."""
    ports = set()
    for line in proc_net_tcp.splitlines():
        m = LISTEN.match(line)
        if m:
            ports.add(int(m.group(1), 16))
    return ports


def group_alive_sh(pgid: int) -> str:
    """A shell test: does the group have a member that is not a zombie?"""
    return f"ps -eo pgid=,stat= | awk '$1 == {int(pgid)} && $2 !~ /^Z/ {{f = 1}} END {{exit !f}}'"


def check_regular(path: str, host: str, mode: int | None) -> None:
    """Logs and files are read only when regular: reading a FIFO or a device blocks (or never
    ends), and a folder has nothing to read."""
    if mode is not None and not stat.S_ISREG(mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a folder"
            if stat.S_ISDIR(mode)
            else ("a device or socket")
        )
        raise HostError(f"{path} on {host} is {kind}, not a regular file; nothing to read")


def descendants(procs: list[Proc], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p.pid)
    out, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


class Host(ABC):
    """One machine. Every method may raise HostError; none blocks the event loop."""

    def __init__(self, config: HostConfig) -> None:
        self.config = config
        self.name = config.name
        self._probe: Probe | None = None  # the sandbox and home, asked once

    async def probed(self) -> Probe:
        """What this host's sandbox can do (tools/hosts/sandbox.py), asked once."""
        if self._probe is None:
            self._probe = await probe(self)
        return self._probe

    async def sandbox(self) -> Sandbox | None:
        """bubblewrap on this host, asked once; None: there is none."""
        return (await self.probed()).sandbox

    async def home(self) -> str | None:
        return (await self.probed()).home

    is_local: bool = False

    # --- what each implementation provides -------------------------------------------------------
    @abstractmethod
    async def run(
        self,
        command: str,
        timeout: float = 120,
        cwd: str | None = None,
        max_capture: int = MAX_CAPTURE,
    ) -> CommandResult:
        """Run `bash -c command` (in the workdir unless cwd is given). On timeout the whole
        process group is killed: nothing the command started keeps running, except what it
        detached into a session of its own."""

    @abstractmethod
    async def workdir(self) -> str:
        """The absolute working directory on the host (created on first use)."""

    @abstractmethod
    async def read_bytes(self, path: str, offset: int, length: int) -> bytes:
        """Up to `length` bytes of a file from `offset`, without reading the rest of it."""

    @abstractmethod
    async def size(self, path: str) -> int:
        """The size of a file in bytes; HostError when it does not exist."""

    @abstractmethod
    async def forward_port(self, remote_port: int) -> int:
        """A local port that reaches `remote_port` on the host's loopback (local host: the same)."""

    @abstractmethod
    async def put(self, local_path: str, remote_path: str) -> int:
        """Copy a local file to the host; returns the bytes written (checked against the source)."""

    @abstractmethod
    async def get(self, remote_path: str, local_path: str) -> int:
        """Copy a file from the host; returns the bytes read (checked against the source)."""

    async def close(self) -> None:
        return None

    # --- shared, built on `run` ----------------------------------------------------------------
    async def check(self, command: str, timeout: float = 30, cwd: str | None = "/") -> str:
        """Run a helper command that must succeed; its stdout. Relative paths: pass cwd=None."""
        res = await self.run(command, timeout=timeout, cwd=cwd)
        if res.exit_code != 0:
            detail = (res.stderr.strip() or res.stdout.strip()).splitlines()
            why = detail[-1] if detail else f"exit code {res.exit_code}"
            raise HostError(f"on host {self.name}: `{command[:60]}` failed: {why}")
        return res.stdout

    async def start_detached(self, command: str, log: str, cwd: str | None = None) -> int:
        """Start `command` in a new session with every stdio on `log`; its pid (= its pgid).

        `setsid CMD >LOG 2>&1 </dev/null & echo $!`: a background job of a non-interactive shell is
        not a group leader, so setsid(1) does not fork and $! is the server's own pid.
        """
        where = cwd or await self.workdir()
        q = shlex.quote
        # the log is made 0600 (its folder 0700) before the server's shell opens it: the umask
        # of the server itself is left as it is
        script = (
            f"(umask 077 && mkdir -p {q(_parent(log))} && : >>{q(log)} && chmod 600 {q(log)})"
            f" && cd {q(where)} || exit 1\n"
            f"setsid bash --norc --noprofile -c {q(command)} >{q(log)} 2>&1 </dev/null &\n"
            "echo $!"
        )
        out = await self.check(script, timeout=30)
        try:
            return int(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise HostError(f"on host {self.name}: could not start the process: {out!r}") from None

    async def processes(self) -> list[Proc]:
        return parse_ps(await self.check(PS))

    async def alive(self, pid: int) -> bool:
        """True while the process exists and is not a zombie."""
        res = await self.run(f"ps -o stat= -p {int(pid)}", timeout=15, cwd="/")
        state = res.stdout.strip()
        return bool(state) and not state.startswith("Z")

    async def group_alive(self, pgid: int) -> bool:
        res = await self.run(group_alive_sh(pgid), timeout=15, cwd="/")
        return res.exit_code == 0

    async def signal_group(self, pgid: int, sig: str) -> None:
        await self.run(f"kill -{sig} -- -{int(pgid)} 2>/dev/null; true", timeout=15, cwd="/")

    async def signal(self, pids: list[int], sig: str) -> None:
        if pids:
            ids = " ".join(str(int(p)) for p in pids)
            await self.run(f"kill -{sig} {ids} 2>/dev/null; true", timeout=15, cwd="/")

    async def port_in_use(self, port: int) -> bool:
        text = await self.check("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; true")
        return port in listening_ports(text)

    async def port_holders(self, port: int) -> list[int]:
        """Pids listening on the port, as far as `ss` can see them (root sees all)."""
        res = await self.run(f"ss -Htlnp 'sport = :{int(port)}'", timeout=15, cwd="/")
        return sorted({int(m) for m in re.findall(r"pid=(\d+)", res.stdout)})

    async def realpaths(self, paths: list[str]) -> list[str]:
        """Each path absolute with every symlink followed (relative: from the workdir); the last
        parts need not exist yet. One command for all (one channel over SSH)."""
        words = " ".join(shlex.quote(p) for p in paths)
        out = await self.check(f"realpath -m -z -- {words}", cwd=None)
        return out.split("\0")[: len(paths)]

    async def tail(self, path: str, lines: int) -> str:
        return await self.check(f"tail -n {int(lines)} -- {shlex.quote(path)}", cwd=None)

    async def grep(self, path: str, pattern: str, context: int, max_matches: int) -> str:
        """`grep -n -E` with context lines; exit 1 (no match) is not an error."""
        q = shlex.quote
        cmd = f"grep -n -E -C {int(context)} -m {int(max_matches)} -e {q(pattern)} -- {q(path)}"
        res = await self.run(cmd, timeout=300)
        if res.exit_code not in (0, 1):
            why = res.stderr.strip().splitlines()
            raise HostError(f"grep on {self.name} failed: {why[-1] if why else res.exit_code}")
        return res.stdout

    async def gpu_apps(self) -> list[dict[str, int]] | None:
        """nvidia-smi's compute apps [{pid, used_memory (MiB)}], or None without nvidia-smi."""
        res = await self.run(
            "command -v nvidia-smi >/dev/null || exit 127; nvidia-smi "
            "--query-compute-apps=pid,used_memory --format=csv,noheader,nounits",
            timeout=30,
            cwd="/",
        )
        if res.exit_code != 0:
            return None
        apps = []
        for line in res.stdout.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit():
                mem = int(parts[1]) if parts[1].isdigit() else 0
                apps.append({"pid": int(parts[0]), "used_memory": mem})
        return apps


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"
