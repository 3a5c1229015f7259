"""Against physics (issue 48): the known devices, the model's bytes, the bandwidth floor of each
level and a measured throughput's share of it (tools/domain/physics.py), and the simulator's own
physics as its /server_info states it."""

from __future__ import annotations

import json
import math
import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent.cli.bench import main as bench_main
from agent.session import Limits, start
from sim import profile
from sim.space import DEFAULT_LEVELS, default_space, flags_of
from sim.truth import (
    baseline_of,
    enumerate_space,
    floor_share,
    level_throughput,
    model_of,
)
from state.run import Run
from tests.test_energy import fake_smi, prints
from tests.test_sim_server import launch
from tools.base import ToolBox, ToolContext
from tools.bench.floor import engine_physics, stated_physics, with_floor
from tools.bench.schema import Point, Workload
from tools.domain import lab_truth
from tools.domain.config import ConfigError, HostConfig, lab_config, load_config
from tools.domain.physics import (
    DEVICES,
    HardwareConfig,
    ModelBytes,
    Physics,
    device_for,
    floor_of,
    hf_model_bytes,
    physics_from_json,
    share_of,
    unknown_device_line,
)
from tools.hosts.local import LocalHost
from tools.run_benchmark import RunBenchmark
from tools.servers.memory_probe import copy_bandwidth

# Llama-3.1-8B's config.json (the fields the KV cache is read from) and its parameter count
LLAMA_8B = {
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "intermediate_size": 14336,
}
LLAMA_8B_PARAMS = 8.03e9


def test_the_known_devices_each_figure_with_its_source() -> None:
    assert len(DEVICES) >= 8
    for d in DEVICES:
        assert d.mem_bw_gb_s > 0 and d.mem_gb > 0 and d.bf16_tflops > 0, d.name
        assert d.interconnect and "datasheet" in d.source, d.name
    assert len({d.name for d in DEVICES}) == len(DEVICES)


@pytest.mark.parametrize(
    ("smi", "name", "bw"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 3350.0),
        ("NVIDIA H100 PCIe", "H100 PCIe", 2000.0),
        ("NVIDIA H100 NVL", "H100 NVL", 3900.0),
        ("NVIDIA H200", "H200 SXM", 4800.0),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM", 1555.0),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM", 2039.0),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe", 1935.0),
        ("NVIDIA L4", "L4", 300.0),
        ("NVIDIA L40S", "L40S", 864.0),
        ("NVIDIA B200", "B200", 8000.0),
        ("H100 SXM", "H100 SXM", 3350.0),  # the table's own name
    ],
)
def test_a_device_is_found_by_its_nvidia_smi_name(smi: str, name: str, bw: float) -> None:
    device = device_for(smi)
    assert device is not None and device.name == name and device.mem_bw_gb_s == bw


def test_an_unknown_device_is_said_in_one_line_and_has_no_figures() -> None:
    assert device_for("NVIDIA GeForce RTX 4090") is None
    assert device_for("NVIDIA H100") is None  # no guess between SXM, PCIe and NVL
    line = unknown_device_line("NVIDIA GeForce RTX 4090")
    assert "\n" not in line and "RTX 4090" in line and "no floor" in line


def test_the_issue_s_hand_calculation_llama_8b_bf16_on_one_h100_sxm() -> None:
    """4.8 ms per token, 209 tok/s; SGLang's 158 tok/s is about 76 % of it."""
    model = hf_model_bytes(LLAMA_8B, "bfloat16", LLAMA_8B_PARAMS)
    assert model.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 heads of 128
    h100 = device_for("NVIDIA H100 80GB HBM3")
    assert h100 is not None
    physics = Physics(h100.name, 1, h100.mem_bw_gb_s, model, h100.source)
    floor = floor_of(physics, 1, 1, 0)
    assert floor.step_ms == pytest.approx(4.8, abs=0.05)
    assert floor.batch_tok_s == pytest.approx(209, abs=1) == floor.stream_tok_s
    assert share_of(158, floor) == pytest.approx(0.76, abs=0.01)
    # at C=64 of 1024-token contexts the KV cache is read 64 times: the stream's floor falls
    wide = floor_of(physics, 64, 512, 1024)
    assert wide.stream_tok_s < floor.stream_tok_s < wide.batch_tok_s
    assert wide.step_bytes == pytest.approx(16.06e9 + 64 * 1024 * 131072)


