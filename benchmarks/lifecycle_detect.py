"""How fast start_server notices a crash and a ready server, on the local host and over SSH.

    .venv/bin/python -m benchmarks.lifecycle_detect [--runs 8] [--hosts local,asyncssh,sshd]

Crash, with a failure line: a process prints `CRASH <t>` then a CUDA OOM line at a known time t
and stays up (as SGLang's main process does when its scheduler dies); latency = when wait_ready
raised - t (it includes the 0.5 s grace that lets the rest of the error reach the log).
Crash, silent: the process is SIGKILLed by itself at t (nothing in the log); latency = raised - t.
Ready: the simulator (engine sim) is started; an independent poller hits /health every 10 ms to
find when it first answers 200 (the simulator flips health and prints its ready line together);
latency = when wait_ready returned - that moment. Kill: kill_server's whole procedure on that
server (SIGTERM to the group, waits, the checks that the pid is gone, the port free and the GPU
memory released). Targets (issue 5): crash
within 2 s, ready within 1 s. Figures go to docs/hosts.md.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tools.domain.config import HostConfig
from tools.hosts import Host, LocalHost, SSHHost
from tools.servers.lifecycle import kill_server
from tools.servers.profiles import SIM
from tools.servers.readiness import StartFailure, Watch, wait_ready

CRASH_AFTER_S = 1.0
CRASH_LOUD = (
    "import sys,time; time.sleep({after}); t=time.time(); "
    "print('CRASH', t, flush=True); print('torch.OutOfMemoryError: CUDA out of memory.', "
    "flush=True); time.sleep(30)"
)
CRASH_SILENT = (
    "import os,signal,time; time.sleep({after}); t=time.time(); "
    "open({mark!r},'w').write(str(t)); os.kill(os.getpid(), signal.SIGKILL)"
)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def crash(host: Host, work: Path, silent: bool) -> float:
    mark = str(work / f"crash-{time.monotonic_ns()}")
    code = (CRASH_SILENT if silent else CRASH_LOUD).format(after=CRASH_AFTER_S, mark=mark)
    log = str(work / f"crash-{time.monotonic_ns()}.log")
    pid = await host.start_detached(f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}", log)
    watch = Watch(host, SIM, pid, log, free_port(), timeout=30)
    try:
        await wait_ready(watch)
    except StartFailure:
        detected = time.time()
    else:
        raise AssertionError("the crashing process was reported ready")
    finally:
        await host.signal_group(pid, "KILL")
    if silent:
        crashed = float(Path(mark).read_text())
    else:
        text = Path(log).read_text()
        crashed = float(text.split("CRASH ", 1)[1].split()[0])
    return detected - crashed


async def ready(host: Host, work: Path) -> tuple[float, float]:
    """(ready latency, kill_server seconds with verification) of one simulator start."""
    port = free_port()
    flags = [
        "--model-path",
        "m",
        "--tp",
        "8",
        "--disable-custom-all-reduce",
        "--load-seconds",
        "1.0",
        "--time-scale",
        "50",
        "--port",
        str(port),
    ]
    cmd = shlex.join([f"SIM_GPU_DIR={work / 'gpus'}", sys.executable, "-m", "sim", *flags])
    log = str(work / f"sim-{port}.log")
    pid = await host.start_detached(cmd, log)
    first_200: list[float] = []

    async def poll() -> None:
        async with httpx.AsyncClient(trust_env=False) as client:
            while True:
                try:
                    r = await client.get(f"http://127.0.0.1:{port}/health", timeout=1)
                    if r.status_code == 200:
                        first_200.append(time.time())
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.01)

    poller = asyncio.create_task(poll())
    try:
        await wait_ready(Watch(host, SIM, pid, log, port, timeout=60, model="m"))
        done = time.time()
        await asyncio.wait_for(poller, 5)
    finally:
        poller.cancel()
    record = {"name": "bench", "pid": pid, "pgid": pid, "port": port, "command": cmd}
    report = await kill_server(host, SIM, record, kill_timeout=30)
    assert report.ok, report.summary()
    return done - first_200[0], report.seconds


def row(name: str, values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return (
        f"{name:<34} n={len(values):<3} median {statistics.median(values):6.2f} s  "
        f"p90 {p90:6.2f} s  max {values[-1]:6.2f} s"
    )


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--hosts", default="local,asyncssh,sshd")
    ns = p.parse_args()
    from tests.ssh_fixtures import SSHD, AsyncSSHServer, OpenSSHServer

    with tempfile.TemporaryDirectory(prefix="lifecycle-") as tmp:
        work = Path(tmp)
        (work / "gpus").mkdir()
        servers = []
        for kind in ns.hosts.split(","):
            if kind == "local":
                host: Host = LocalHost(HostConfig(name="local", workdir=str(work)))
            elif kind == "sshd" and not SSHD.exists():
                print("sshd: not installed, skipped")
                continue
            else:
                root = work / kind
                root.mkdir()
                server = AsyncSSHServer(root) if kind == "asyncssh" else OpenSSHServer(root)
                servers.append(server)
                host = SSHHost(server.host_config(kind, workdir=str(work)))
            loud = [await crash(host, work, silent=False) for _ in range(ns.runs)]
            silent = [await crash(host, work, silent=True) for _ in range(ns.runs)]
            starts = [await ready(host, work) for _ in range(ns.runs)]
            print(row(f"{kind}: crash, failure line", loud))
            print(row(f"{kind}: crash, silent exit", silent))
            print(row(f"{kind}: ready after /health 200", [r for r, _ in starts]))
            print(row(f"{kind}: kill_server, verified", [k for _, k in starts]))
            await host.close()
        for server in servers:
            server.close()


if __name__ == "__main__":
    asyncio.run(main())
