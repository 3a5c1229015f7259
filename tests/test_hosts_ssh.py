"""What only an SSH host has: host keys, login failures, reconnects, the pool."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import asyncssh
import pytest

from tools.domain.config import Config, HostConfig, ServerConfig
from tools.hosts import HostError, HostPool, LocalHost, SSHHost
from tools.hosts import connect as connect_module

if TYPE_CHECKING:
    from tests.ssh_fixtures import AsyncSSHServer, Proxy, SSHServerBase

pytest_plugins = ["tests.ssh_fixtures"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_unknown_host_key_is_refused_with_the_fix(
    asyncssh_server: AsyncSSHServer, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    for known in (empty, tmp_path / "missing"):
        host = SSHHost(asyncssh_server.host_config("box", known_hosts=str(known)))
        with pytest.raises(HostError) as err:
            await host.run("echo should-not-run")
        msg = str(err.value)
        assert "unknown" in msg and "ssh-keyscan" in msg and "accept-new" in msg, msg
        assert "\n" not in msg


async def test_changed_host_key_is_refused(asyncssh_server: AsyncSSHServer, tmp_path: Path) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{asyncssh_server.port} {other}\n")
    host = SSHHost(asyncssh_server.host_config("box", known_hosts=str(known)))
    with pytest.raises(HostError, match=r"CHANGED.*ssh-keygen -R"):
        await host.run("true")


async def test_accept_new_records_a_first_seen_key_only(
    asyncssh_server: AsyncSSHServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    host = SSHHost(asyncssh_server.host_config("box", known_hosts="accept-new"))
    assert (await host.run("echo ok")).stdout == "ok\n"
    await host.close()
    recorded = (tmp_path / ".ssh/known_hosts").read_text()
    assert recorded == asyncssh_server.known_hosts_line()
    # the recorded key is now trusted; a different key for the same host is still refused
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    (tmp_path / ".ssh/known_hosts").write_text(f"[127.0.0.1]:{asyncssh_server.port} {other}\n")
    with pytest.raises(HostError, match="CHANGED"):
        await SSHHost(asyncssh_server.host_config("box", known_hosts="accept-new")).run("true")


async def test_wrong_key_is_a_clear_login_refusal(
    asyncssh_server: AsyncSSHServer, tmp_path: Path
) -> None:
    key = tmp_path / "stranger"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(key))
    host = SSHHost(asyncssh_server.host_config("box", identity_file=str(key)))
    with pytest.raises(HostError, match=r"refused the login.*identity_file"):
        await host.run("true")
    missing = SSHHost(asyncssh_server.host_config("box", identity_file=str(tmp_path / "nope")))
    with pytest.raises(HostError, match=r"identity_file .* not found"):
        await missing.run("true")


async def test_unreachable_host_fails_after_bounded_retries(
    asyncssh_server: AsyncSSHServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connect_module, "CONNECT_ATTEMPTS", 2)
    host = SSHHost(asyncssh_server.host_config("box", port=free_port()))
    with pytest.raises(HostError, match=r"cannot connect to host box .* after 2 tries"):
        await host.run("true")


@pytest.mark.parametrize("server_name", ["asyncssh_server", "sshd_server"])
async def test_connection_cut_mid_command_then_the_next_call_reconnects(
    server_name: str,
    request: pytest.FixtureRequest,
    ssh_proxy: Callable[[SSHServerBase], Proxy],
    tmp_path: Path,
) -> None:
    server: SSHServerBase = request.getfixturevalue(server_name)
    proxy = ssh_proxy(server)
    host = SSHHost(server.host_config("cut", port=proxy.port, workdir=str(tmp_path)))
    try:
        assert (await host.run("echo before")).stdout == "before\n"
        # cut while the command runs: once it has said so (a fixed 0.5 s sleep could cut
        # before its channel opened on a loaded machine, or after a short command ended)
        started = tmp_path / "started"
        running = asyncio.create_task(
            host.run(f"touch {started}; sleep 60; echo finished", timeout=120)
        )
        deadline = time.monotonic() + 60
        while not started.exists():
            assert time.monotonic() < deadline and not running.done(), "the command never ran"
            await asyncio.sleep(0.02)
        proxy.cut()
        with pytest.raises(HostError, match="lost during the command"):
            await asyncio.wait_for(running, 60)
        res = await host.run("echo after")
        assert (res.exit_code, res.stdout) == (0, "after\n")
        assert host.connects == 2 and proxy.accepted == 2
        # a drop between two calls is invisible: the next call reconnects by itself
        proxy.cut()
        assert (await host.run("echo again")).stdout == "again\n"
        assert host.connects == 3
    finally:
        await host.close()


async def test_one_connection_is_reused(asyncssh_server: AsyncSSHServer, tmp_path: Path) -> None:
    host = SSHHost(asyncssh_server.host_config("box", workdir=str(tmp_path)))
    results = await asyncio.gather(*(host.run(f"echo {i}") for i in range(10)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(10)]
    assert host.connects == 1
    await host.close()


def test_pool_gives_one_host_per_name_and_names_the_unknown(
    asyncssh_server: AsyncSSHServer,
) -> None:
    config = Config(
        hosts=[HostConfig(name="here"), asyncssh_server.host_config("gpu")],
        server=ServerConfig(command="true", host="gpu"),
    )
    pool = HostPool(config)
    assert isinstance(pool.get(), SSHHost) and pool.get() is pool.get("gpu")
    assert isinstance(pool.get("here"), LocalHost)
    with pytest.raises(HostError, match="unknown host 'nope'; configured hosts: here, gpu"):
        pool.get("nope")


def test_bad_address_is_one_line() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"use \"local\" or ssh://"):
        HostConfig(name="x", address="gpu-box:22")
    for address in ("ssh://gpu-box:notaport", "ssh://gpu-box:70000", "ssh://u@gpu-box:0"):
        with pytest.raises(ValidationError, match="the port is not a number from 1 to 65535"):
            HostConfig(name="x", address=address)
    for address in ("ssh://gpu-alias", "ssh://u@[::1]:2222", "ssh://gpu-box:22"):
        HostConfig(name="x", address=address)  # an alias, IPv6 and a plain port are fine


async def test_ssh_config_alias_is_honoured(
    asyncssh_server: AsyncSSHServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh/config").write_text(
        f"Host gpu-alias\n  HostName 127.0.0.1\n  Port {asyncssh_server.port}\n"
        f"  User {asyncssh_server.user}\n  IdentityFile {asyncssh_server.client_key}\n"
    )
    cfg = HostConfig(
        name="gpu",
        address="ssh://gpu-alias",
        known_hosts=str(asyncssh_server.known_hosts),
        workdir=str(tmp_path / "w"),
    )
    host = SSHHost(cfg)
    assert (await host.run("echo via-alias")).stdout == "via-alias\n"
    await host.close()
