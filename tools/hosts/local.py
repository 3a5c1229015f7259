"""The machine the agent runs on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import time
from pathlib import Path
from typing import BinaryIO

from tools.hosts.base import (
    CALL_MARK,
    CommandResult,
    Host,
    HostError,
    check_regular,
    listening_ports,
)
from tools.hosts.output import MAX_CAPTURE, Capture

KILL_GRACE_S = 1.0  # SIGTERM, then this long, then SIGKILL


class LocalHost(Host):
    is_local = True

    async def workdir(self) -> str:
        path = self._base()
        os.makedirs(path, exist_ok=True)
        return path

    def _base(self) -> str:
        # the default workdir ("~/campaign") is for remote boxes; locally: the agent's own folder
        if "workdir" not in self.config.model_fields_set:
            return os.getcwd()
        return str(Path(self.config.workdir).expanduser().resolve())

    async def run(
        self,
        command: str,
        timeout: float = 120,
        cwd: str | None = None,
        max_capture: int = MAX_CAPTURE,
    ) -> CommandResult:
        start = time.monotonic()
        token = secrets.token_hex(8)
        try:
            proc = await asyncio.create_subprocess_exec(
                "bash",
                "--norc",
                "--noprofile",
                "-c",
                command,
                cwd=cwd or await self.workdir(),
                env={**os.environ, CALL_MARK: token},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise HostError(f"cannot run a command on {self.name}: {exc}") from None
        out, err = Capture(max_capture), Capture(max_capture)
        assert proc.stdout is not None and proc.stderr is not None
        pumps = asyncio.gather(_pump(proc.stdout, out), _pump(proc.stderr, err))
        timed_out = False
        try:
            # the output ends when every holder of the pipes is gone, not when the shell exits
            await asyncio.wait_for(asyncio.shield(pumps), timeout)
            await asyncio.wait_for(proc.wait(), max(0.1, timeout - (time.monotonic() - start)))
        except TimeoutError:
            timed_out = True
        finally:
            if timed_out or proc.returncode is None:  # timeout or cancellation: nothing survives
                await kill_group(proc.pid)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 5)
                pumps.cancel()
                with contextlib.suppress(BaseException):
                    await pumps
        survivors = await asyncio.to_thread(_marked, token, proc.pid) if timed_out else []
        return CommandResult(
            exit_code=None if timed_out else proc.returncode,
            stdout=out.text(),
            stderr=err.text(),
            duration=time.monotonic() - start,
            timed_out=timed_out,
            dropped=out.dropped + err.dropped,
            survivors=survivors,
        )

    async def alive(self, pid: int) -> bool:
        try:
            with open(f"/proc/{int(pid)}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            return False
        return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] != b"Z"

    async def group_alive(self, pgid: int) -> bool:
        return await asyncio.to_thread(group_running, pgid)

    async def signal_group(self, pgid: int, sig: str) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, getattr(signal, "SIG" + sig.removeprefix("SIG")))

    async def signal(self, pids: list[int], sig: str) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, getattr(signal, "SIG" + sig.removeprefix("SIG")))

    async def port_in_use(self, port: int) -> bool:
        text = ""
        for name in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(OSError):
                text += Path(name).read_text()
        return port in listening_ports(text)

    async def read_bytes(self, path: str, offset: int, length: int) -> bytes:
        return await asyncio.to_thread(_read_range, self._abs(path), offset, length)

    async def size(self, path: str) -> int:
        try:
            st = os.stat(self._abs(path))
        except OSError as err:
            raise HostError(f"{path} on {self.name}: {err.strerror}") from None
        check_regular(path, self.name, st.st_mode)
        return st.st_size

    async def tail(self, path: str, lines: int) -> str:
        return await asyncio.to_thread(_tail, self._abs(path), lines)

    async def realpaths(self, paths: list[str]) -> list[str]:
        return [os.path.realpath(self._abs(os.path.expanduser(p))) for p in paths]

    async def forward_port(self, remote_port: int) -> int:
        return remote_port

    async def put(self, local_path: str, remote_path: str) -> int:
        return await asyncio.to_thread(_copy, local_path, self._abs(remote_path))

    async def get(self, remote_path: str, local_path: str) -> int:
        return await asyncio.to_thread(_copy, self._abs(remote_path), local_path)

    def _abs(self, path: str) -> str:
        return path if os.path.isabs(path) else os.path.join(self._base(), path)


async def _pump(stream: asyncio.StreamReader, capture: Capture) -> None:
    while chunk := await stream.read(65536):
        capture.feed(chunk)


async def kill_group(pgid: int) -> None:
    """SIGTERM the group, give it a moment, SIGKILL whatever is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            return
        if sig == signal.SIGTERM:
            deadline = time.monotonic() + KILL_GRACE_S
            while time.monotonic() < deadline and group_running(pgid):
                await asyncio.sleep(0.05)


