"""The simulator as a real process, for the tests that measure it (test_bench_sim.py,
test_workloads_sim.py): its own log and fake-GPU folder, the URL once it is ready to roll, its
process group killed after."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def served_sim(command: list[str], name: str) -> Iterator[str]:
    """`command` (python -m sim ...) on a port of its choosing (--port 0); `name` tags its temp
    files."""
    log = Path(tempfile.mkstemp(prefix=f"{name}-sim-", suffix=".log")[1])
    env = dict(os.environ, SIM_GPU_DIR=tempfile.mkdtemp(prefix=f"{name}-gpus-"))
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*command, "--port", "0"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while "ready to roll" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        port = re.search(r"http://[^:]+:(\d+)", log.read_text()).group(1)  # type: ignore[union-attr]
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.unlink(missing_ok=True)
