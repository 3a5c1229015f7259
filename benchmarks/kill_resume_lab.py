"""The pieces of the kill-and-resume harness (benchmarks/kill_resume.py) that tests use too: a short
lab campaign's config, the todos.json watcher, what a trial reports, the leftover-process hunt."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

SPACES = {
    "small": '"--attention-backend" = ["flashinfer", "triton"]\n',
    "medium": '"--attention-backend" = ["flashinfer", "triton", "fa3"]\n'
    '"--cuda-graph-max-bs" = [128, 256]\n',
}
BASELINES = {
    "small": '"--attention-backend" = "flashinfer"\n',
    "medium": '"--attention-backend" = "flashinfer"\n"--cuda-graph-max-bs" = 128\n',
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Workload:
    """What each benchmark level runs. The test's default is quick and noisy; the benchmark's
    (max_tokens 64, 8 requests, time scale 20) measures well enough to find the true optimum."""

    max_tokens: int = 16
    requests: int = 4
    time_scale: float = 50.0
    levels: tuple[int, ...] = (1, 4)
    input_len: int = 32


def write_config(
    folder: Path,
    space: str = "small",
    port: int | None = None,
    command: str | None = None,
    workload: Workload = Workload(),
) -> Path:
    """A short lab campaign: two levels, few short requests, a small search space."""
    path = folder / "agent.toml"
    server = f"command = {json.dumps(command)}\n" if command else ""
    w = workload
    path.write_text(
        f"[server]\nport = {port or free_port()}\n{server}\n"
        f"[bench]\nconcurrency = {list(w.levels)}\nmax_tokens = {w.max_tokens}\n"
        f"input_len = {w.input_len}\nrequests_per_level = {w.requests}\nwarmup_requests = 0\n\n"
        f"[search]\n{SPACES[space]}\n[search.baseline]\n{BASELINES[space]}"
    )
    return path


def regret(config: dict[str, object] | None, space: dict[str, object], w: Workload) -> float:
    """How far below the true optimum of the space (sim.truth) a recommendation is, 0..1."""
    from tools.domain.lab_truth import config_value, optimum

    if config is None:
        return 1.0
    args = (list(w.levels), "geomean", w.input_len, w.max_tokens)
    best = optimum(space, *args)[1]
    return max(0.0, 1 - config_value(config, *args) / best)


@dataclass
class Report:
    kills: int = 0
    torn: int = 0
    sessions: int = 0
    exit_code: int | None = None
    reported: dict[str, str] = field(default_factory=dict)  # benchmark id -> result path
    lost: list[str] = field(default_factory=list)
    todos_reads: int = 0
    todos_bad: list[str] = field(default_factory=list)
    unreadable_log: list[str] = field(default_factory=list)
    servers_at_kills: int = 0
    adopted: int = 0
    killed_on_resume: int = 0
    unrecovered: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    triggers: list[str] = field(default_factory=list)
    seconds: float = 0.0
    recommendation: dict[str, object] | None = None  # recommendation.json's config
    regret: float = 1.0  # below the true optimum of the space (sim.truth), 0..1

    @property
    def ok(self) -> bool:
        return (
            self.exit_code == 0
            and not (self.lost or self.todos_bad or self.unreadable_log)
            and not (self.unrecovered or self.leftovers)
        )


class TodosWatcher(threading.Thread):
    """Reads todos.json as fast as it can: it must parse, with at most one item in_progress."""

    def __init__(self, path: Path, report: Report) -> None:
        super().__init__(daemon=True)
        self.path, self.report, self.stop = path, report, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                time.sleep(0.005)
                continue
            self.report.todos_reads += 1
            try:
                todos = json.loads(data)["todos"]
                assert sum(t["status"] == "in_progress" for t in todos) <= 1
            except Exception as err:  # any failure to read is the finding
                self.report.todos_bad.append(f"{type(err).__name__}: {data[:80]!r}")
            time.sleep(0.002)


def valid_result(path: Path, rid: str) -> bool:
    try:
        return bool(json.loads(path.read_text())["id"] == rid)
    except (OSError, ValueError, KeyError):
        return False


def leftover_processes(ports: set[int]) -> list[str]:
    """Simulator processes (servers or their workers) still alive on one of the run's ports."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] == "Z":
            continue
        words = [a.decode(errors="replace") for a in argv]
        text = " ".join(words)
        if "sim" in text and any(f"--port {p}" in text for p in ports):
            found.append(f"{proc.name}: {text[:100]}")
    return found


def kill_leftovers(ports: set[int]) -> int:
    """SIGKILL what leftover_processes finds (after a failed trial: ours, found by port)."""
    killed = 0
    for line in leftover_processes(ports):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
            killed += 1
    return killed
