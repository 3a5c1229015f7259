"""The Host interface: one suite against the local host, asyncssh's server and OpenSSH's sshd."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tools.domain.config import HostConfig
from tools.hosts import Host, LocalHost, SSHHost

pytest_plugins = ["tests.ssh_fixtures"]


@pytest.fixture(params=["local", "asyncssh", "sshd"])
async def host(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Host]:
    work = str(tmp_path / "work")
    h: Host
    if request.param == "local":
        h = LocalHost(HostConfig(name="local", workdir=work))
    else:
        server = request.getfixturevalue(f"{request.param}_server")
        h = SSHHost(server.host_config("box", workdir=work))
    yield h
    await h.close()


async def eventually_dead(host: Host, pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not await host.alive(pid):
            return True
        await asyncio.sleep(0.1)
    return False


async def test_run_reports_exit_code_streams_and_duration(host: Host) -> None:
    res = await host.run("echo out; echo err >&2; sleep 0.2; exit 3")
    assert (res.exit_code, res.stdout, res.stderr, res.timed_out) == (3, "out\n", "err\n", False)
    assert 0.2 <= res.duration < 60  # the sleep is measured (the bound only catches nonsense)


async def test_run_starts_in_the_workdir_and_creates_it(host: Host, tmp_path: Path) -> None:
    res = await host.run("pwd -P")
    assert res.stdout.strip() == str((tmp_path / "work").resolve())


async def test_timeout_kills_everything_the_command_started(host: Host) -> None:
    # durations unique to this test run: an unrelated `sleep 60` on the machine is not ours
    sleeps = [f"sleep {60 + i}.{secrets.randbelow(10**9):09d}" for i in range(3)]
    cmd = (
        f"{sleeps[0]} & echo $! > bg.pid; nohup {sleeps[1]} >/dev/null 2>&1 & echo $! > nohup.pid; "
        f"echo before; {sleeps[2]}"
    )
    res = await host.run(cmd, timeout=1)
    assert res.timed_out and res.exit_code is None
    assert res.stdout == "before\n"  # what it printed before the timeout is kept
    assert res.duration < 60  # ended by the timeout: waiting for the sleeps takes 60 s or more
    for name in ("bg.pid", "nohup.pid"):
        pid = int((await host.run(f"cat {name}")).stdout)
        assert await eventually_dead(host, pid), f"{name}: pid {pid} survived the timeout"
    procs = await host.processes()
    assert not [p for p in procs if p.args in sleeps]
    assert res.survivors == []  # nothing it started is left to name


async def test_timeout_names_what_setsid_moved_out_of_the_group(host: Host) -> None:
    """A setsid child is beyond the group kill (detaching is how a command keeps a server): the
    result names it rather than claim that everything was killed."""
    tag = f"{secrets.randbelow(10**9):09d}"
    res = await host.run(
        f"setsid sleep 63.{tag} >/dev/null 2>&1 & echo $! > s.pid; sleep 64.{tag}", timeout=1
    )
    pid = int((await host.run("cat s.pid")).stdout)
    try:
        assert res.timed_out and res.survivors == [pid]
        assert await host.alive(pid)
    finally:
        await host.signal([pid], "KILL")


async def test_detached_process_outlives_the_call_in_its_own_group(host: Host) -> None:
    log = f"{await host.workdir()}/logs/d.log"
    pid = await host.start_detached("echo up; exec sleep 60", log)
    try:
        deadline = time.monotonic() + 60  # a started process says so when it is scheduled
        while b"up" not in await host.read_bytes(log, 0, 100) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert await host.alive(pid)
        mine = [p for p in await host.processes() if p.pid == pid]
        assert mine and mine[0].pgid == pid  # its own group: the pid is the pgid
        assert await host.read_bytes(log, 0, 100) == b"up\n"
    finally:
        await host.signal_group(pid, "KILL")
    assert await eventually_dead(host, pid)


async def test_tail_range_grep_size_of_a_file(host: Host) -> None:
    await host.run("seq 1 200000 > big.log")
    assert await host.tail("big.log", 3) == "199998\n199999\n200000\n"
    assert await host.size("big.log") == len("".join(f"{i}\n" for i in range(1, 200001)))
    assert await host.read_bytes("big.log", 2, 6) == b"2\n3\n4\n"
    found = await host.grep("big.log", "^1234[05]$", context=1, max_matches=10)
    assert found.splitlines()[:3] == ["12339-12339", "12340:12340", "12341-12341"]
    assert "12345:12345" in found
    assert await host.grep("big.log", "nomatch", context=0, max_matches=5) == ""


async def test_port_in_use_and_its_holder(host: Host) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert await host.port_in_use(port)
        assert os.getpid() in await host.port_holders(port)
    assert not await host.port_in_use(port)


async def test_forward_port_reaches_a_server_on_the_host(host: Host) -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"pong:" + await reader.readline())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        local = await host.forward_port(port)
        assert (local == port) == host.is_local
        reader, writer = await asyncio.open_connection("127.0.0.1", local)
        writer.write(b"ping\n")
        assert await asyncio.wait_for(reader.read(), 5) == b"pong:ping\n"
        writer.close()
    finally:
        server.close()


async def test_put_and_get_round_trip_with_sizes(host: Host, tmp_path: Path) -> None:
    src = tmp_path / "script.py"
    src.write_bytes(os.urandom(300_000))
    assert await host.put(str(src), "sub/dir/script.py") == 300_000
    assert (tmp_path / "work/sub/dir/script.py").read_bytes() == src.read_bytes()
    back = tmp_path / "back/script.py"
    assert await host.get("sub/dir/script.py", str(back)) == 300_000
    assert back.read_bytes() == src.read_bytes()


async def test_huge_output_is_capped_head_and_tail(host: Host) -> None:
    res = await host.run(
        "echo first; head -c 3000000 /dev/zero | tr '\\0' a; echo; echo last", max_capture=100_000
    )
    assert res.exit_code == 0 and res.dropped > 2_800_000
    assert res.stdout.startswith("first\n") and res.stdout.endswith("last\n")
    assert "bytes dropped" in res.stdout and len(res.stdout) < 120_000