def _marked(token: str, pgid: int) -> list[int]:
    """Live processes whose environment holds CALL_MARK=token (this user's: others' environ
    cannot be read, and the command could not have started them), but for the members of
    group `pgid`: killed, maybe not gone yet."""
    return holding(CALL_MARK, token, pgid)


def holding(variable: str, value: str, but_group: int = 0) -> list[int]:
    """Live processes of this user whose environment has `variable=value` exactly (a mark their
    starter set, inherited by all they start), but for the members of group `but_group`."""
    mark = f"{variable}={value}".encode()
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                environ = Path(entry.path, "environ").read_bytes()
                stat = Path(entry.path, "stat").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rindex(b")") + 2 :].split()
            if fields[0] == b"Z":  # a zombie's environ reads empty: it is gone for our purposes
                continue
            if mark in environ.split(b"\0") and int(fields[2]) != but_group:
                pids.append(int(entry.name))
    return sorted(pids)


def group_running(pgid: int) -> bool:
    """Whether process group `pgid` has a live member on this machine (zombies do not count)."""
    try:
        os.killpg(pgid, 0)
    except OSError:
        return False
    # a group made only of zombies is dead for our purposes
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rindex(b")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != b"Z":
                return True
    return False


def _read_range(path: str, offset: int, length: int) -> bytes:
    try:
        with _open_regular(path) as f:
            f.seek(offset)
            return f.read(length)
    except OSError as err:
        raise HostError(f"{path}: {err.strerror}") from None


def _open_regular(path: str) -> BinaryIO:
    """Open for reading without blocking (a FIFO's open waits for a writer, in a thread nothing
    can cancel - `agent stop` could not end it), and only a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        check_regular(path, "this machine", os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


TAIL_MAX_BYTES = 8 * 1024 * 1024  # a log of \r-only progress bars has no lines to stop at


def _tail(path: str, lines: int) -> str:
    """The last `lines` lines, reading blocks backwards from the end (multi-GB logs are fine),
    at most TAIL_MAX_BYTES of them: a 100 MB log without a newline once took a minute and 500 MB
    (each block was prepended to the whole, and all of it counted again)."""
    try:
        with _open_regular(path) as f:
            f.seek(0, os.SEEK_END)
            pos = f.tell()
            blocks: list[bytes] = []
            newlines = read = 0
            while pos > 0 and newlines <= lines and read < TAIL_MAX_BYTES:
                step = min(65536, pos)
                pos -= step
                f.seek(pos)
                blocks.append(f.read(step))
                newlines += blocks[-1].count(b"\n")
                read += step
            data = b"".join(reversed(blocks))
    except OSError as err:
        raise HostError(f"{path}: {err.strerror}") from None
    body = data[:-1] if data.endswith(b"\n") else data
    kept = body.split(b"\n")[-lines:] if lines > 0 else []
    return b"\n".join(kept).decode("utf-8", errors="replace") + ("\n" if kept else "")


def _copy(src: str, dst: str) -> int:
    try:
        Path(dst).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        size = os.stat(src).st_size
        with (
            open(src, "rb") as fin,
            open(dst, "wb", opener=lambda p, flags: os.open(p, flags, 0o600)) as fout,
        ):
            os.fchmod(fout.fileno(), 0o600)  # a file there before keeps its mode otherwise
            shutil.copyfileobj(fin, fout)
        written = os.stat(dst).st_size
    except OSError as err:
        raise HostError(f"copy {src} -> {dst}: {err.strerror or err}") from None
    if written != size:
        raise HostError(f"copy {src} -> {dst}: wrote {written} of {size} bytes")
    return written
