"""start_server / kill_server with the simulator as a real server process, on the local host and
over SSH (asyncssh's server and OpenSSH's sshd)."""

from __future__ import annotations

import asyncio
import json
import shlex
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from state.events import read_events
from tools.base import ToolBox, ToolContext
from tools.domain.config import HostConfig
from tools.hosts import Host
from tools.kill_server import KillServer
from tools.read_log import ReadLog
from tools.start_server import StartServer

pytest_plugins = ["tests.ssh_fixtures"]
BOX = ToolBox([StartServer(), KillServer(), ReadLog()])
BASE = ["--model-path", "m", "--tp", "8", "--load-seconds", "0.4", "--time-scale", "50"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sim_command(gpu_dir: Path, all_reduce_off: bool = True) -> str:
    flags = (
        [*BASE, "--disable-custom-all-reduce"]
        if all_reduce_off
        else [*BASE, "--hang-seconds", "0.3"]
    )
    return shlex.join([f"SIM_GPU_DIR={gpu_dir}", sys.executable, "-m", "sim", *flags])


async def make_sim_ctx(tmp_path: Path, host: HostConfig, **server: Any) -> ToolContext:
    from tests.ssh_fixtures import make_context

    (tmp_path / "gpus").mkdir(exist_ok=True)
    server.setdefault("command", sim_command(tmp_path / "gpus"))
    fields = {"engine": "sim", "port": free_port(), "ready_timeout_s": 30, "kill_timeout_s": 5}
    return make_context(tmp_path / "runs", host, **{**fields, **server})


@pytest.fixture
async def sim_ctx(any_host: HostConfig, tmp_path: Path) -> AsyncIterator[ToolContext]:
    from tests.ssh_fixtures import close_context

    ctx = await make_sim_ctx(tmp_path, any_host)
    yield ctx
    await BOX.call(ctx, "kill_server", {})
    await close_context(ctx)


@pytest.fixture
async def local_ctx(tmp_path: Path) -> AsyncIterator[ToolContext]:
    from tests.ssh_fixtures import close_context

    ctx = await make_sim_ctx(tmp_path, HostConfig(name="local", workdir=str(tmp_path / "work")))
    yield ctx
    await BOX.call(ctx, "kill_server", {})
    await close_context(ctx)


async def call(ctx: ToolContext, tool: str, **inp: object) -> tuple[str, bool, dict[str, Any]]:
    result, _ = await BOX.call(ctx, tool, inp)
    return result.text, result.is_error, result.data


def events(ctx: ToolContext, *types: str) -> list[dict[str, Any]]:
    return [e for e in read_events(ctx.run.events_path).events if e["type"] in types]


async def gpu_rows(ctx: ToolContext, host: Host) -> list[dict[str, Any]]:
    gpu_dir = shlex.split(ctx.config.server.command)[0].split("=", 1)[1]
    res = await host.run(f"SIM_GPU_DIR={gpu_dir} {sys.executable} -m sim gpus --json", cwd="/")
    rows: list[dict[str, Any]] = json.loads(res.stdout)
    return rows


async def test_start_ready_then_kill_everything(sim_ctx: ToolContext) -> None:
    seen: list[float] = []
    sim_ctx.progress = lambda kind, **info: seen.append(info["fraction"])
    text, is_error, data = await call(sim_ctx, "start_server", flags={"--cuda-graph-max-bs": 64})
    assert not is_error, text
    assert "ready on" in text and "--cuda-graph-max-bs 64" in text and data["model"] == "m"
    assert seen and seen == sorted(seen) and seen[-1] == 1.0  # load progress, in order
    started, ready = events(sim_ctx, "server_started", "server_ready")
    assert started["pid"] == started["pgid"] == data["pid"] and started["engine"] == "sim"
    assert started["command"].endswith(f"--port {data['port']}")
    names = sorted(w["args"].split()[0] for w in ready["workers"])
    assert names == ["sglang::detokenizer", "sglang::scheduler"]
    host = sim_ctx.hosts.get()
    assert await gpu_rows(sim_ctx, host)  # the scheduler holds (simulated) GPU memory

    text, is_error, data = await call(sim_ctx, "kill_server", name="server")
    assert not is_error, text
    (report,) = data["servers"]
    assert report["verified"] == {"pid_gone": True, "port_free": True, "gpu_released": True}
    assert {k["pid"] for k in report["killed"]} == {started["pid"]} | {
        w["pid"] for w in ready["workers"]
    }
    assert not await host.port_in_use(started["port"])
    assert await gpu_rows(sim_ctx, host) == []
    assert sim_ctx.run.state.servers == {}


@pytest.mark.parametrize("any_host", ["local", "sshd"], indirect=True)
async def test_zombie_workers_outlive_sigterm_of_main_and_kill_server_gets_them(
    sim_ctx: ToolContext,
) -> None:
    _, is_error, data = await call(sim_ctx, "start_server")
    assert not is_error
    host = sim_ctx.hosts.get()
    pid, port = data["pid"], data["port"]
    await host.signal([pid], "TERM")  # the main process alone, as a crash or a careless kill
    deadline = time.monotonic() + 60  # a bounded wait for the outcome, not a 5 s race
    while await host.alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert not await host.alive(pid)
    workers = [p for p in await host.processes() if p.pgid == pid]
    assert len(workers) == 2 and all(p.args.startswith("sglang::") for p in workers)
    assert await host.port_in_use(port)  # the zombies keep the port...
    assert {r["pid"] for r in await gpu_rows(sim_ctx, host)} <= {p.pid for p in workers}
    assert await gpu_rows(sim_ctx, host)  # ...and the GPU memory

    text, is_error, out = await call(sim_ctx, "kill_server")
    assert not is_error, text
    (report,) = out["servers"]
    assert report["verified"] == {"pid_gone": True, "port_free": True, "gpu_released": True}
    assert {k["pid"] for k in report["killed"]} == {p.pid for p in workers}
    assert not await host.port_in_use(port) and await gpu_rows(sim_ctx, host) == []


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"--mem-fraction-static": 0.99}, "out of GPU memory while capturing CUDA graphs"),
        ({"--tp": 4}, "out of GPU memory at startup"),
        ({"--mem-fraction-static": 0.6}, "no GPU memory left for the KV cache"),
        ({"--tp": 16}, "ValueError: tp_size (16) is larger than the number of GPUs"),
        (None, "custom all-reduce failed"),
    ],
    ids=["oom-graphs", "oom-weights", "no-kv", "bad-tp", "custom-all-reduce"],
)
async def test_startup_failures_are_diagnosed_and_cleaned_up(
    tmp_path: Path, flags: dict[str, Any] | None, expected: str
) -> None:
    from tests.ssh_fixtures import close_context

    host = HostConfig(name="local", workdir=str(tmp_path / "work"))
    server = {} if flags is not None else {"command": sim_command(tmp_path / "gpus", False)}
    ctx = await make_sim_ctx(tmp_path, host, **server)
    try:
        text, is_error, data = await call(ctx, "start_server", flags=flags or {})
        assert is_error and expected in data["diagnosis"], text
        assert "\n" not in data["diagnosis"]
        (failed,) = events(ctx, "server_failed")
        assert failed["diagnosis"] == data["diagnosis"] and failed["log_excerpt"]
        assert "pid gone: yes, port free: yes, gpu released: yes" in failed["cleanup"]
        started = events(ctx, "server_started")[0]
        assert not [p for p in await ctx.hosts.get().processes() if p.pgid == started["pid"]]
        # the log of a failed server can still be read by name
        text, is_error, _ = await call(ctx, "read_log", server="server", lines=5)
        assert not is_error and "server-server" in text
    finally:
        await close_context(ctx)


