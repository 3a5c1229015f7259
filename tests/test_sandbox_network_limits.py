"""The sandbox's network namespace and its limits (issue 47), through the real bash tool and
bubblewrap: a line that names no network has its own loopback only (a listener there is nobody's
but the line's), a line that names the run's server reaches it; and the limits of a call.

Like tests/test_guard_sandbox.py these need bubblewrap: they fail without it in CI, skip elsewhere.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_guard_sandbox import call, close_context, make_context
from tools.base import ToolContext
from tools.domain.config import HostConfig
from tools.guard.network import needs_network
from tools.hosts import sandbox
from tools.hosts.sandbox import Sandbox

pytest_plugins = ["tests.ssh_fixtures"]


@pytest.fixture(scope="module", autouse=True)
def bwrap() -> None:
    if shutil.which("bwrap") is None:
        why = "bubblewrap is not installed: `apt-get install -y bubblewrap` (.ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture
def server() -> Iterator[int]:
    """A listener outside the sandbox on loopback, as the run's server is: it answers `pong`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    code = (
        "import socket; s=socket.socket(); "
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
        f"s.bind(('127.0.0.1', {port})); s.listen()\n"
        "while True:\n c, _ = s.accept(); c.settimeout(10)\n try:\n  c.recv(65536)\n"
        "  c.sendall(b'HTTP/1.0 200 OK\\r\\n\\r\\npong'); c.shutdown(socket.SHUT_WR)\n"
        "  c.recv(65536)\n except OSError:\n  pass\n c.close()"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while not _answers(port):
            assert proc.poll() is None and time.monotonic() < deadline, "no listener in 60 s"
            time.sleep(0.05)
        yield port
    finally:
        proc.kill()
        proc.wait(5)


