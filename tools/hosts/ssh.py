"""A host over SSH (asyncssh): one connection, reused, reconnected with backoff after a drop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

import asyncssh

from tools.hosts.base import (
    CALL_MARK,
    CommandResult,
    Host,
    HostError,
    check_regular,
    group_alive_sh,
    listening_ports,
    marked_sh,
)
from tools.hosts.connect import connect, parse_address
from tools.hosts.output import MAX_CAPTURE, Capture

if TYPE_CHECKING:
    from tools.domain.config import HostConfig

MARK = b"__campaign_pgid="
BASH = "bash --norc --noprofile -c"
# errors on opening a channel: the connection is gone, the command never started (safe to retry)
CHANNEL_ERRORS = (
    asyncssh.ChannelOpenError,
    asyncssh.ConnectionLost,
    BrokenPipeError,
    ConnectionError,
)


class SSHHost(Host):
    def __init__(self, config: HostConfig) -> None:
        super().__init__(config)
        self.target = parse_address(config.address)
        self._conn: asyncssh.SSHClientConnection | None = None
        self._sftp: asyncssh.SFTPClient | None = None
        self._forwards: dict[int, asyncssh.SSHListener] = {}
        self._workdir: str | None = None
        self._lock = asyncio.Lock()
        self.connects = 0  # how many connections were made (1 + reconnects)

    # --- the connection ------------------------------------------------------------------------
    async def connection(self) -> asyncssh.SSHClientConnection:
        async with self._lock:
            if self._conn is None or self._conn.is_closed():
                self._forget()
                self._conn = await connect(self.config, self.target)
                self.connects += 1
            return self._conn

    def _forget(self) -> None:
        if self._conn is not None:
            self._conn.abort()
        self._conn, self._sftp = None, None
        self._forwards.clear()

    async def close(self) -> None:
        conn = self._conn
        self._forget()
        if conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 5)

    # --- commands ------------------------------------------------------------------------------
    async def workdir(self) -> str:
        if self._workdir is None:
            wd = self.config.workdir
            quoted = '"$HOME"/' + shlex.quote(wd[2:]) if wd.startswith("~/") else shlex.quote(wd)
            out = await self.check(f"mkdir -p -- {quoted} && cd -- {quoted} && pwd -P")
            self._workdir = out.strip()
        return self._workdir

    async def run(
        self,
        command: str,
        timeout: float = 120,
        cwd: str | None = None,
        max_capture: int = MAX_CAPTURE,
    ) -> CommandResult:
        where = cwd or await self.workdir()
        script = f"cd {shlex.quote(where)} || exit 1\n{command}"
        # the session shell leads its process group: report its id, then become the command
        # (--norc: the login shell has already read the rc files once)
        token = secrets.token_hex(8)
        wrapped = (
            f"echo {MARK.decode()}$$ >&2; export {CALL_MARK}={token}; "
            f"exec {BASH} {shlex.quote(script)}"
        )
        start = time.monotonic()
        proc = await self._open(wrapped)
        out, err = Capture(max_capture), Capture(max_capture)
        pgid: list[int] = []
        work = asyncio.gather(
            _pump(proc.stdout, out), _pump_marked(proc.stderr, err, pgid), proc.wait()
        )
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(work), timeout)
        except TimeoutError:
            timed_out = True
        except (asyncssh.Error, OSError):
            pass  # judged below: a lost connection has no exit status
        finally:
            if timed_out or (proc.exit_status is None and proc.exit_signal is None):
                await self._kill_remote(pgid, proc)
                work.cancel()
                with contextlib.suppress(BaseException):
                    await work
        if not timed_out and proc.exit_status is None and proc.exit_signal is None:
            self._forget()
            raise HostError(
                f"connection to host {self.name} was lost during the command (it may have run "
                f"in part); the next call reconnects"
            )
        code = proc.returncode
        survivors = await self._marked(token, pgid[0]) if timed_out and pgid else []
        return CommandResult(
            exit_code=None if timed_out else code,
            stdout=out.text(),
            stderr=err.text(),
            duration=time.monotonic() - start,
            timed_out=timed_out,
            dropped=out.dropped + err.dropped,
            survivors=survivors,
        )

    async def _marked(self, token: str, pgid: int) -> list[int]:
        """Pids on the host still carrying this command's mark (see CALL_MARK)."""
        if self._conn is None or self._conn.is_closed():
            return []
        try:
            res = await asyncio.wait_for(self._conn.run(marked_sh(token, pgid)), 15)
        except (asyncssh.Error, OSError, TimeoutError):
            return []
        out = res.stdout if isinstance(res.stdout, str) else ""
        return sorted(int(p) for p in out.split() if p.isdigit())

    async def _open(self, command: str) -> asyncssh.SSHClientProcess[bytes]:
        """A process channel; on a dead connection reconnect once (the command never started)."""
        for attempt in (1, 2):
            conn = await self.connection()
            try:
                proc: asyncssh.SSHClientProcess[bytes] = await conn.create_process(
                    command, encoding=None
                )
                proc.stdin.write_eof()  # nothing to read: a command waiting on stdin ends at once
                return proc
            except CHANNEL_ERRORS as err:
                if not conn.is_closed():  # refused, not dropped: the other channels live on
                    raise HostError(
                        f"host {self.name} refused a new channel: {err} (too many at once? "
                        "see sshd's MaxSessions)"
                    ) from None
                self._forget()
                if attempt == 2:
                    raise HostError(f"host {self.name}: cannot open a channel: {err}") from None
        raise AssertionError("unreachable")

    async def _kill_remote(self, pgid: list[int], proc: asyncssh.SSHClientProcess[bytes]) -> None:
        """Signals over the channel are refused for root logins: kill the group on another one."""
        if pgid and self._conn is not None and not self._conn.is_closed():
            g = pgid[0]
            kill = (
                f"kill -TERM -- -{g} 2>/dev/null; for i in 1 2 3 4 5 6 7 8 9 10; do "
                f"{group_alive_sh(g)} || exit 0; sleep 0.1; done; "
                f"kill -KILL -- -{g} 2>/dev/null; true"
            )
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._conn.run(kill), 15)
        proc.close()

    # --- files and ports -----------------------------------------------------------------------
    async def sftp(self) -> asyncssh.SFTPClient:
        conn = await self.connection()
        if self._sftp is None:
            try:
                self._sftp = await conn.start_sftp_client()
            except (asyncssh.Error, OSError) as err:
                raise HostError(f"host {self.name}: SFTP is not available: {err}") from None
        return self._sftp

    async def _abs(self, path: str) -> str:
        return path if path.startswith("/") else f"{await self.workdir()}/{path}"

    def _sftp_broken(self) -> None:
        self._sftp = None
        if self._conn is not None and self._conn.is_closed():
            self._forget()

    async def read_bytes(self, path: str, offset: int, length: int) -> bytes:
        full = await self._abs(path)
        try:
            async with (await self.sftp()).open(full, "rb") as f:
                data: bytes = await f.read(length, offset)
                return data
        except asyncssh.SFTPError as err:
            raise HostError(f"{full} on {self.name}: {err.reason}") from None
        except (asyncssh.Error, OSError) as err:
            self._sftp_broken()
            raise HostError(f"host {self.name}: reading {full} failed: {err}") from None

    async def _read_proc(self, path: str) -> bytes | None:
        """A /proc file over SFTP (no shell started: polls stay cheap); b"" when it does not
        exist, None when SFTP cannot tell (then the shell fallback is used)."""
        try:
            async with (await self.sftp()).open(path, "rb") as f:
                chunks: list[bytes] = []
                offset = 0
                while True:
                    data: bytes = await f.read(65536, offset)
                    if not data:
                        break
                    chunks.append(data)
                    offset += len(data)
                return b"".join(chunks)
        except asyncssh.SFTPNoSuchFile:
            return b""
        except asyncssh.SFTPError:
            return None
        except (asyncssh.Error, OSError) as err:
            self._sftp_broken()
            raise HostError(f"host {self.name}: reading {path} failed: {err}") from None

    async def alive(self, pid: int) -> bool:
        stat = await self._read_proc(f"/proc/{int(pid)}/stat")
        if stat is None:
            return await super().alive(pid)
        return bool(stat) and stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] != b"Z"

    async def port_in_use(self, port: int) -> bool:
        tcp = await self._read_proc("/proc/net/tcp")
        tcp6 = await self._read_proc("/proc/net/tcp6")
        if tcp is None or tcp6 is None:
            return await super().port_in_use(port)
        return port in listening_ports((tcp + tcp6).decode("ascii", "replace"))

    async def size(self, path: str) -> int:
        full = await self._abs(path)
        try:
            attrs = await (await self.sftp()).stat(full)
        except asyncssh.SFTPError as err:
            raise HostError(f"{full} on {self.name}: {err.reason}") from None
        except (asyncssh.Error, OSError) as err:
            self._sftp_broken()
            raise HostError(f"host {self.name}: stat {full} failed: {err}") from None
        check_regular(path, self.name, attrs.permissions)
        return int(attrs.size or 0)

    async def forward_port(self, remote_port: int) -> int:
        conn = await self.connection()
        listener = self._forwards.get(remote_port)
        if listener is None:
            try:
                listener = await conn.forward_local_port("127.0.0.1", 0, "127.0.0.1", remote_port)
            except (asyncssh.Error, OSError) as err:
                raise HostError(
                    f"host {self.name}: cannot forward port {remote_port}: {err}"
                ) from None
            self._forwards[remote_port] = listener
        return listener.get_port()

    async def put(self, local_path: str, remote_path: str) -> int:
        full = await self._abs(remote_path)
        size = Path(local_path).stat().st_size
        sftp = await self.sftp()
        try:
            await sftp.makedirs(full.rsplit("/", 1)[0] or "/", exist_ok=True)
            await sftp.put(local_path, full)
            written = int((await sftp.stat(full)).size or 0)
        except asyncssh.SFTPError as err:
            raise HostError(f"put {local_path} -> {self.name}:{full}: {err.reason}") from None
        if written != size:
            raise HostError(
                f"put {local_path} -> {self.name}:{full}: wrote {written} of {size} bytes"
            )
        return written

    async def get(self, remote_path: str, local_path: str) -> int:
        full = await self._abs(remote_path)
        sftp = await self.sftp()
        try:
            size = int((await sftp.stat(full)).size or 0)
            Path(local_path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.close(os.open(local_path, os.O_WRONLY | os.O_CREAT, 0o600))  # made 0600 first
            await sftp.get(full, local_path)
            os.chmod(local_path, 0o600)  # a fetched log is the run's: its owner's only
        except asyncssh.SFTPError as err:
            raise HostError(f"get {self.name}:{full}: {err.reason}") from None
        got = Path(local_path).stat().st_size
        if got != size:
            raise HostError(f"get {self.name}:{full}: read {got} of {size} bytes")
        return got


async def _pump(stream: asyncssh.SSHReader[bytes], capture: Capture) -> None:
    while chunk := await stream.read(65536):
        capture.feed(chunk)


async def _pump_marked(
    stream: asyncssh.SSHReader[bytes], capture: Capture, pgid: list[int]
) -> None:
    """stderr, whose first line is the group id the wrapper printed."""
    first = b""
    while b"\n" not in first:
        chunk = await stream.read(65536)
        if not chunk:
            capture.feed(first)
            return
        first += chunk
    line, rest = first.split(b"\n", 1)
    if line.startswith(MARK) and line[len(MARK) :].isdigit():
        pgid.append(int(line[len(MARK) :]))
    else:
        rest = first
    capture.feed(rest)
    await _pump(stream, capture)