async def test_a_command_line_the_engine_refuses_is_never_launched(local_ctx: ToolContext) -> None:
    """The profile's pre-launch check (the simulator's own parser) refuses it: no process, a
    `server_failed` event with the reason, one line."""
    text, is_error, data = await call(local_ctx, "start_server", flags={"--no-such-flag": True})
    assert is_error and data["diagnosis"].startswith("refused before launch:"), text
    assert "--no-such-flag" in data["diagnosis"] and "\n" not in data["diagnosis"]
    assert events(local_ctx, "server_started") == []
    (failed,) = events(local_ctx, "server_failed")
    assert (
        failed["flags"] == {"--no-such-flag": True} and failed["cleanup"] == "nothing was launched"
    )
    # a launched server that rejects its command line is diagnosed from its log (any engine)
    from tools.servers.diagnose import diagnose
    from tools.servers.profiles import SIM

    log = "usage: sim serve [-h]\nsim serve: error: unrecognized arguments: --no-such-flag\n"
    assert diagnose(SIM, log, 1, 2).text.startswith("the server rejected its command line")
    text, is_error, data = await call(local_ctx, "start_server", flags={"--noise": 0.9})
    assert is_error and "--noise must be in [0, 0.5)" in data["diagnosis"]
    text, is_error, data = await call(local_ctx, "start_server", flags={"--cuda-graph-max-bs": 64})
    assert not is_error, text
    (started,) = events(local_ctx, "server_started")
    assert started["engine_version"] not in ("", "unknown")  # the package's own version


def test_port_in_use_is_diagnosed_from_the_real_log(tmp_path: Path) -> None:
    import subprocess

    from tools.servers.diagnose import diagnose
    from tools.servers.profiles import SIM

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "sim", *BASE, "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            env={"SIM_GPU_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )
    assert out.returncode != 0
    d = diagnose(SIM, out.stdout + out.stderr, port, None)
    assert (
        d.text == f"port {port} is already in use (a leftover server or another process holds it)"
    )
    assert "Address already in use" in d.excerpt
    assert d.cause == "port_busy"  # typed: the autopilot moves the port, no verdict (issue 45)


async def test_a_stranger_on_the_port_is_refused_by_name(local_ctx: ToolContext) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", local_ctx.config.server.port))
        s.listen()
        text, is_error, _ = await call(local_ctx, "start_server")
    assert is_error and "is in use by pid" in text and "not by a server of this run" in text
    assert events(local_ctx, "server_started") == []