def test_a_mixture_of_experts_reads_the_experts_its_tokens_touch() -> None:
    moe = ModelBytes(100e9, 0.0, expert_bytes=90e9, experts=64, active_experts=4)
    assert moe.weights_read(1) == pytest.approx(10e9 + 90e9 * 4 / 64)
    assert moe.weights_read(2) == pytest.approx(10e9 + 90e9 * (1 - (60 / 64) ** 2))
    assert moe.weights_read(10_000) == pytest.approx(100e9)
    dense = ModelBytes(16e9, 0.0)
    assert dense.weights_read(1) == dense.weights_read(500) == 16e9
    config = {
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "hidden_size": 512,
        "n_routed_experts": 16,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 256,
        "first_k_dense_replace": 1,
    }
    read = hf_model_bytes(config, "bfloat16", 1e9)
    assert read.expert_bytes == 3 * 512 * 256 * 16 * 3 * 2.0
    assert (read.experts, read.active_experts) == (16, 2)


def test_a_description_from_json_is_checked() -> None:
    good = Physics("H100 SXM", 2, 3350.0, ModelBytes(16e9, 131072.0), "datasheet")
    assert physics_from_json(good.to_json()) == good
    for bad in (
        None,
        "x",
        {},
        {**good.to_json(), "mem_bw_gb_s": 0},
        {**good.to_json(), "mem_bw_gb_s": math.inf},
        {**good.to_json(), "weight_bytes": True},
        {**good.to_json(), "weight_bytes": "16e9"},
        {**good.to_json(), "devices": 0},
        {**good.to_json(), "expert_bytes": 17e9},
    ):
        assert physics_from_json(bad) is None, bad


def test_hardware_in_agent_toml_is_bounded_and_coherent() -> None:
    stated = HardwareConfig(device="NVIDIA H100 80GB HBM3", weights_gb=16.06, kv_kb_per_token=131)
    physics = stated.physics(devices=2)
    assert physics is not None and physics.devices == 2 and physics.mem_bw_gb_s == 3350.0
    assert "datasheet" in physics.source
    probe = HardwareConfig(mem_bw_gb_s=60.0, weights_gb=4.9, devices=1).physics(devices=8)
    assert probe is not None and probe.devices == 1 and probe.source.startswith("agent.toml")
    assert HardwareConfig(device="L4").physics(1) is None  # no weights: no floor
    for bad in (
        {"mem_bw_gb_s": math.inf},
        {"mem_bw_gb_s": math.nan},
        {"mem_bw_gb_s": -1.0},
        {"mem_bw_gb_s": True},
        {"mem_bw_gb_s": "3350"},
        {"mem_bw_gb_s": 1e12},
        {"weights_gb": 0.0},
        {"devices": 0},
        {"device": "NVIDIA GeForce RTX 4090"},
        {"device": "L4", "mem_bw_gb_s": 300.0},
        {"weights_gb": 10.0, "expert_weights_gb": 11.0, "experts": 8, "active_experts": 2},
        {"weights_gb": 10.0, "expert_weights_gb": 9.0, "experts": 8, "active_experts": 9},
        {"bandwidth": 3.0},
    ):
        with pytest.raises(ValidationError) as err:
            HardwareConfig.model_validate(bad)
        assert err.value.error_count() == 1, bad


