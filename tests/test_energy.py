"""Energy per level (tools/bench/energy.py): the power read on the server's host with nvidia-smi
(here a small executable placed first on PATH that prints exactly what nvidia-smi prints - this
machine has no GPU), the simulator's modelled power through real sweeps against the real
simulator, and a server whose host reports no power: no joules per token, and a note saying so."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent.cli.bench import main as bench_main
from sim.hardware import REFERENCE
from sim.metrics import modelled_power
from sim.space import DEFAULT_BASE_FLAGS
from state.run import Run
from tests.foreign_server import ForeignServer
from tests.served_sim import served_sim
from tools.base import ToolBox, ToolContext
from tools.bench import energy
from tools.bench.energy import HostPower, PowerTimeout, PowerUnavailable, parse_power
from tools.bench.schema import Point, Workload
from tools.bench.sweep import SweepSpec, run_sweep
from tools.domain.config import HostConfig, lab_config
from tools.hosts import HostPool
from tools.hosts.local import LocalHost
from tools.run_benchmark import RunBenchmark

SCALE = 10
# what `nvidia-smi --query-gpu=index,power.draw --format=csv,noheader,nounits` prints
TWO_GPUS = "0, 71.23\n1, 68.77\n"
EIGHT_GPUS = "".join(f"{i}, {300.5 + i:.2f}\n" for i in range(8))
NO_READING = "0, [N/A]\n1, [N/A]\n"
NOT_SUPPORTED = "0, [Not Supported]\n"


# ------------------------------------------------------------------------------- the parser


def test_several_gpus_are_summed() -> None:
    assert parse_power(TWO_GPUS, None) == pytest.approx(140.0)
    assert parse_power(EIGHT_GPUS, None) == pytest.approx(sum(300.5 + i for i in range(8)))


def test_only_the_servers_gpus_count() -> None:
    assert parse_power(EIGHT_GPUS, [0, 1]) == pytest.approx(300.5 + 301.5)
    assert parse_power(EIGHT_GPUS, [7]) == pytest.approx(307.5)
    with pytest.raises(PowerUnavailable, match="GPU 9"):
        parse_power(TWO_GPUS, [9])


@pytest.mark.parametrize("text", [NO_READING, NOT_SUPPORTED, "", "No devices were found\n"])
def test_no_power_draw_is_no_reading(text: str) -> None:
    with pytest.raises(PowerUnavailable):
        parse_power(text, None)


def test_one_gpu_without_a_reading_spoils_the_sum() -> None:
    with pytest.raises(PowerUnavailable, match=r"\[N/A\]"):
        parse_power("0, 71.00\n1, [N/A]\n", None)
    assert parse_power("0, 71.00\n1, [N/A]\n", [0]) == pytest.approx(71.0)  # not the server's


def test_the_gpus_of_a_launch() -> None:
    assert energy.launch_gpus("CUDA_VISIBLE_DEVICES=2,3 vllm serve m --tp 2") == [2, 3]
    assert energy.launch_gpus("vllm serve m") is None  # all of them
    assert energy.launch_gpus(None) is None
    assert energy.launch_gpus("CUDA_VISIBLE_DEVICES=GPU-5f2c vllm serve m") is None  # UUIDs


# ---------------------------------------------------- nvidia-smi on a host (a fake, first on PATH)


def fake_smi(folder: Path, body: str) -> None:
    path = folder / "nvidia-smi"
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def prints(text: str, code: int = 0) -> str:
    return f"cat <<'OUT'\n{text}OUT\nexit {code}\n"


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalHost:
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    return LocalHost(HostConfig(name="gpubox", workdir=str(tmp_path)))


async def test_the_host_reads_its_gpus(host: LocalHost, tmp_path: Path) -> None:
    fake_smi(tmp_path, prints(EIGHT_GPUS))
    assert await HostPower(host).read() == pytest.approx(sum(300.5 + i for i in range(8)))
    assert await HostPower(host, [1, 2]).read() == pytest.approx(301.5 + 302.5)


async def test_a_non_zero_exit_is_no_reading(host: LocalHost, tmp_path: Path) -> None:
    fake_smi(tmp_path, prints("No devices were found\n", 6))
    with pytest.raises(PowerUnavailable, match="No devices were found"):
        await HostPower(host).read()


async def test_na_on_the_host_is_no_reading(host: LocalHost, tmp_path: Path) -> None:
    fake_smi(tmp_path, prints(NO_READING))
    with pytest.raises(PowerUnavailable, match=r"\[N/A\]"):
        await HostPower(host).read()


async def test_no_nvidia_smi_is_no_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    only = tmp_path / "bin"
    only.mkdir()
    (only / "bash").symlink_to(Path("/bin/bash").resolve())
    monkeypatch.setenv("PATH", str(only))
    host = LocalHost(HostConfig(name="cpubox", workdir=str(tmp_path)))
    with pytest.raises(PowerUnavailable, match="nvidia-smi"):
        await HostPower(host).read()


async def test_a_hang_past_the_deadline_is_a_missing_sample(
    host: LocalHost, tmp_path: Path
) -> None:
    fake_smi(tmp_path, "exec sleep 600\n")
    async with asyncio.timeout(60):  # the call's own deadline ends it, not this one
        with pytest.raises(PowerTimeout):
            await HostPower(host, call_s=1.0).read()


# --------------------------------------------------------------------------- the formula


def test_joules_per_token_is_energy_over_tokens() -> None:
    assert energy.joules_per_token(400.0, 10.0, 2000) == pytest.approx(2.0)
    assert energy.joules_per_token(400.0, 10.0, 0) is None  # nothing generated
    assert energy.joules_per_token(None, 10.0, 100) is None


def test_the_mean_is_over_the_levels_own_window() -> None:
    power = energy.LevelPower(watts=[560.0, 2000.0, 2000.0, 560.0], at=[0.0, 1.0, 2.0, 3.0])
    assert power.during(0.5, 2.5) == [2000.0, 2000.0]  # not the idle moments around it
    assert power.during(5.0, 6.0) == power.watts  # a level between two samples: all of them


# -------------------------------------------------------------------- the simulator's power


def test_the_modelled_power_doubles_with_its_watts() -> None:
    r = REFERENCE
    double = dataclasses.replace(r, idle_w=2 * r.idle_w, busy_w=2 * r.busy_w, peak_w=2 * r.peak_w)
    for running in (0, 1, 30, 200, 1000):
        one = modelled_power(REFERENCE, 8, running, 160)
        assert modelled_power(double, 8, running, 160) == pytest.approx(2 * one)
    assert modelled_power(REFERENCE, 8, 0, 160) == 8 * REFERENCE.idle_w
    assert modelled_power(REFERENCE, 8, 500, 160) == 8 * REFERENCE.peak_w
    assert modelled_power(REFERENCE, 4, 1, 160) < modelled_power(REFERENCE, 8, 1, 160)


def spec(url: str, levels: list[int], **kw: Any) -> SweepSpec:
    wl = Workload(input_len=64, max_tokens=kw.pop("max_tokens", 128), warmup_requests=1)
    return SweepSpec(url=url, levels=levels, workload=wl, processes=0, **kw)


def sim_command(*extra: str) -> list[str]:
    base = [sys.executable, "-m", "sim", *DEFAULT_BASE_FLAGS, "--seed", "1", "--noise", "0"]
    return [*base, "--time-scale", str(SCALE), *extra]


def check_energy(p: dict[str, Any], source: str) -> None:
    point = Point.model_validate(p)
    assert point.power_source == source and point.power_samples and point.power_samples > 0
    assert point.power_w is not None and point.power_w > 0
    assert point.j_per_token is not None and point.j_per_token > 0
    # the level's energy over its tokens, in the time base of its tok/s
    assert point.j_per_token == pytest.approx(point.power_w / point.output_throughput, rel=1e-4)


def flat_box(folder: Path, watts: float) -> str:
    """A profile of the reference box whose GPUs draw `watts` each, busy or not: its mean power is
    the same whatever the samples caught, so two runs differ only in their tokens."""
    path = folder / f"flat{watts:g}.toml"
    constants = "".join(f"{k} = {watts}\n" for k in ("idle_w", "busy_w", "peak_w"))
    path.write_text(f'hardware = "reference"\n[constants]\n{constants}')
    return str(path)


async def test_the_sims_power_gives_joules_per_token_and_doubles(tmp_path: Path) -> None:
    with (
        served_sim(sim_command(), "energy-model") as model,
        served_sim(sim_command("--profile", flat_box(tmp_path, 200)), "energy-1x") as one,
        served_sim(sim_command("--profile", flat_box(tmp_path, 400)), "energy-2x") as two,
    ):
        # side by side: the same machine load on all three
        m, a, b = await asyncio.gather(*(run_sweep(spec(u, [1, 8])) for u in (model, one, two)))
    for out in (m, a, b):
        assert not any(n.startswith(energy.NO_POWER) for n in out.notes), out.notes
        for p in out.points:
            check_energy(p, "simulator")
    for p in m.points:  # the load model: between the idle and the full GPUs (8 of them: --tp 8)
        assert 8 * REFERENCE.idle_w <= p["power_w"] <= 8 * REFERENCE.peak_w
    assert [p["power_w"] for p in a.points + b.points] == [1600.0] * 2 + [3200.0] * 2
    for pa, pb in zip(a.points, b.points, strict=True):
        # twice the watts: twice the joules for each token at the same tok/s. The two servers'
        # tok/s differ with the machine's load (a time-scaled server lags), so per unit of it:
        per_tok_s = [p["j_per_token"] * p["output_throughput"] for p in (pa, pb)]
        assert per_tok_s[1] == pytest.approx(2 * per_tok_s[0], rel=1e-3), (pa, pb)
    # eight streams share the GPUs' watts: far fewer joules per token than one
    assert m.points[1]["j_per_token"] < 0.5 * m.points[0]["j_per_token"]


# ------------------------------------------------------- a server whose host reports power or not


@pytest.fixture
async def foreign() -> Any:
    server = ForeignServer("llama")  # no /metrics, no modelled power
    url = await server.start()
    yield url
    await server.stop()


async def test_a_host_without_a_reading_gives_no_figure_and_a_note(
    foreign: str, host: LocalHost, tmp_path: Path
) -> None:
    fake_smi(tmp_path, prints(NO_READING))
    out = await run_sweep(spec(foreign, [1, 2], max_tokens=8, power=HostPower(host)))
    assert [p["failed"] for p in out.points] == [0, 0]
    assert all("j_per_token" not in p and "power_w" not in p for p in out.points)
    notes = [n for n in out.notes if n.startswith(energy.NO_POWER)]
    assert len(notes) == 1 and "gpubox" in notes[0] and "[N/A]" in notes[0], out.notes


async def test_no_host_known_gives_no_figure_and_a_note(foreign: str) -> None:
    out = await run_sweep(spec(foreign, [1], max_tokens=8))
    assert all("j_per_token" not in p for p in out.points)
    notes = [n for n in out.notes if n.startswith(energy.NO_POWER)]
    assert len(notes) == 1, out.notes


async def test_the_hosts_gpus_give_joules_per_token(
    foreign: str, host: LocalHost, tmp_path: Path
) -> None:
    fake_smi(tmp_path, prints(EIGHT_GPUS))
    power = HostPower(host, [0, 1])
    out = await run_sweep(spec(foreign, [1, 2], max_tokens=64, power=power))
    assert not any(n.startswith(energy.NO_POWER) for n in out.notes), out.notes
    for p in out.points:
        check_energy(p, "nvidia-smi")
        assert p["power_w"] == pytest.approx(300.5 + 301.5)
        assert p["power_gpus"] == "0,1"


# ------------------------------------------------------------------------------ agent bench


@pytest.fixture
def foreign_process() -> Any:
    """A server that is not the simulator (no modelled power), as a process of its own."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "tests.foreign_server", "llama", str(port)])
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


