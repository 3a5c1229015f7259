"""Engine profiles: what differs between SGLang, vLLM and the simulator when starting, watching
and killing a server - health path, ready line, failure patterns, worker process names."""

from __future__ import annotations

import re
from dataclasses import dataclass

# (pattern, diagnosis); the first pattern that matches the log wins, so specific before generic.
# {port} and {line} (the matching line) are filled in.
COMMON_FAILURES: tuple[tuple[str, str], ...] = (
    (
        r"[Aa]ddress already in use|\[Errno 98\]",
        "port {port} is already in use (a leftover server or another process holds it)",
    ),
    (
        r"Capture cuda graph failed: CUDA out of memory",
        "out of GPU memory while capturing CUDA graphs: lower --cuda-graph-max-bs or "
        "--mem-fraction-static",
    ),
    (
        r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory",
        "out of GPU memory at startup: lower --mem-fraction-static (SGLang) / "
        "--gpu-memory-utilization (vLLM), or the batch limits (--cuda-graph-max-bs, "
        "--max-running-requests / --max-num-seqs)",
    ),
    (
        r"Not enough memory\. Please try to increase --mem-fraction-static",
        "no GPU memory left for the KV cache: raise --mem-fraction-static (or shrink what else "
        "the GPUs hold)",
    ),
    (
        r"(?i)custom[ _-]?all[ _-]?reduce.*(?:timed out|timeout|error|fail)",
        "custom all-reduce failed - a PCIe box without NVLink with TP > 1: add "
        "--disable-custom-all-reduce",
    ),
    (
        r"Watchdog caught collective operation timeout|NCCL error|ncclSystemError",
        "a collective (NCCL) operation failed or timed out across the GPUs: {line}",
    ),
    (
        r"EngineDeadError|EngineCore failed to start|Engine core initialization failed",
        "the vLLM engine core died during startup: {line}",
    ),
    (
        r"error: unrecognized arguments|error: argument|: error: ",
        "the server rejected its command line: {line}",
    ),
    (
        r"ModuleNotFoundError|ImportError",
        "a Python module is missing on the host - is the engine installed in this environment? "
        "{line}",
    ),
    (r"Scheduler hit an exception", "the scheduler crashed: {exception}"),
    (r"Traceback \(most recent call last\)", "a Python exception at startup: {exception}"),
)


@dataclass(frozen=True)
class Engine:
    name: str
    health_path: str
    ready_lines: tuple[str, ...]  # the engine says it is ready when the log shows one of these
    workers: tuple[str, ...]  # process names of its workers (they may outlive the main process)
    failures: tuple[tuple[re.Pattern[str], str], ...]
    port_flag: str = "--port"
    # added unless the command sets --host: vLLM binds every interface by default, and an
    # unauthenticated API on the box's network is not ours to open (SGLang and the sim default
    # to 127.0.0.1 already)
    loopback: str = ""


def _compile(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(p), d) for p, d in pairs)


SGLANG = Engine(
    name="sglang",
    health_path="/health",
    ready_lines=("The server is fired up and ready to roll!",),
    workers=("sglang::scheduler", "sglang::detokenizer", "sglang::"),
    failures=_compile(COMMON_FAILURES),
)
VLLM = Engine(
    name="vllm",
    health_path="/health",
    ready_lines=("Application startup complete.",),
    workers=("VLLM::EngineCore", "VLLM::Worker", "Worker_TP", "VllmWorker"),
    failures=_compile(COMMON_FAILURES),
    loopback="--host 127.0.0.1",
)
SIM = Engine(
    name="sim",
    health_path="/health",
    ready_lines=SGLANG.ready_lines,
    workers=SGLANG.workers,
    failures=SGLANG.failures,
)
ENGINES = {e.name: e for e in (SGLANG, VLLM, SIM)}


def engine_for(config: object) -> Engine:
    """The profile for config.server, with its documented overrides applied."""
    server = config.server  # type: ignore[attr-defined]
    base = ENGINES[server.engine]
    ready = getattr(server, "ready_line", None)
    health = getattr(server, "health_path", None)
    if not ready and not health:
        return base
    return Engine(
        name=base.name,
        health_path=health or base.health_path,
        ready_lines=(ready,) if ready else base.ready_lines,
        workers=base.workers,
        failures=base.failures,
        port_flag=base.port_flag,
        loopback=base.loopback,
    )
