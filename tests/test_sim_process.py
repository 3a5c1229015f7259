"""The simulator's process behaviour: startup failures and the zombie workers."""

from __future__ import annotations

import errno
import os
import re
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sim.space import DEFAULT_BASE_FLAGS
from tests.test_sim_server import Sim, launch, tracked


@pytest.fixture
def sims() -> Iterator[list[Sim]]:
    yield from tracked()


def port_taken(port: int) -> bool:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError as err:
        return err.errno == errno.EADDRINUSE
    finally:
        s.close()
    return False


def exited(sim: Sim, timeout: float = 30.0) -> int:
    rc = sim.proc.wait(timeout=timeout)
    deadline = time.monotonic() + 5
    while sim.group() and time.monotonic() < deadline:  # workers are taken along
        time.sleep(0.02)
    assert not sim.group(), "a failed start left workers behind"
    assert sim.gpus() == []
    return rc


def test_custom_all_reduce_on_pcie_hangs_then_fails(tmp_path: Path, sims: list[Sim]) -> None:
    base = [f for f in DEFAULT_BASE_FLAGS if f != "--disable-custom-all-reduce"]
    sim = launch(tmp_path, *base, "--load-seconds", "0.1", "--hang-seconds", "2.0", base=False)
    sims.append(sim)
    sim.wait_for("Capture cuda graph begin")
    began = time.monotonic()
    assert exited(sim) == 1
    # it hung first: a lower bound (load only lengthens it), with a second's room for a late
    # look at the log
    assert time.monotonic() - began > 1.0
    text = sim.text()
    assert "custom allreduce timed out" in text and "Traceback" in text
    assert "fired up" not in text


def test_mem_fraction_too_high_is_cuda_oom(tmp_path: Path, sims: list[Sim]) -> None:
    sim = launch(tmp_path, "--load-seconds", "0.1", "--mem-fraction-static", "0.95")
    sims.append(sim)
    assert exited(sim) == 1
    assert "torch.OutOfMemoryError: CUDA out of memory" in sim.text()
    assert "--mem-fraction-static to a smaller value" in sim.text()


def test_too_few_gpus_for_the_weights_fails_while_loading(tmp_path: Path, sims: list[Sim]) -> None:
    sim = launch(tmp_path, "--load-seconds", "0.2", "--tp", "4")
    sims.append(sim)
    assert exited(sim) == 1
    text = sim.text()
    assert "Loading safetensors checkpoint shards" in text and "CUDA out of memory" in text
    assert "100% Completed" not in text


def test_port_in_use(tmp_path: Path, sims: list[Sim]) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        sim = launch(tmp_path, "--load-seconds", "0.1", "--port", str(port))
        sims.append(sim)
        assert exited(sim) == 1
        assert "Address already in use" in sim.text()
    finally:
        holder.close()


def test_bad_flag_is_one_line_usage_error(tmp_path: Path, sims: list[Sim]) -> None:
    sim = launch(tmp_path, "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3")
    sims.append(sim)
    assert sim.proc.wait(timeout=30) == 2
    assert "set --speculative-num-steps, --speculative-eagle-topk" in sim.text()


def test_sigterm_to_main_leaves_zombies_until_the_group_dies(
    tmp_path: Path, sims: list[Sim]
) -> None:
    sim = launch(tmp_path, "--load-seconds", "0.1")
    sims.append(sim)
    sim.wait_ready()
    workers = set(sim.group()) - {sim.proc.pid}
    names = {Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] for pid in workers}
    assert names == {b"sglang::scheduler", b"sglang::detokenizer"}
    held = sim.gpus()
    assert len(held) == 8 and {r["process_name"] for r in held} == {"sglang::scheduler"}
    assert all(int(str(r["used_memory_mib"])) > 60_000 for r in held)

    os.kill(sim.proc.pid, signal.SIGTERM)  # the main process alone
    sim.proc.wait(timeout=30)
    time.sleep(0.3)
    assert set(sim.group()) == workers  # the workers outlive it ...
    assert port_taken(sim.port)  # ... keep the port ...
    assert len(sim.gpus()) == 8  # ... and the GPU memory

    os.killpg(sim.proc.pid, signal.SIGTERM)  # only the group kill frees everything
    deadline = time.monotonic() + 10
    while sim.group() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not sim.group()
    assert not port_taken(sim.port)
    assert sim.gpus() == []


def test_sigkilled_workers_leave_stale_entries_that_gpus_drops(
    tmp_path: Path, sims: list[Sim]
) -> None:
    sim = launch(tmp_path, "--load-seconds", "0.1")
    sims.append(sim)
    sim.wait_ready()
    assert len(sim.gpus()) == 8
    sim.kill_group()  # SIGKILL: no handler runs, the registry file stays behind
    assert any(sim.gpu_dir.glob("*.json"))
    assert sim.gpus() == []  # its pid is gone, so is its memory
    assert not any(sim.gpu_dir.glob("*.json"))


@pytest.mark.parametrize("flag", ["--ideal-ttft-ms"])
def test_ideal_mode_fixed_latencies(tmp_path: Path, sims: list[Sim], flag: str) -> None:
    import httpx

    sim = launch(
        tmp_path, "--load-seconds", "0", flag, "40", "--ideal-itl-ms", "5", "--time-scale", "1"
    )
    sims.append(sim)
    sim.wait_ready()
    assert set(sim.group()) == {sim.proc.pid}  # no workers in ideal mode
    began = time.perf_counter()
    body = {"prompt": "x", "max_tokens": 21, "ignore_eos": True}
    out = httpx.post(sim.url + "/v1/completions", json=body, timeout=60).json()
    elapsed = time.perf_counter() - began
    assert out["usage"]["completion_tokens"] == 21
    # 40 ms + 20 x 5 ms at least: the fixed latencies are slept, so load cannot shorten them;
    # an upper bound would measure the machine, not the simulator (the ideal path served it:
    # its counters, and no workers above)
    assert elapsed >= 0.14
    info = httpx.get(sim.url + "/server_info", timeout=60).json()
    assert info["sim"]["ideal"] is True
    metrics = httpx.get(sim.url + "/metrics", timeout=60).text
    assert re.search(r"^sglang:generation_tokens_total\{.*\} 21$", metrics, re.M), metrics
