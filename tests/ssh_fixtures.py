"""Real SSH servers on loopback for tests: asyncssh's server in-process and OpenSSH's sshd.

Use them from a conftest.py or a test module:

    from ssh_fixtures import asyncssh_server, sshd_server, ssh_proxy  # noqa: F401

    def test_x(asyncssh_server):
        cfg = asyncssh_server.host_config("box")      # an tools.domain.config.HostConfig
        ...

Both servers are session-scoped and run outside the test's event loop (the asyncssh one in a
thread with its own loop, sshd as a process), so sync and async tests of any loop scope can use
them. `sshd_server` skips when /usr/sbin/sshd is missing (CI installs openssh-server).
`ssh_proxy(server)` puts a TCP proxy in front of a server whose `cut()` drops every connection,
as a network failure would.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from tools.base import ToolContext
from tools.domain.config import HostConfig

SSHD = Path("/usr/sbin/sshd")


class LoopThread:
    """An event loop in a daemon thread, for servers that must outlive any test's loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, awaitable: Awaitable[Any], timeout: float = 30) -> Any:
        async def wrap() -> Any:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(wrap(), self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class SSHServerBase:
    """What a test needs to reach a server: address, client key, known_hosts."""

    host = "127.0.0.1"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.user = getpass.getuser()
        self.port = 0
        self.client_key = root / "id_client"
        self.known_hosts = root / "known_hosts"
        self.host_public_key = ""  # "ssh-ed25519 AAAA..."

    @property
    def address(self) -> str:
        return f"ssh://{self.user}@{self.host}:{self.port}"

    def known_hosts_line(self, port: int | None = None) -> str:
        return f"[{self.host}]:{port or self.port} {self.host_public_key}\n"

    def host_config(self, name: str = "box", port: int | None = None, **fields: Any) -> HostConfig:
        """A HostConfig for this server (or for a proxy in front of it, given its port)."""
        known = self.known_hosts
        if port is not None:
            known = self.root / f"known_hosts_{port}"
            known.write_text(self.known_hosts_line(port))
        values: dict[str, Any] = {
            "name": name,
            "address": f"ssh://{self.user}@{self.host}:{port or self.port}",
            "identity_file": str(self.client_key),
            "known_hosts": str(known),
            "workdir": str(self.root / "work" / name),
            "keepalive_s": 5.0,
            "connect_timeout_s": 5.0,
        }
        values.update(fields)
        return HostConfig(**values)


# --- asyncssh's server, in-process --------------------------------------------------------------
class _Server(asyncssh.SSHServer):
    def connection_requested(
        self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
    ) -> bool:
        return True  # allow local port forwarding, as sshd's AllowTcpForwarding yes


async def _handle(process: asyncssh.SSHServerProcess[bytes]) -> None:
    """Run the command as sshd would: `bash -c` in a new session (the shell leads its group)."""
    command = process.command or "exec bash"
    local = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert local.stdout and local.stderr
    stdin = local.stdin
    assert stdin is not None

    async def feed() -> None:
        with contextlib.suppress(Exception):
            while data := await process.stdin.read(65536):
                stdin.write(data)
                await stdin.drain()
        stdin.close()

    async def pump(src: asyncio.StreamReader, dst: asyncssh.SSHWriter[bytes]) -> None:
        with contextlib.suppress(Exception):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()

    feeder = asyncio.create_task(feed())
    await asyncio.gather(pump(local.stdout, process.stdout), pump(local.stderr, process.stderr))
    code = await local.wait()
    feeder.cancel()
    process.exit(code if code >= 0 else 128 - code)


class AsyncSSHServer(SSHServerBase):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.loop = LoopThread()
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key.write_private_key(str(self.client_key))
        self.host_public_key = host_key.export_public_key().decode().strip()
        authorized = asyncssh.import_authorized_keys(client_key.export_public_key().decode())
        self.server = self.loop.call(
            asyncssh.create_server(
                _Server,
                self.host,
                0,
                server_host_keys=[host_key],
                authorized_client_keys=authorized,
                process_factory=_handle,
                encoding=None,
                sftp_factory=True,
                allow_scp=True,
            )
        )
        self.port = self.server.sockets[0].getsockname()[1]
        self.known_hosts.write_text(self.known_hosts_line())

    def close(self) -> None:
        self.server.close()
        with contextlib.suppress(Exception):
            self.loop.call(self.server.wait_closed(), timeout=5)
        self.loop.stop()


# --- OpenSSH's sshd on a high port ----------------------------------------------------------------
class OpenSSHServer(SSHServerBase):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        host_key = root / "ssh_host_ed25519_key"
        for key in (host_key, self.client_key):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True
            )
        self.host_public_key = " ".join(Path(f"{host_key}.pub").read_text().split()[:2])
        authorized = root / "authorized_keys"
        authorized.write_text(Path(f"{self.client_key}.pub").read_text())
        os.chmod(authorized, 0o600)
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege-separation dir
        self.log = root / "sshd.log"
        for _ in range(5):  # a free port can be taken between the probe and sshd's bind
            self.port = free_port()
            config = root / "sshd_config"
            config.write_text(
                f"ListenAddress {self.host}\nPort {self.port}\nHostKey {host_key}\n"
                f"PidFile {root / 'sshd.pid'}\nAuthorizedKeysFile {authorized}\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                "PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n"
                "AllowTcpForwarding yes\nSubsystem sftp internal-sftp\nLogLevel ERROR\n"
                "MaxSessions 100\nMaxStartups 100\n"
            )
            self.proc = subprocess.Popen(
                [str(SSHD), "-D", "-e", "-f", str(config)],
                stdout=self.log.open("ab"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            if _wait_listening(self.host, self.port, self.proc):
                break
        else:
            raise RuntimeError(f"sshd did not start: {self.log.read_text()[-500:]}")
        self.known_hosts.write_text(self.known_hosts_line())

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


# --- a proxy that can cut every connection -----------------------------------------------------
class Proxy:
    """127.0.0.1:port -> target; `cut()` aborts every open connection (a network failure)."""

    def __init__(self, loop: LoopThread, target_port: int) -> None:
        self.loop = loop
        self.target_port = target_port
        self.links: set[asyncio.StreamWriter] = set()
        self.accepted = 0
        self.server = loop.call(asyncio.start_server(self._link, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self.links |= {writer, up_w}

        async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(copy(reader, up_w), copy(up_r, writer))
        self.links -= {writer, up_w}

    def cut(self) -> None:
        async def abort() -> None:
            for w in list(self.links):
                w.transport.abort()
            self.links.clear()

        self.loop.call(abort())

    def close(self) -> None:
        self.cut()
        self.server.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(host: str, port: int, proc: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="session")
def asyncssh_server() -> Iterator[AsyncSSHServer]:
    with tempfile.TemporaryDirectory(prefix="ssh-asyncssh-") as tmp:
        server = AsyncSSHServer(Path(tmp))
        yield server
        server.close()


@pytest.fixture(scope="session")
def sshd_server() -> Iterator[OpenSSHServer]:
    if not SSHD.exists():
        pytest.skip(
            "OpenSSH sshd is not installed (/usr/sbin/sshd); apt-get install openssh-server"
        )
    with tempfile.TemporaryDirectory(prefix="ssh-openssh-") as tmp:
        server = OpenSSHServer(Path(tmp))
        yield server
        server.close()


@pytest.fixture
def ssh_proxy() -> Iterator[Callable[[SSHServerBase], Proxy]]:
    loop = LoopThread()
    proxies: list[Proxy] = []

    def make(server: SSHServerBase) -> Proxy:
        proxies.append(Proxy(loop, server.port))
        return proxies[-1]

    yield make
    for p in proxies:
        p.close()
    loop.stop()


def make_context(
    runs_dir: Path, host: HostConfig, extra_hosts: list[HostConfig] | None = None, **server: Any
) -> ToolContext:
    """A ToolContext for a fresh run whose server lives on `host`; close with `close_context`."""
    from state.run import Run
    from tools.domain.config import Config, ServerConfig
    from tools.hosts import HostPool

    server.setdefault("command", "true")
    config = Config(
        hosts=[host, *(extra_hosts or [])], server=ServerConfig(host=host.name, **server)
    )
    run = Run.create(runs_dir)
    return ToolContext(run=run, config=config, hosts=HostPool(config))


async def close_context(ctx: ToolContext) -> None:
    await ctx.hosts.close()
    ctx.run.close()


@pytest.fixture(params=["local", "asyncssh", "sshd"])
def any_host(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HostConfig]:
    """The config of a host of each kind: local, asyncssh's server, OpenSSH's sshd."""
    work = str(tmp_path / "work")
    if request.param == "local":
        yield HostConfig(name="local", workdir=work)
    else:
        server = request.getfixturevalue(f"{request.param}_server")
        yield server.host_config("box", workdir=work)


@pytest.fixture
async def host_ctx(any_host: HostConfig, tmp_path: Path) -> AsyncIterator[ToolContext]:
    """A ToolContext of a fresh run whose server host is `any_host` (local, asyncssh, sshd)."""
    ctx = make_context(tmp_path / "runs", any_host)
    yield ctx
    await close_context(ctx)