def header_of(printed: str) -> str:
    """The sweep table's header line in what `agent bench` printed."""
    return next(line for line in printed.splitlines() if "ok/fail" in line)


def test_agent_bench_reads_this_machines_gpus_when_told(
    foreign_process: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    fake_smi(tmp_path, prints(EIGHT_GPUS))
    argv = [
        "--url",
        foreign_process,
        "--concurrency",
        "1",
        "--max-tokens",
        "16",
        "--processes",
        "0",
    ]
    out = tmp_path / "r.json"
    assert bench_main([*argv, "--gpu-power", "6,7", "--json", str(out)]) == 0
    point = json.loads(out.read_text())["points"][0]
    check_energy(point, "nvidia-smi")
    assert point["power_w"] == pytest.approx(306.5 + 307.5) and point["power_gpus"] == "6,7"
    assert "J/token" in header_of(capsys.readouterr().out)
    assert bench_main([*argv, "--json", str(out)]) == 0  # not told: not read, and said why
    assert "J/token" not in header_of(capsys.readouterr().out)  # no reading, no column
    result = json.loads(out.read_text())
    assert result["points"][0]["j_per_token"] is None  # the file keeps every field
    assert any(n.startswith(energy.NO_POWER) and "--gpu-power" in n for n in result["notes"])


def test_agent_bench_refuses_a_bad_gpu_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["--url", "http://127.0.0.1:9", "--gpu-power", "first"]) == 2
    assert "'all' or GPU indices such as 0,1" in capsys.readouterr().err