def _answers(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def _outside_address() -> str | None:
    """An address of this machine beyond loopback (the one a default route leaves from)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent for a UDP connect
            addr = str(s.getsockname()[0])
        except OSError:
            return None
    return None if addr.startswith("127.") else addr


def test_what_names_the_network() -> None:
    shared = [
        "curl -s http://127.0.0.1:30000/health",
        "python3 client.py --url http://localhost:8000/v1",
        "python3 probe.py localhost:8000",
        ".venv/bin/pip install -r requirements.txt",
        ".venv/bin/python -m pip install sglang",
        "git clone https://github.com/x/y",
        "git -C repo fetch origin",
        "huggingface-cli download m --local-dir models/m",
        "vllm bench serve --model m",
        "python -m sglang.bench_serving --num-prompts 10",
        "exec 3<>/dev/tcp/127.0.0.1/80",
    ]
    own = [
        "python3 -m http.server --bind 0.0.0.0 -d / 8000",
        "python3 train.py --epochs 1",
        "awk '{s+=$1} END {print s}' nums.txt",
        "git log --oneline -5",
        "vllm serve /models/m --port 8000",  # a server ends with the call: no interface for it
        "python -m sglang.launch_server --model-path m --port 30000 & curl localhost:30000/health",
        "nohup python -m sim --port 30000 > logs/sim.log 2>&1 &",
    ]
    assert [c for c in shared if needs_network(c) is None] == []
    assert [c for c in own if needs_network(c) is not None] == []


async def test_a_line_that_names_no_network_has_its_own(tmp_path: Path, server: int) -> None:
    ctx = make_context(tmp_path / "runs", HostConfig(name="local", workdir=str(tmp_path / "w")))
    outside = _outside_address()
    try:
        # a one-liner naming no network: the run's server outside is not reachable
        reach = (
            f"import socket\ntry:\n socket.create_connection(('127.0.0.1', {server}), timeout=5)"
            "\n print('REACHED')\nexcept OSError as e: print('UNREACHED', e.errno)"
        )
        text, _, data = await call(ctx, f"python3 -c {shlex.quote(reach)}")
        assert data["guard"]["action"] == "sandbox" and "UNREACHED" in text, text
        assert "it had no network" in text, text
        # a listener on every interface there is nobody's but the line's: while it listens,
        # nothing outside reaches it; on the host's own address, it cannot even bind
        mark = tmp_path / "w" / "listening"
        listen = (
            "import socket, os, time\ns = socket.socket()\n"
            "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "s.bind(('0.0.0.0', PORT)); s.listen()\nopen('listening', 'w').write('x')\n"
            "c = socket.create_connection(('127.0.0.1', PORT), timeout=5)\n"
            "print('INSIDE', c.getpeername()[1] == PORT)\n"
            "for _ in range(100):\n if os.path.exists('stop'): break\n time.sleep(0.1)\n"
        )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        task = asyncio.create_task(
            call(ctx, f"python3 -c {shlex.quote(listen.replace('PORT', str(port)))}", timeout_s=30)
        )
        deadline = time.monotonic() + 60
        while not mark.exists():
            assert not task.done() and time.monotonic() < deadline, "the listener never started"
            await asyncio.sleep(0.05)
        assert not _answers(port), "a sandboxed listener was reached from outside on loopback"
        if outside:
            assert not _answers(port, outside), "a sandboxed listener was reached from outside"
        (tmp_path / "w" / "stop").write_text("x")
        text, _, data = await task
        assert "INSIDE True" in text and data["guard"]["action"] == "sandbox", text
        if outside:
            bind = (
                f"import socket\ntry:\n socket.socket().bind(({outside!r}, 0)); print('BOUND')\n"
                "except OSError as e: print('NOBIND', e.errno)"
            )
            text, _, data = await call(ctx, f"python3 -c {shlex.quote(bind)}")
            assert data["guard"]["action"] == "sandbox" and "NOBIND 99" in text, text
        # a line that names the run's server reaches it: the host's network
        url = f"http://127.0.0.1:{server}/"
        fetch = (
            "import sys, urllib.request\n"
            "print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())"
        )
        text, _, data = await call(ctx, f"python3 -c {shlex.quote(fetch)} {url}")
        assert data["guard"]["action"] == "sandbox" and "pong" in text, text
        assert "it had no network" not in text, text
    finally:
        await close_context(ctx)


async def _sandbox(ctx: ToolContext) -> Sandbox:
    host = ctx.hosts.get("local")  # type: ignore[union-attr]
    box = await host.sandbox()
    assert box is not None
    return box


async def test_a_call_has_a_process_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork flood in the sandbox stops at the limit, and nothing of it outlives the call."""
    monkeypatch.setattr(sandbox, "MAX_TASKS", 40)
    ctx = make_context(tmp_path / "runs", HostConfig(name="local", workdir=str(tmp_path / "w")))
    try:
        box = await _sandbox(ctx)
        if box.pids == "none":
            assert "no process limit" in box.describe()
            pytest.skip("root without a writable pids cgroup here: the probe says it has no limit")
        flood = (
            "import os, time\nn = 0\ntry:\n for _ in range(400):\n  if os.fork() == 0:\n"
            "   time.sleep(120); os._exit(0)\n  n += 1\nexcept OSError as e:\n"
            " print('STOPPED', n, e.errno)\nelse:\n print('FORKED', n)"
        )
        text, _, data = await call(ctx, f"python3 -c {shlex.quote(flood)}", timeout_s=60)
        assert data["guard"]["action"] == "sandbox", text
        m = re.search(r"STOPPED (\d+) 11\b", text)
        assert m and int(m[1]) < 40, text
        left = subprocess.run(["pgrep", "-c", "-f", "time.sleep.120"], capture_output=True)
        assert left.stdout.strip() in (b"0", b""), left
    finally:
        await close_context(ctx)


async def test_a_call_cannot_fill_the_disk_tmp_or_shm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One file stops short of the disk's reserve (here a reserve as large as the disk: 1 MiB
    is all a file may take), /tmp and /dev/shm stop at their cap, and /dev/shm is the line's."""
    monkeypatch.setattr(sandbox, "FILE_RESERVE", 1)
    monkeypatch.setattr(sandbox, "SCRATCH_MB", 4)
    ctx = make_context(tmp_path / "runs", HostConfig(name="local", workdir=str(tmp_path / "w")))
    outside = Path("/dev/shm") / f"campaign-canary-{os.getpid()}"
    outside.write_text("canary")
    try:
        box = await _sandbox(ctx)
        fill = (
            "import os, sys\nfor path in sys.argv[1:]:\n try:\n  with open(path, 'wb') as f:\n"
            "   for _ in range(8): f.write(b'x' * (1 << 20)); f.flush()\n  print(path, 'FULL')\n"
            " except OSError as e:\n  print(path, 'STOPPED', e.errno, os.path.getsize(path))\n"
            f"print('SEEN' if os.path.exists({str(outside)!r}) else 'UNSEEN')"
        )
        text, _, data = await call(ctx, f"python3 -c {shlex.quote(fill)} big.bin")
        assert data["guard"]["action"] == "sandbox", text
        assert "big.bin STOPPED 27 1048576" in text, text  # EFBIG at 1 MiB
        monkeypatch.setattr(sandbox, "FILE_RESERVE", 20)  # the disk's own limit: far above 4 MiB
        paths = "/tmp/big.bin /dev/shm/big.bin"
        text, _, data = await call(ctx, f"python3 -c {shlex.quote(fill)} {paths}")
        if box.sized:
            assert "/tmp/big.bin STOPPED 28" in text and "/dev/shm/big.bin STOPPED 28" in text
        assert "UNSEEN" in text, text  # the host's /dev/shm is not the line's
        assert not (Path("/dev/shm") / "big.bin").exists()
        assert outside.read_text() == "canary"
    finally:
        outside.unlink()
        await close_context(ctx)


