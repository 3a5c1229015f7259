"""The simulated GPU-memory registry: one JSON file per process that holds "GPU memory".

It lives in $SIM_GPU_DIR (default: a per-user folder in the temp dir). An entry whose process is
gone (or whose pid was reused by another process) is stale and removed when read, which is what
nvidia-smi shows after a process dies: its memory is free.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def registry_dir() -> Path:
    path = os.environ.get("SIM_GPU_DIR") or os.path.join(
        tempfile.gettempdir(), f"sim-gpus-{os.getuid()}"
    )
    return Path(path)


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks (None if it is gone): tells a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):  # exited, not yet reaped: it holds nothing any more
        return None
    return int(fields[19])


def reserve(
    name: str, port: int, gpus: int, mib_per_gpu: int, directory: Path | None = None
) -> Path:
    """Record that this process holds `mib_per_gpu` MiB on each of `gpus` GPUs."""
    d = directory or registry_dir()
    if not d.is_dir():  # a new one is its owner's only, as the run folder, whatever the umask
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(d, 0o700)
    pid = os.getpid()
    entry = {
        "pid": pid,
        "pgid": os.getpgid(0),
        "start": start_time(pid),
        "name": name,
        "port": port,
        "gpus": list(range(gpus)),
        "used_memory_mib": mib_per_gpu,
    }
    path = d / f"{pid}.json"
    tmp = d / f".{pid}.json.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(fd, 0o600)  # a leftover tmp of a killed process keeps its mode otherwise
        out.write(json.dumps(entry))
    os.replace(tmp, path)  # readers never see half an entry
    return path


def release(pid: int | None = None, directory: Path | None = None) -> None:
    path = (directory or registry_dir()) / f"{pid or os.getpid()}.json"
    path.unlink(missing_ok=True)


def reservations(directory: Path | None = None) -> list[dict[str, Any]]:
    """Live entries, one row per (process, GPU) like nvidia-smi --query-compute-apps."""
    d = directory or registry_dir()
    rows: list[dict[str, Any]] = []
    if not d.is_dir():
        return rows
    for path in sorted(d.glob("*.json")):
        try:
            entry = json.loads(path.read_text())
            pid = int(entry["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being written, or not ours
        if start_time(pid) is None or start_time(pid) != entry.get("start"):
            path.unlink(missing_ok=True)  # the process is gone: its memory is free
            continue
        for gpu in entry.get("gpus", [0]):
            rows.append(
                {
                    "pid": pid,
                    "pgid": entry.get("pgid"),
                    "gpu": gpu,
                    "process_name": entry.get("name", "?"),
                    "port": entry.get("port"),
                    "used_memory_mib": entry.get("used_memory_mib", 0),
                }
            )
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    """As `nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv`."""
    lines = ["pid, process_name, used_gpu_memory [MiB]"]
    lines += [f"{r['pid']}, {r['process_name']}, {r['used_memory_mib']} MiB" for r in rows]
    return "\n".join(lines)