async def test_starting_again_replaces_our_own_server(local_ctx: ToolContext) -> None:
    _, _, first = await call(local_ctx, "start_server")
    text, is_error, second = await call(
        local_ctx, "start_server", flags={"--attention-backend": "triton"}
    )
    assert not is_error and "first stopped the running server server" in text
    host = local_ctx.hosts.get()
    assert not await host.alive(first["pid"]) and await host.alive(second["pid"])
    assert [
        e["type"] for e in events(local_ctx, "server_started", "server_ready", "server_killed")
    ] == ["server_started", "server_ready", "server_killed", "server_started", "server_ready"]


async def test_ready_timeout_fails_and_leaves_nothing(tmp_path: Path) -> None:
    from tests.ssh_fixtures import close_context

    host = HostConfig(name="local", workdir=str(tmp_path / "work"))
    ctx = await make_sim_ctx(tmp_path, host, ready_timeout_s=0.6)
    try:
        text, is_error, data = await call(ctx, "start_server", flags={"--load-seconds": 5})
        assert is_error and "not ready after 0.6 s" in data["diagnosis"], text
        pid = events(ctx, "server_started")[0]["pid"]
        assert not [p for p in await ctx.hosts.get().processes() if p.pgid == pid]
    finally:
        await close_context(ctx)


async def test_kill_server_leaves_look_alikes_alone(local_ctx: ToolContext, tmp_path: Path) -> None:
    host = local_ctx.hosts.get()
    decoy = await host.start_detached("exec -a sglang::scheduler sleep 30", str(tmp_path / "d.log"))
    try:
        await call(local_ctx, "start_server")
        text, is_error, _ = await call(local_ctx, "kill_server")
        assert not is_error, text
        assert await host.alive(decoy)  # same name, not this server's: untouched
    finally:
        await host.signal_group(decoy, "KILL")


async def test_own_descendant_in_another_session_is_killed_too(tmp_path: Path) -> None:
    """A worker that left the server's process group is still found through the family tree."""
    from tools.hosts import LocalHost
    from tools.servers.lifecycle import kill_server
    from tools.servers.profiles import SIM

    host = LocalHost(HostConfig(name="local", workdir=str(tmp_path)))
    port = free_port()
    holder = (
        f"import socket,time; s=socket.socket(); s.bind(('127.0.0.1',{port})); s.listen(); "
        "time.sleep(60)"
    )
    main = f"setsid {shlex.quote(sys.executable)} -c {shlex.quote(holder)} & sleep 60"
    pid = await host.start_detached(main, str(tmp_path / "m.log"))
    deadline = time.monotonic() + 60  # until the holder listens (5 s raced a loaded machine)
    while not await host.port_in_use(port) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    child = next(p for p in await host.processes() if p.ppid == pid and "socket" in p.args)
    assert child.pgid != pid
    record = {"name": "odd", "pid": pid, "pgid": pid, "port": port, "command": main}
    report = await kill_server(host, SIM, record, kill_timeout=2)
    assert report.verified["pid_gone"] and report.verified["port_free"]
    assert child.pid in {k["pid"] for k in report.killed}
    assert not await host.alive(child.pid)


async def test_wait_survives_a_dropped_connection(
    asyncssh_server: Any, ssh_proxy: Any, tmp_path: Path
) -> None:
    from tests.ssh_fixtures import close_context

    proxy = ssh_proxy(asyncssh_server)
    host = asyncssh_server.host_config("box", port=proxy.port, workdir=str(tmp_path / "work"))
    ctx = await make_sim_ctx(tmp_path, host)
    try:
        start = asyncio.create_task(call(ctx, "start_server", flags={"--load-seconds": 3}))
        # the cut lands while the model loads (3 s), so during the wait for readiness: the log
        # says so, not a sleep (a loaded machine reaches the launch late, the load not sooner)
        log, text, deadline = None, "", time.monotonic() + 60
        while "Load weight begin" not in text and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            if ctx.run.state.servers:  # launched: the host is this machine, so is its log
                log = Path(ctx.run.state.servers["server"]["log"]).expanduser()
                text = log.read_text(errors="replace") if log.exists() else ""
        assert "Load weight begin" in text and "fired up" not in text, text
        assert not start.done()
        proxy.cut()
        text, is_error, _ = await asyncio.wait_for(start, 60)
        assert not is_error, text
        assert ctx.hosts.get().connects >= 2
        text, is_error, _ = await call(ctx, "kill_server")
        assert not is_error, text
    finally:
        await close_context(ctx)


async def test_unknown_server_and_bad_flags_are_one_line_errors(local_ctx: ToolContext) -> None:
    text, is_error, _ = await call(local_ctx, "kill_server", name="nope")
    assert is_error and "no server named 'nope'" in text
    text, is_error, _ = await call(local_ctx, "start_server", flags={"--port": 1})
    assert is_error and "port" in text
    text, is_error, _ = await call(local_ctx, "start_server", flags={"tp 8": 1})
    assert is_error and "bad flag name" in text
    text, is_error, _ = await call(local_ctx, "kill_server")
    assert not is_error and "no server" in text