def _bin_without_bwrap(folder: Path, bwrap_script: str | None) -> str:
    """A PATH with the programs a host's shell needs here, and a bwrap that fails (or none)."""
    folder.mkdir()
    for tool in ("bash", "sh", "id", "cat", "env", "ps", "setsid", "sleep", "kill", "readlink"):
        found = shutil.which(tool)
        if found:
            (folder / tool).symlink_to(found)
    if bwrap_script is not None:
        (folder / "bwrap").write_text(bwrap_script)
        (folder / "bwrap").chmod(0o755)
    return str(folder)


@pytest.mark.parametrize(
    ("bwrap_script", "why"),
    [
        (None, "bubblewrap is not installed"),
        (
            "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n",
            "bubblewrap is installed but does not run there",
        ),
    ],
)
async def test_a_host_that_cannot_sandbox_says_so_at_the_start_and_refuses_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bwrap_script: str | None, why: str
) -> None:
    from agent.cli.runner import sandbox_lines

    monkeypatch.setenv("PATH", _bin_without_bwrap(tmp_path / "bin", bwrap_script))
    ctx = make_context(tmp_path / "runs", HostConfig(name="local", workdir=str(tmp_path / "w")))
    try:
        agent = type("A", (), {"ctx": ctx})()
        (line,) = await sandbox_lines(agent)  # type: ignore[arg-type]
        assert line.startswith("no sandbox on local: " + why) and "refused there" in line, line
        assert "\n" not in line
        text, err, data = await call(ctx, "awk 'BEGIN { print 6 * 7 }'")
        assert err and data["guard"]["action"] == "refuse", text
        assert "no sandbox to run it in (" + why in text and "agent allow" in text, text
        assert "\n" not in text.strip(), text
        # what the rules allow outright still runs
        text, err, data = await call(ctx, "cat /proc/self/status")
        assert not err and "guard" not in data and "Pid:" in text, text
    finally:
        await close_context(ctx)


async def test_the_start_line_says_what_the_sandbox_bounds(tmp_path: Path) -> None:
    from agent.cli.runner import sandbox_lines

    ctx = make_context(tmp_path / "runs", HostConfig(name="local", workdir=str(tmp_path / "w")))
    try:
        (line,) = await sandbox_lines(type("A", (), {"ctx": ctx})())  # type: ignore[arg-type]
        box = await _sandbox(ctx)
        assert line == f"sandbox on local: {box.describe()}"
        assert "network namespace of its own" in line and "processes" in line, line
    finally:
        await close_context(ctx)


def test_for_a_user_that_is_not_root_the_process_limit_is_rlimit_nproc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit where no pids cgroup can be made: RLIMIT_NPROC over the machine's task count
    (root is exempt from it: the test runs the sandbox's own text as `nobody` when it is root)."""
    flood = (
        "import os, time\nn = 0\ntry:\n for _ in range(5000):\n  if os.fork() == 0:\n"
        "   time.sleep(60); os._exit(0)\n  n += 1\nexcept OSError as e:\n"
        " print('STOPPED', n, e.errno)\nelse:\n print('FORKED', n)"
    )
    monkeypatch.setattr(sandbox, "MAX_TASKS", 40)
    work = Path(tempfile.mkdtemp(prefix="sandbox-nproc-", dir="/var/tmp"))
    as_user: list[str] = []
    if os.getuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) runs the test as nobody"
        os.chown(work, 65534, 65534)
        as_user = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    try:
        box = Sandbox(pids="rlimit", net=False)
        text = box.wrap(f"python3 -c {shlex.quote(flood)}", str(work), [str(work)])
        tasks = int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])
        done = subprocess.run(
            [*as_user, "env", "-i", f"HOME={work}", "PATH=/usr/bin:/bin", "bash", "-c", text],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=120,
        )
        m = re.search(r"STOPPED (\d+) 11\b", done.stdout)
        assert m, (done.stdout, done.stderr)
        # the machine's tasks then, MAX_TASKS more, less the user's own (and what changed since)
        assert int(m[1]) < tasks + 40 + 200, (m[1], tasks)
    finally:
        shutil.rmtree(work, ignore_errors=True)