# ------------------------------------------- run_benchmark: the server's host, its launch's GPUs


async def test_run_benchmark_reads_the_servers_host_and_its_gpus(
    foreign: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server started on host `local` with CUDA_VISIBLE_DEVICES=1,2: nvidia-smi is run on that
    host through the run's host pool, and only GPUs 1 and 2 are summed."""
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    fake_smi(tmp_path, prints(EIGHT_GPUS))
    port = int(foreign.rsplit(":", 1)[1])
    run = Run.create(tmp_path / "runs", "r1")
    command = f"CUDA_VISIBLE_DEVICES=1,2 python -m tests.foreign_server llama {port}"
    run.append("server_started", name="gpu", host="local", port=port, command=command, flags={})
    config = lab_config()
    config.bench = config.bench.model_copy(update={"requests_per_level": 4, "warmup_requests": 1})
    hosts = HostPool(config)
    ctx = ToolContext(run=run, config=config, hosts=hosts)
    try:
        inp = {"server": "gpu", "concurrency": [1], "input_len": 16, "max_tokens": 32}
        res, _ = await ToolBox([RunBenchmark()]).call(ctx, "run_benchmark", inp)
    finally:
        await hosts.close()
        run.close()
    assert not res.is_error, res.text
    saved = json.loads(Path(res.data["path"]).read_text())
    point = saved["points"][0]
    check_energy(point, "nvidia-smi")
    assert point["power_w"] == pytest.approx(301.5 + 302.5) and point["power_gpus"] == "1,2"
    header, row = res.text.splitlines()[1:3]  # the model's table: J/token beside tok/s
    assert header.split()[:5] == ["C", "ok/fail", "out", "tok/s", "J/token"], header
    assert row.split()[3] == f"{point['j_per_token']:.2f}", res.text
    assert not any(n.startswith(energy.NO_POWER) for n in saved["notes"]), saved["notes"]
