"""Killing a server and proving it is gone - without touching anything that is not its own.

A process is the server's when it is in the server's process group, descends from the server's
pid, or is a worker recorded at readiness (same pid and command line). That set is taken before
any signal, because once the main process dies its children are re-parented and the family tree
is lost. Then: SIGTERM to the group, wait, SIGKILL to the group and the stragglers, verify (pid
gone, port free, GPU memory released), hunt what still holds the port or the GPU and belongs to
the server, verify again.
"""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from tools.hosts import Host, HostError, Proc
from tools.hosts.base import descendants
from tools.servers.profiles import Engine

POLL_S = 0.2
STRAGGLER_GRACE_S = 3.0  # once the main process is gone, how long its workers get after SIGTERM
PORT_RELEASE_S = 5.0


@dataclass
class KillReport:
    name: str
    killed: list[dict[str, Any]] = field(default_factory=list)  # {pid, args, how}
    verified: dict[str, bool | None] = field(default_factory=dict)
    foreign: list[str] = field(default_factory=list)  # holders we left alone
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(v is not False for v in self.verified.values())

    def summary(self) -> str:
        v = self.verified
        checks = ", ".join(
            f"{k.replace('_', ' ')}: {'yes' if v[k] else 'NO' if v[k] is False else 'not checked'}"
            for k in ("pid_gone", "port_free", "gpu_released")
        )
        procs = ", ".join(f"{k['pid']} ({k['args'][:40]})" for k in self.killed) or "nothing alive"
        text = f"server {self.name}: killed {procs} in {self.seconds:.1f} s; {checks}"
        if self.foreign:
            text += "; left alone (not this server's): " + "; ".join(self.foreign)
        return text


async def launch(host: Host, command: str, log: str, started: Callable[[int], object]) -> int:
    """Start a server detached; `started(pid)` records it before the caller can be cancelled.

    SIGTERM cancels the agent's task. A launch cancelled while the server's pid was on its way
    back (a slow SSH channel) left a server that no record named, so the run's end killed nothing
    and it outlived the agent. Here the launch runs to its end whatever cancels the caller, the
    server is recorded, and then the cancellation goes on."""
    launching = asyncio.ensure_future(host.start_detached(command, log))
    try:
        pid = await asyncio.shield(launching)
    except asyncio.CancelledError:
        while not launching.done():  # a second SIGTERM does not cut it either (<= 30 s)
            try:
                await asyncio.shield(launching)
            except asyncio.CancelledError:
                continue
            except Exception:
                break
        if launching.cancelled() or launching.exception() is not None:
            raise  # nothing was started, or the host cannot say: nothing to record
        started(launching.result())
        raise
    started(pid)
    return pid


def ownership(procs: list[Proc], record: dict[str, Any]) -> dict[int, Proc]:
    """The live processes that belong to the server of `record`."""
    pid, pgid = int(record["pid"]), int(record.get("pgid") or record["pid"])
    by_pid = {p.pid: p for p in procs}
    mine = {p.pid for p in procs if p.pgid == pgid} | descendants(procs, pid)
    if pid in by_pid:
        mine.add(pid)
    for w in record.get("workers") or []:
        p = by_pid.get(int(w["pid"]))
        if p is not None and p.args == w["args"]:
            mine.add(p.pid)
    return {q: by_pid[q] for q in mine if q in by_pid}


async def gpu_holders(host: Host, engine: Engine, command: str) -> list[dict[str, int]] | None:
    """[{pid, pgid?}] holding GPU memory: the simulator's registry, else nvidia-smi; None if
    neither can tell."""
    if engine.name == "sim":
        argv = shlex.split(command)
        at = next((i for i in range(1, len(argv) - 1) if argv[i : i + 2] == ["-m", "sim"]), None)
        if at is not None:  # the same python, and the same VAR=value prefix (SIM_GPU_DIR)
            env = [a for a in argv[: at - 1] if "=" in a and not a.startswith("-")]
            cmd = shlex.join([*env, argv[at - 1], "-m", "sim", "gpus", "--json"])
            res = await host.run(cmd, timeout=30, cwd="/")
            if res.exit_code == 0:
                try:
                    rows = orjson.loads(res.stdout)
                    return [{"pid": int(r["pid"]), "pgid": int(r.get("pgid") or 0)} for r in rows]
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                    pass
    apps = await host.gpu_apps()
    return None if apps is None else [{"pid": a["pid"], "pgid": 0} for a in apps]


