"""Everything a run writes is its owner's only, and nothing of it is left outside its folder
(issue 49, item 7): a small lab campaign under umask 022 (what most shells have), then `agent
say` (the supervisor's inbox); every file of the runs folder is 0600 and every folder 0700 - the
deploy scripts, which run, 0700 - and the simulator's GPU claims are gone."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sim import gpus
from tools.domain.config import HostConfig
from tools.fleet.lab_cluster import private_temp, remove_temp
from tools.hosts.local import LocalHost

CONFIG = """
[server]
engine = "sim"
port = {port}

[bench]
concurrency = [1, 10]
max_tokens = 16
requests_per_level = 4

[search]
"--attention-backend" = ["flashinfer", "fa3"]

[search.baseline]
"--attention-backend" = "flashinfer"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def agent(tmp_path: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["SIM_GPU_DIR"] = str(tmp_path / "gpus")
    umask = ["sh", "-c", 'umask 022 && exec "$0" "$@"']  # what most shells have
    return subprocess.run(
        [*umask, sys.executable, "-m", "agent.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=timeout,
    )


def modes(folder: Path) -> dict[str, str]:
    """Every path under `folder` (itself included) whose mode is not its owner's only."""
    wrong = {}
    for path in [folder, *folder.rglob("*")]:
        st = path.lstat()
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            right = 0o700
        elif path.parent.name == "deploy" and path.suffix == ".sh":
            right = 0o700  # a launch script runs
        else:
            right = 0o600
        if mode != right:
            wrong[str(path.relative_to(folder.parent))] = oct(mode)
    return wrong


def test_a_lab_run_writes_its_files_0600_and_its_folders_0700(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(CONFIG.format(port=free_port()))
    runs = tmp_path / "runs"
    run = agent(
        tmp_path,
        *("run", "--goal", "beat baseline", "--config", "agent.toml"),
        *("--runs-dir", str(runs), "--run-id", "p1", "--max-steps", "12"),
        timeout=240,
    )
    assert run.returncode in (0, 3), run.stderr[-3000:]
    folder = runs / "p1"
    logs = sorted((folder / "logs").glob("server-*.log"))
    assert logs and (folder / "results").glob("*.json") and (folder / "report.md").is_file()
    said = agent(tmp_path, "say", "--runs-dir", str(runs), "p1", "hello", timeout=60)
    assert said.returncode == 0, said.stderr
    assert any((folder / "inbox").iterdir())
    assert modes(runs) == {}
    gpus = tmp_path / "gpus"
    assert not gpus.exists() or not any(gpus.iterdir()), list(gpus.iterdir())


def test_the_simulators_gpu_claims_are_private_and_a_dead_ones_go(tmp_path: Path) -> None:
    folder = tmp_path / "fleet" / "n1" / "gpus-box1"
    old = os.umask(0o022)
    try:
        mine = gpus.reserve("sim", 8000, 8, 1000, folder)
        # a pid that is gone (or another process's): the claim of a SIGKILLed server
        (folder / "999999.json").write_text('{"pid": 999999, "start": 1, "gpus": [0]}')
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(mine.stat().st_mode) == 0o600
    assert [r["pid"] for r in gpus.reservations(folder)] == [os.getpid()] * 8
    assert sorted(p.name for p in folder.iterdir()) == [mine.name]  # the dead one's is gone
    gpus.release(directory=folder)
    assert not any(folder.iterdir())


def test_a_copied_log_is_0600(tmp_path: Path) -> None:
    src = tmp_path / "server.log"
    src.write_text("up\n")
    old = os.umask(0o022)
    try:
        host = LocalHost(HostConfig(name="box", workdir=str(tmp_path)))
        asyncio.run(host.get(str(src), str(tmp_path / "run" / "logs" / "server.log")))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "run" / "logs").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "run" / "logs" / "server.log").stat().st_mode) == 0o600


def test_a_lab_clusters_temp_folder_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--fleet ray`'s lab cluster: its folder <tmp>/campaign-ray-<uid>/<pid> and the one above
    it are gone at its end (the one above stayed), unless another controller's folder is in it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = private_temp()
    parent = mine.parent
    assert stat.S_IMODE(parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(mine.stat().st_mode) == 0o700
    remove_temp(mine)
    assert not parent.exists()
    mine = private_temp()
    holder = subprocess.Popen(["sleep", "60"])  # a live controller's folder: not ours to remove
    try:
        (parent / str(holder.pid)).mkdir()
        remove_temp(mine)
        assert not mine.exists() and parent.is_dir()
    finally:
        holder.kill()
        holder.wait()