def test_a_point_gets_its_floor_and_share_from_its_own_lengths() -> None:
    physics = Physics("L4", 1, 300.0, ModelBytes(3e9, 1000.0), "datasheet")
    wl = Workload(input_len=100, max_tokens=50)
    point = Point(
        max_concurrency=4,
        completed=10,
        total_input_tokens=1000,  # 100 each
        total_output_tokens=400,  # 40 each, not the 50 asked: the floor reads what was served
        output_throughput=200.0,
    )
    out = with_floor(point, physics, wl)
    floor = floor_of(physics, 4, 100, 40)
    assert out.floor_tok_s == pytest.approx(floor.batch_tok_s, rel=1e-4)
    assert out.floor_share == pytest.approx(200.0 / floor.batch_tok_s, rel=1e-3)
    assert with_floor(point, None, wl) == point
    failed = with_floor(point.model_copy(update={"level_failed": True}), physics, wl)
    assert failed.floor_tok_s is not None and failed.floor_share is None
    rate = wl.model_copy(update={"traffic": "rate"})
    assert with_floor(point, physics, rate).floor_tok_s is None


def test_the_simulator_never_decodes_faster_than_its_floor() -> None:
    """Its step model sits above the bandwidth it states, for every configuration of the
    reference space that does not speculate, at every level."""
    for config in enumerate_space(default_space()):
        if config.get("--speculative-algorithm"):
            continue
        model = model_of(config)
        for c in DEFAULT_LEVELS:
            assert model.decode_ms(c) > model.floor_ms(c, 512 + 256), (config, c)


