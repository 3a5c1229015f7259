"""The processes a hand-run benchmark starts (servers, clients, campaigns, CPU hogs): each script
keeps them in one Procs and runs its main through `Procs.run`, which kills every one of them on
every way out; `wait_ready` waits, with a deadline, for a llama-server to answer."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

READY_S = 120.0  # llama-server up and answering /health
KILL_S = 10.0  # SIGTERM, then SIGKILL


class BenchError(Exception):
    """A step of a benchmark script that cannot go on; printed as one line, exit 1."""


@dataclass
class Procs:
    """Every process this benchmark started, killed on the way out."""

    items: list[subprocess.Popen[bytes] | asyncio.subprocess.Process] = field(default_factory=list)

    def kill_all(self) -> None:
        """SIGTERM to each process group, SIGKILL to what is left after KILL_S."""
        live = [p.pid for p in self.items if not _reaped(p.pid)]
        for pid in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
        end = time.monotonic() + KILL_S
        while time.monotonic() < end and not all(_reaped(pid) for pid in live):
            time.sleep(0.05)
        for pid in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)  # what ignored SIGTERM, and its children
            _reaped(pid)

    def run(self, main: Coroutine[Any, Any, None]) -> int:
        """Run a script's `main` and kill every process it started on every way out - the end,
        a BenchError (its one line), Ctrl-C, SIGTERM, SIGHUP; the exit status."""

        def ended(signum: int, _frame: object) -> None:
            raise SystemExit(128 + signum)  # through the finally below

        signal.signal(signal.SIGTERM, ended)
        signal.signal(signal.SIGHUP, ended)
        try:
            asyncio.run(main)
        except BenchError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
        finally:
            self.kill_all()
        return 0


def _reaped(pid: int) -> bool:
    """Whether our child `pid` has exited (and is reaped now)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True  # reaped already (by Popen or asyncio)
    return done != 0


async def wait_ready(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    """llama-server at `url` answers /health (its exit, or READY_S, is a BenchError)."""
    end = time.monotonic() + READY_S
    async with httpx.AsyncClient(timeout=2.0) as client:
        while time.monotonic() < end:
            if server.poll() is not None:
                raise BenchError(f"llama-server exited ({server.returncode}); see {log}")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(f"{url}/health")).status_code == 200:
                    return
            await asyncio.sleep(0.5)
    raise BenchError(f"llama-server not ready within {READY_S:g} s; see {log}")
