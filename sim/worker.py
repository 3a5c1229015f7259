"""A worker process (sglang::scheduler, sglang::detokenizer): holds the port and "GPU memory".

Started by the server with the listening socket inherited. Like SGLang's workers it outlives a
SIGTERM sent to the main process alone: only a signal to itself (e.g. to the whole process group)
ends it. As a safety net for forgotten test processes, an orphan exits after $SIM_ZOMBIE_TTL_S
(default 1800) seconds without its parent.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
import time
from types import FrameType

from sim import gpus

PR_SET_NAME = 15


def set_name(name: str) -> None:
    """What `ps -o comm` / `top` show (argv[0] is already set by the parent)."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="sim.worker")
    p.add_argument("role", choices=["scheduler", "detokenizer"])
    p.add_argument("--parent", type=int, required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--gpus", type=int, default=0)
    p.add_argument("--mib", type=int, default=0)
    ns = p.parse_args(argv)
    set_name(f"sglang::{ns.role}")
    holds_gpu = ns.role == "scheduler" and ns.gpus > 0

    def on_term(signum: int, frame: FrameType | None) -> None:
        if holds_gpu:
            gpus.release()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the main process
    if holds_gpu:
        gpus.reserve(f"sglang::{ns.role}", ns.port, ns.gpus, ns.mib)
    ttl = float(os.environ.get("SIM_ZOMBIE_TTL_S", "1800"))
    orphan_since: float | None = None
    while True:
        time.sleep(1.0)
        if os.getppid() != ns.parent:
            orphan_since = orphan_since or time.monotonic()
            if time.monotonic() - orphan_since > ttl:
                if holds_gpu:
                    gpus.release()
                return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