def _server_info(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/server_info", timeout=10) as resp:
        info: dict[str, Any] = json.loads(resp.read())
    return info


def _argv(config: dict[str, Any]) -> list[str]:
    return [
        w for k, v in config.items() if v is not False for w in ([k] if v is True else [k, str(v)])
    ]


def sim_server_info(tmp_path: Path, *flags: str, name: str = "sim") -> dict[str, Any]:
    """The /server_info of the simulator started with `flags` (loaded at once), then stopped."""
    sim = launch(tmp_path, *flags, "--load-seconds", "0", name=name)
    try:
        sim.wait_ready()
        return _server_info(sim.url)
    finally:
        sim.kill_group()


def test_the_share_from_the_simulator_s_server_info_agrees_with_its_own_physics(
    tmp_path: Path,
) -> None:
    """The must-show: at every level of the reference space's baseline and optimum, the share
    computed from what the running simulator states on /server_info (tools/bench/floor.py, the
    agent's path) agrees with the simulator's own (sim.truth.floor_share) within 5 %."""
    space = default_space()
    optimum, _ = lab_truth.optimum(space)
    wl = Workload(input_len=512, max_tokens=512)
    assert set(optimum) == set(flags_of(space))
    for name, config in (("baseline", baseline_of(space)), ("optimum", optimum)):
        physics = engine_physics(sim_server_info(tmp_path, *_argv(config), name=name))
        assert physics is not None and physics.device == "H100 NVL" and physics.devices == 8
        model = model_of(config)
        for c in DEFAULT_LEVELS:
            truth = level_throughput(model, c)
            point = Point(
                max_concurrency=c,
                completed=c,
                total_input_tokens=512 * c,
                total_output_tokens=512 * c,
                output_throughput=truth,
            )
            reported = with_floor(point, physics, wl).floor_share
            own = floor_share(model, c)
            assert reported is not None and own > 0
            assert reported == pytest.approx(own, rel=0.05), (name, c)


def test_a_simulator_in_ideal_mode_or_a_box_without_bandwidth_states_no_physics(
    tmp_path: Path,
) -> None:
    sim = launch(tmp_path, "--ideal-itl-ms", "10", "--load-seconds", "0")
    try:
        sim.wait_ready()
        info = _server_info(sim.url)
    finally:
        sim.kill_group()
    assert "physics" not in info and engine_physics(info) is None
    # a profile that changes the box keeps none of the base box's bandwidth unless it states one
    other_box = profile.parse({"constants": {"gpus": 4, "gpu_mem_gb": 80.0}}).hardware
    assert other_box.mem_bw_gb_s == 0 and other_box.device == ""
    assert other_box.experts == 384  # the same model: its experts stay
    other_model = profile.parse({"constants": {"weights_gb": 16.0, "model": "x"}}).hardware
    assert other_model.experts == 0 and other_model.mem_bw_gb_s == 3900.0
    restated = profile.parse({"constants": {"gpus": 1, "mem_bw_gb_s": 300.0}}).hardware
    assert restated.mem_bw_gb_s == 300.0
    assert profile.parse({"constants": {"gpus": 8}}).hardware.mem_bw_gb_s == 3900.0  # unchanged


def test_agent_bench_shows_the_floor_and_each_point_s_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`agent bench` against the simulator: the table's floor columns, and in --json each
    point's floor and share (its own output tok/s over its floor) and the description used."""
    sim = launch(tmp_path, "--time-scale", "50", "--load-seconds", "0")
    out = tmp_path / "r.json"
    try:
        sim.wait_ready()
        argv = ["--url", sim.url, "--concurrency", "1,4", "--max-tokens", "16"]
        argv += ["--input-len", "32", "--requests-per-level", "8", "--json", str(out)]
        assert bench_main(argv) == 0
    finally:
        sim.kill_group()
    printed = capsys.readouterr().out
    assert "floor tok/s" in printed and "of floor" in printed
    assert "floor: 8 x H100 NVL at 3900 GB/s" in printed
    result = json.loads(out.read_text())
    physics = physics_from_json(result["physics"])
    assert physics is not None and physics.mem_bw_gb_s == 3900.0
    for p in result["points"]:
        c, done = p["max_concurrency"], p["completed"]
        floor = floor_of(physics, c, round(p["total_input_tokens"] / done), 16)
        assert p["floor_tok_s"] == pytest.approx(floor.batch_tok_s, rel=1e-4)
        # the share is stored to 4 decimals (floor.py): 5e-5 is 0.16 % of a 3 % share
        share = p["output_throughput"] / p["floor_tok_s"]
        assert p["floor_share"] == pytest.approx(share, abs=1e-4)
        assert 0 < p["floor_share"] < 1  # the simulated box decodes above its floor


# ------------------------------------ [hardware] with the device found by nvidia-smi on the host


@pytest.fixture
def gpubox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalHost:
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    return LocalHost(HostConfig(name="gpubox", workdir=str(tmp_path)))


async def test_the_device_is_found_by_nvidia_smi_s_name(gpubox: LocalHost, tmp_path: Path) -> None:
    fake_smi(tmp_path, prints("NVIDIA H100 80GB HBM3\nNVIDIA H100 80GB HBM3\n"))
    hardware = HardwareConfig(weights_gb=16.06, kv_kb_per_token=131.072)
    physics, why = await stated_physics(hardware, 2, gpubox)
    assert why is None and physics is not None
    assert (physics.device, physics.devices, physics.mem_bw_gb_s) == ("H100 SXM", 2, 3350.0)
    assert "H100 SXM column" in physics.source


async def test_an_unknown_device_on_the_host_is_one_line_and_no_floor(
    gpubox: LocalHost, tmp_path: Path
) -> None:
    fake_smi(tmp_path, prints("NVIDIA GeForce RTX 4090\n"))
    physics, why = await stated_physics(HardwareConfig(weights_gb=16.0), 1, gpubox)
    assert physics is None and why == unknown_device_line("NVIDIA GeForce RTX 4090")
    fake_smi(tmp_path, prints("No devices were found\n", 6))
    physics, why = await stated_physics(HardwareConfig(weights_gb=16.0), 1, gpubox)
    assert physics is None and why is not None and "no nvidia-smi" in why
    # stated: the host is not asked
    physics, why = await stated_physics(HardwareConfig(weights_gb=16.0, device="L4"), 1, gpubox)
    assert physics is not None and physics.mem_bw_gb_s == 300.0 and why is None
    assert await stated_physics(None, 1, gpubox) == (None, None)
    physics, why = await stated_physics(HardwareConfig(device="L4"), 1, gpubox)
    assert physics is None and why is not None and "weights_gb" in why


def test_hardware_in_agent_toml_loads(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[hardware]\ndevice = "H200"\nweights_gb = 16.06\nkv_kb_per_token = 131.072\n')
    config = load_config(path)
    hardware = config.hardware
    assert hardware is not None and hardware.physics(1) is not None
    run = start("beat baseline", config, "autopilot", tmp_path / "runs", None, Limits())
    run.close()
    assert load_config(run.path / "config.toml").hardware == hardware  # what resume reads
    path.write_text('[hardware]\ndevice = "RTX 4090"\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "\n" not in str(err.value) and "RTX 4090" in str(err.value)


async def test_run_benchmark_reads_the_floor_agent_toml_states(tmp_path: Path) -> None:
    """A server that states no physics (the simulator in ideal mode): the run's [hardware] gives
    the floor, in the tool's text for the model and in the saved result."""
    sim = launch(tmp_path, "--ideal-itl-ms", "5", "--load-seconds", "0", base=False)
    try:
        sim.wait_ready()
        hardware = HardwareConfig(mem_bw_gb_s=100.0, weights_gb=1.0, devices=1)
        ctx = ToolContext(
            run=Run.create(tmp_path / "runs", "r1"),
            config=lab_config().model_copy(update={"hardware": hardware}),
        )
        inp = {"url": sim.url, "concurrency": [2], "requests_per_level": 4, "max_tokens": 4}
        res, _ = await ToolBox([RunBenchmark()]).call(ctx, "run_benchmark", inp)
    finally:
        sim.kill_group()
    assert not res.is_error, res.text
    assert "of floor" in res.text and "floor: 1 x device at 100 GB/s each" in res.text
    saved = json.loads((ctx.run.path / "results" / f"{res.data['id']}.json").read_text())
    assert saved["physics"]["mem_bw_gb_s"] == 100.0
    (point,) = saved["points"]
    assert point["floor_step_ms"] == pytest.approx(10.0, rel=0.01)  # 1 GB at 100 GB/s
    assert point["floor_tok_s"] == pytest.approx(200.0, rel=0.01)  # 2 streams at 10 ms


def test_the_copy_probe_measures_something_and_says_how() -> None:
    probe = copy_bandwidth(seconds=0.05, buffer_bytes=8 << 20, threads=1)
    assert probe.gb_s > 0 and probe.threads == 1 and probe.rounds >= 2
    assert probe.buffer_bytes == 8 << 20 and "1 threads, 8 MiB each" in probe.describe()


def test_agent_bench_reads_the_floor_from_an_agent_toml_s_hardware(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = tmp_path / "agent.toml"
    toml.write_text("[hardware]\nmem_bw_gb_s = 100.0\nweights_gb = 1.0\n")
    bare = tmp_path / "bare.toml"
    bare.write_text("[budget]\nmax_steps = 5\n")
    sim = launch(tmp_path, "--ideal-itl-ms", "5", "--load-seconds", "0", base=False)
    try:
        sim.wait_ready()
        argv = ["--url", sim.url, "--concurrency", "1", "--max-tokens", "4"]
        argv += ["--requests-per-level", "3", "--json", str(tmp_path / "r.json")]
        assert bench_main([*argv, "--hardware", str(toml)]) == 0
        assert "of floor" in capsys.readouterr().out
        (point,) = json.loads((tmp_path / "r.json").read_text())["points"]
        assert point["floor_tok_s"] == pytest.approx(100.0)  # 1 GB at 100 GB/s: 10 ms a step
        assert bench_main([*argv, "--hardware", str(bare)]) == 0
        printed = capsys.readouterr().out
        assert "of floor" not in printed and "has no [hardware]" in printed
    finally:
        sim.kill_group()
    toml.write_text('[hardware]\ndevice = "RTX 4090"\n')
    assert bench_main(["--url", "http://127.0.0.1:1", "--hardware", str(toml)]) == 2
    assert "RTX 4090" in capsys.readouterr().err