async def kill_server(
    host: Host, engine: Engine, record: dict[str, Any], kill_timeout: float
) -> KillReport:
    start = time.monotonic()
    report = KillReport(name=str(record["name"]))
    pid, pgid = int(record["pid"]), int(record.get("pgid") or record["pid"])
    mine = ownership(await host.processes(), record)
    if mine:
        report.killed = [{"pid": p.pid, "args": p.args, "how": "TERM"} for p in mine.values()]
        await host.signal_group(pgid, "TERM")
        await host.signal([q for q, p in mine.items() if p.pgid != pgid], "TERM")
        await _wait(host, [pid], kill_timeout)
        await _wait(host, list(mine), min(STRAGGLER_GRACE_S, kill_timeout))
        stragglers = [q for q in mine if await host.alive(q)]
        if stragglers or await host.group_alive(pgid):
            for k in report.killed:
                if k["pid"] in stragglers:
                    k["how"] = "KILL"
            await host.signal_group(pgid, "KILL")
            await host.signal(stragglers, "KILL")
            await _wait(host, list(mine), 5.0)
    await _verify(host, engine, record, report, set(mine), wait_port=bool(mine))
    if not report.ok:
        await _hunt(host, engine, record, report, set(mine))
        await _verify(host, engine, record, report, set(mine), wait_port=True)
    report.seconds = time.monotonic() - start
    return report


async def _wait(host: Host, pids: list[int], within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = await asyncio.gather(*(host.alive(p) for p in pids))
        if not any(alive):
            return
        await asyncio.sleep(POLL_S)


async def _verify(
    host: Host,
    engine: Engine,
    record: dict[str, Any],
    report: KillReport,
    mine: set[int],
    wait_port: bool,
) -> None:
    pid, port = int(record["pid"]), int(record["port"])
    pgid = int(record.get("pgid") or pid)
    report.verified["pid_gone"] = not await host.alive(pid)
    deadline = time.monotonic() + (PORT_RELEASE_S if wait_port else 0)
    while True:
        held = await host.port_in_use(port)
        if not held or time.monotonic() >= deadline:
            break
        await asyncio.sleep(POLL_S)
    report.verified["port_free"] = not held
    holders = await gpu_holders(host, engine, str(record.get("command", "")))
    report.verified["gpu_released"] = (
        None
        if holders is None
        else not [h for h in holders if h["pid"] in mine or h["pid"] == pid or (h["pgid"] == pgid)]
    )


async def _hunt(
    host: Host, engine: Engine, record: dict[str, Any], report: KillReport, mine: set[int]
) -> None:
    """Leftovers that still hold the port or the GPU, or carry the engine's worker names, and
    belong to this server; anything else is reported, never killed."""
    pid, port = int(record["pid"]), int(record["port"])
    pgid = int(record.get("pgid") or pid)
    procs = {p.pid: p for p in await host.processes()}
    suspects: dict[int, str] = {}
    try:
        for q in await host.port_holders(port):
            suspects[q] = f"holds port {port}"
    except HostError:
        pass
    for h in await gpu_holders(host, engine, str(record.get("command", ""))) or []:
        suspects.setdefault(h["pid"], "holds GPU memory")
    for p in procs.values():
        if any(name in p.args for name in engine.workers):
            suspects.setdefault(p.pid, f"an {engine.name} worker")
    doomed = []
    for q, why in suspects.items():
        proc = procs.get(q)
        if proc is None:
            continue
        if q in mine or proc.pgid == pgid or pid in _ancestors(procs, q):
            doomed.append(q)
            report.killed.append({"pid": q, "args": proc.args, "how": f"KILL (leftover: {why})"})
        elif why != f"an {engine.name} worker":
            report.foreign.append(f"pid {q} ({proc.args[:60]}) {why}")
    if doomed:
        await host.signal(doomed, "KILL")
        await _wait(host, doomed, 5.0)


def _ancestors(procs: dict[int, Proc], pid: int) -> set[int]:
    out: set[int] = set()
    p = procs.get(pid)
    while p is not None and p.ppid not in out and p.ppid > 1:
        out.add(p.ppid)
        p = procs.get(p.ppid)
    return out
