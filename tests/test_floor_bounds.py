"""Against physics, the second increment (issue 48): the floor's bytes follow the dtypes a
configuration serves in (vLLM's --dtype and --kv-cache-dtype, llama.cpp's --cache-type-k/-v, as
each engine's profile spells and defaults them), the bounds that take over at high batch
(compute, the tensor-parallel all-reduce), the vLLM lab's [hardware] from its model folder, and
where they show: the report's bound column and headroom statement, `agent watch`."""

from __future__ import annotations

import asyncio
import json
import math
import struct
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agent.cli.bench import main as bench_main
from agent.report import gather, render_files
from agent.session import Limits, start
from agent.view.watch import watch_view
from state.events import read_events
from tests.conftest import plain_config
from tests.report_session import bench_in_run
from tests.test_sim_server import launch
from tools.bench.floor import served_of, stated_physics
from tools.domain import engines
from tools.domain.config import load_config
from tools.domain.config_toml import to_toml
from tools.domain.physics import (
    HardwareConfig,
    ModelBytes,
    Physics,
    device_for,
    floor_of,
    gguf_model_bytes,
    headroom,
    hf_model_bytes,
    physics_from_json,
)
from tools.servers.hf_model import ModelFilesError, model_folder_bytes
from tools.servers.llama_cpp.lab import hardware_table as gguf_table
from tools.servers.memory_probe import CopyProbe
from tools.servers.vllm_cpu.lab import hardware_table

VLLM = "python -m vllm.entrypoints.openai.api_server --model /m --max-model-len 2048"
# the vLLM lab's model (tools/servers/vllm_cpu/tiny_model.py): a float32 checkpoint
LAB = HardwareConfig(
    mem_bw_gb_s=10.0,
    devices=1,
    weights_gb=0.015737856,
    weights_dtype="float32",
    kv_kb_per_token=8.192,
    kv_dtype="float32",
)


def vllm_floor(hardware: HardwareConfig, flags: dict[str, object]) -> Physics:
    physics = hardware.physics(1, None, served_of(engines.precision("vllm"), VLLM, flags))
    assert physics is not None
    return physics


def test_the_floor_follows_vllm_s_dtype_and_kv_cache_dtype() -> None:
    """vLLM serves a float32 checkpoint in 16 bits unless --dtype float32 says otherwise
    (vllm/config/model.py _resolve_auto_dtype); an auto KV cache is the served dtype; fp8 is
    one byte an element."""
    bf16 = vllm_floor(LAB, {"--dtype": "bfloat16"})
    assert bf16.model.weight_bytes == pytest.approx(15_737_856 / 2)
    assert bf16.model.kv_bytes_per_token == pytest.approx(4096)
    assert (bf16.model.weights_dtype, bf16.model.kv_dtype) == ("bfloat16", "bfloat16")
    assert vllm_floor(LAB, {}).model == bf16.model  # auto: the float32 checkpoint in 16 bits
    fp32 = vllm_floor(LAB, {"--dtype": "float32"})
    assert fp32.model.weight_bytes == pytest.approx(15_737_856)
    assert fp32.model.kv_bytes_per_token == pytest.approx(8192)
    fp8 = vllm_floor(LAB, {"--dtype": "bfloat16", "--kv-cache-dtype": "fp8"})
    assert fp8.model.weight_bytes == bf16.model.weight_bytes
    assert fp8.model.kv_bytes_per_token == pytest.approx(2048)
    # the hand calculation of docs/physics.md: C=1, 64 tokens in and 64 out (96 of context)
    at_one = floor_of(bf16, 1, 64, 64)
    assert at_one.step_ms == pytest.approx((15_737_856 / 2 + 4096 * 96) / 10e9 * 1000)
    assert floor_of(fp32, 1, 64, 64).batch_tok_s == pytest.approx(at_one.batch_tok_s / 2)
    # the flag in the launch command counts as much as the flag under test, which wins
    command = served_of(engines.precision("vllm"), VLLM + " --dtype float32", {})
    assert command is not None and command.weights == "float32"
    flags = served_of(engines.precision("vllm"), VLLM + " --dtype float32", {"--dtype": "half"})
    assert flags is not None and flags.weights == "half"


def test_the_floor_follows_llama_cpp_s_cache_types_and_not_its_weights() -> None:
    gguf = HardwareConfig(
        mem_bw_gb_s=10.0, weights_gb=0.0196, kv_kb_per_token=4.096, kv_dtype="f16"
    )
    llama = engines.precision("llama.cpp")
    plain = gguf.physics(1, None, served_of(llama, "llama-server -m t.gguf", {}))
    q8 = gguf.physics(1, None, served_of(llama, "llama-server -m t.gguf", {"-ctk": "q8_0"}))
    assert plain is not None and q8 is not None
    assert plain.model.kv_bytes_per_token == pytest.approx(4096)
    # K in q8_0 (32 values in 34 bytes), V in the default f16
    assert q8.model.kv_bytes_per_token == pytest.approx(4096 * (34 / 32 + 2) / 4)
    assert q8.model.weight_bytes == plain.model.weight_bytes == pytest.approx(19.6e6)
    # the lab's [hardware] states its KV cache in f16, so the lab's cache types count
    table = gguf_table(gguf_model_bytes(19.6e6, 4, 4, 64), CopyProbe(10.0, 2, 1 << 27, 5))
    lab = HardwareConfig.model_validate(table).physics(
        1, None, served_of(llama, "x", {"-ctk": "q8_0"})
    )
    assert lab is not None and lab.model.kv_bytes_per_token == pytest.approx(
        q8.model.kv_bytes_per_token
    )
    # a figure whose dtype is not stated stays as stated, whatever the flags
    bare = HardwareConfig(mem_bw_gb_s=10.0, weights_gb=1.0, kv_kb_per_token=4.096)
    fixed = bare.physics(1, None, served_of(llama, "llama-server", {"-ctk": "q4_0"}))
    assert fixed is not None and fixed.model.kv_bytes_per_token == pytest.approx(4096)


async def test_a_dtype_without_a_size_is_one_line_and_no_floor() -> None:
    served = served_of(engines.precision("vllm"), VLLM, {"--kv-cache-dtype": "nvfp4"})
    physics, why = await stated_physics(LAB, 1, None, served=served)
    assert physics is None and why is not None and "\n" not in why
    assert "'nvfp4'" in why and "no floor" in why
    with pytest.raises(ValueError, match="no size"):
        HardwareConfig(weights_gb=1.0, mem_bw_gb_s=1.0, weights_dtype="int3")


def test_compute_takes_over_at_the_batch_a_hand_calculation_says() -> None:
    """Llama-3.1-8B in BF16 on one H100 SXM: a step reads 16.06 GB (4.79 ms at 3,350 GB/s) and
    multiplies 2 x 8.03e9 FLOPs a token (16.2 us at 989 TFLOPS): compute binds past
    4.79 / 0.0162 = 295 sequences (a context of one token, so the KV cache adds nothing)."""
    config = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
              "hidden_size": 4096, "intermediate_size": 14336}  # fmt: skip
    h100 = device_for("H100 SXM")
    assert h100 is not None
    model = hf_model_bytes(config, "bfloat16", 8.03e9)
    physics = Physics(h100.name, 1, h100.mem_bw_gb_s, model, "", peak_tflops=h100.bf16_tflops)
    memory_ms = 16.06e9 / 3350e9 * 1000
    token_ms = 2 * 8.03e9 / 989e12 * 1000
    crossing = memory_ms / token_ms
    assert 290 < crossing < 300
    below, above = floor_of(physics, 280, 1, 0), floor_of(physics, 310, 1, 0)
    assert below.bound == "memory" and above.bound == "compute"
    assert above.step_ms == pytest.approx(310 * token_ms) == above.compute_ms
    assert above.memory_ms < above.step_ms and above.link_ms == 0.0  # one device: no link
    # without a named dtype the parameters are not known: no compute bound, never a guess
    unnamed = Physics(h100.name, 1, 3350.0, ModelBytes(16.06e9, 0.0), "", peak_tflops=989.0)
    assert floor_of(unnamed, 10_000, 1, 0).bound == "memory"


def test_the_all_reduce_binds_a_pcie_box_at_high_batch() -> None:
    """A 70B-shaped model over 8 H100 NVL linked by PCIe Gen5 (64 GB/s a direction): each
    token all-reduces 80 layers x 2 x 2 (7/8) x 8192 x 2 bytes = 4.59 MB per device, 71.7 us
    at 64 GB/s; the 141 GB of weights over 8 devices take 4.52 ms at 3,900 GB/s."""
    nvl = device_for("H100 NVL")
    assert nvl is not None and nvl.link_gb_s == 64.0
    model = ModelBytes(141e9, 0.0, weights_dtype="bfloat16", hidden=8192, layers=80)
    physics = Physics(nvl.name, 8, nvl.mem_bw_gb_s, model, "", 0, nvl.bf16_tflops, nvl.link_gb_s)
    per_token_s = 80 * 2 * 2 * 7 / 8 * 8192 * 2 / 64e9
    assert physics.link_s(1) == pytest.approx(per_token_s)
    assert floor_of(physics, 1, 512, 512).bound == "memory"
    wide = floor_of(physics, 250, 1, 0)
    assert wide.bound == "interconnect" and wide.step_ms == pytest.approx(250 * per_token_s * 1e3)
    assert wide.compute_ms < wide.step_ms and wide.memory_ms < wide.step_ms
    assert physics_from_json(physics.to_json()) == physics  # the figures travel with a result


def safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A safetensors file whose header declares `tensors` (the data zeros: only the header is
    read)."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = {"F32": 4, "BF16": 2}[dtype] * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def lab_model(folder: Path, tied: bool) -> Path:
    folder.mkdir(parents=True)
    config = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "hidden_size": 64, "intermediate_size": 128, "tie_word_embeddings": tied}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    tensors = {"model.embed_tokens.weight": ("F32", [100, 64])}
    if not tied:
        tensors["lm_head.weight"] = ("F32", [100, 64])
    for i in range(2):
        tensors[f"model.layers.{i}.self_attn.q_proj.weight"] = ("F32", [64, 64])
        tensors[f"model.layers.{i}.mlp.up_proj.weight"] = ("F32", [128, 64])
    safetensors(folder / "model.safetensors", tensors)
    return folder


def test_a_model_folder_s_bytes_from_its_headers(tmp_path: Path) -> None:
    """What a step reads: every tensor but the embeddings, of which it looks up a row - unless
    they are tied to the head, which reads them whole."""
    layers = 2 * (64 * 64 + 128 * 64)
    untied = model_folder_bytes(lab_model(tmp_path / "untied", tied=False))
    assert untied.weight_bytes == 4 * (100 * 64 + layers)
    assert (untied.weights_dtype, untied.kv_dtype) == ("float32", "float32")
    assert untied.kv_bytes_per_token == 2 * 2 * 2 * 16 * 4  # K, V x 2 layers x 2 heads of 16
    assert (untied.hidden, untied.layers) == (64, 2)
    tied = model_folder_bytes(lab_model(tmp_path / "tied", tied=True))
    assert tied.weight_bytes == untied.weight_bytes  # the embeddings read once, as the head
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelFilesError, match=r"config\.json"):
        model_folder_bytes(tmp_path / "empty")


def test_the_vllm_lab_s_hardware_table_loads_and_follows_dtype(tmp_path: Path) -> None:
    """`agent lab setup vllm` writes [hardware] from the copy probe and the model folder; as
    agent.toml states it, a float32 configuration's floor is half the bfloat16 one's."""
    model = model_folder_bytes(lab_model(tmp_path / "model", tied=False))
    table = hardware_table(model, CopyProbe(12.5, 2, 128 << 20, 9))
    toml = tmp_path / "agent.toml"
    server = {"engine": "vllm", "command": VLLM}
    toml.write_text(to_toml({"server": server, "hardware": table}))
    hardware = load_config(toml).hardware
    assert hardware is not None and hardware.mem_bw_gb_s == 12.5
    bf16 = floor_of(vllm_floor(hardware, {"--dtype": "bfloat16"}), 1, 64, 64)
    fp32 = floor_of(vllm_floor(hardware, {"--dtype": "float32"}), 1, 64, 64)
    assert fp32.batch_tok_s == pytest.approx(bf16.batch_tok_s / 2)


def test_agent_bench_s_floor_follows_the_server_s_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = tmp_path / "agent.toml"
    toml.write_text(to_toml({"server": {"engine": "vllm", "command": VLLM}, "hardware": {
        "mem_bw_gb_s": 1.0, "weights_gb": 0.02, "weights_dtype": "float32"}}))  # fmt: skip
    sim = launch(tmp_path, "--ideal-itl-ms", "5", "--load-seconds", "0", base=False)
    floors = {}
    try:
        sim.wait_ready()
        for dtype in ("bfloat16", "float32"):
            out = tmp_path / f"{dtype}.json"
            argv = ["--url", sim.url, "--concurrency", "1", "--max-tokens", "4"]
            argv += ["--requests-per-level", "2", "--json", str(out), "--hardware", str(toml)]
            assert bench_main([*argv, "--server-flags", f"--dtype {dtype}"]) == 0
            (point,) = json.loads(out.read_text())["points"]
            floors[dtype] = point["floor_tok_s"]
            assert point["floor_bound"] == "memory"
    finally:
        sim.kill_group()
    capsys.readouterr()
    assert floors["bfloat16"] == pytest.approx(100.0)  # 10 MB at 1 GB/s: 10 ms a step
    assert floors["float32"] == pytest.approx(50.0)


def test_headroom_is_a_family_s_ceiling_over_the_best_share() -> None:
    assert headroom(0.40, "flags") == pytest.approx(1.0)  # 80 % over 40 %, minus 1
    assert headroom(0.40, "kernels") == pytest.approx(1.5)
    assert headroom(0.90, "flags") == 0.0  # past the ceiling: reached
    assert headroom(0.40, "speculation") is None  # no ceiling


def floor_run(tmp: Path, shares: dict[int, float]) -> Path:
    """A run whose candidate is at `shares` of each level's floor; C=250 bound by compute."""
    run = start("beat baseline", plain_config(), "autopilot", tmp, None, Limits())
    base, fa3 = {"--attention-backend": "flashinfer"}, {"--attention-backend": "fa3"}
    floor = {c: 110.0 * (c if c > 1 else 1) / s for c, s in shares.items()}

    def sweep(label: str, flags: dict[str, str], tput: dict[int, float]) -> None:
        extra = {
            c: {"floor_tok_s": floor[c], "floor_share": v / floor[c],
                "floor_bound": "compute" if c == 250 else "memory"}
            for c, v in tput.items()
        }  # fmt: skip
        bench_in_run(run, label, flags, tput, extra=extra, notes=["floor: 1 x H100 SXM"])

    levels = list(shares)
    sweep("baseline-L01", base, {c: 90.0 * c for c in levels})
    sweep("noise-L01", base, {c: 92.0 * c for c in levels})
    sweep("validate-L02-fa3", fa3, {c: 110.0 * c for c in levels})
    run.close()
    return run.path


def report_of(folder: Path) -> str:
    render_files(gather(folder, read_events(folder / "events.jsonl").events), folder)
    return (folder / "report.md").read_text()


def test_the_report_says_each_level_s_bound_and_when_flag_tuning_is_done(tmp_path: Path) -> None:
    """The noise floor of these sweeps is about 2 %: at 79 % of the floor flags could add
    0.80 / 0.79 - 1 = 1.3 %, under it - tuning flags is done; at 40 % they could add 100 %."""
    md = report_of(floor_run(tmp_path / "done", {1: 0.79, 10: 0.85, 250: 0.5}))
    assert "| C | configuration | tok/s | of floor | bound |" in md
    assert "| 250 | compute | 50% (candidate: fa3) | - | - | no ceiling |" in md
    assert "| 10 | memory | 85% (candidate: fa3) | reached | +18% | no ceiling |" in md
    assert "Tuning flags is done: the most they could still add is 1% (C=1)" in md
    md = report_of(floor_run(tmp_path / "open", {1: 0.40, 10: 0.85}))
    assert "Tuning flags can still pay: up to 100% at C=1" in md
    assert "| 1 | memory | 40% (candidate: fa3) | +100% | +150% | no ceiling |" in md


def test_watch_shows_each_configuration_s_share_of_the_floor(tmp_path: Path) -> None:
    folder = floor_run(tmp_path, {1: 0.40, 250: 0.5})
    console = Console(record=True, width=140)
    watch_view(folder / "events.jsonl", console, once=True)
    text = console.export_text()
    assert "share of the floor" in text and "C=250 (compute)" in text
    panel = text[text.index("share of the floor") :]
    (fa3,) = [line for line in panel.splitlines() if "candidate: fa3" in line][:1]
    (base,) = [line for line in panel.splitlines() if "│  baseline" in line][:1]
    assert fa3.split()[-3:-1] == ["40%", "50%"]
    # the baseline's two sweeps' mean share at C=1 (90 and 92 tok/s)
    assert base.split()[-3] == f"{0.40 * 91 / 110:.0%}"


def test_a_run_without_floors_has_no_floor_panel(tmp_path: Path) -> None:
    run = start("beat baseline", plain_config(), "autopilot", tmp_path, None, Limits())
    bench_in_run(run, "baseline-L01", {"--attention-backend": "flashinfer"}, {1: 90.0})
    run.close()
    console = Console(record=True, width=140)
    watch_view(run.path / "events.jsonl", console, once=True)
    assert "share of the floor" not in console.export_text()


def test_the_tool_s_table_names_the_bound_where_it_is_not_memory() -> None:
    """The run_benchmark text Claude reads (and agent bench's table): a bound column only where
    compute or the all-reduce binds, so a memory-bound sweep reads as before."""
    from tools.bench.results import build_result
    from tools.bench.schema import ClientInfo, ServerRef, Workload
    from tools.bench.table import sweep_table

    def table(bounds: dict[int, str]) -> list[str]:
        points = [
            {"max_concurrency": c, "output_throughput": 100.0 * c, "completed": 4,
             "floor_tok_s": 400.0 * c, "floor_share": 0.25, "floor_bound": b}
            for c, b in bounds.items()
        ]  # fmt: skip
        result = build_result(
            result_id="r", server=ServerRef(), workload=Workload(), client=ClientInfo(),
            levels=list(bounds), points=points,
        )  # fmt: skip
        return sweep_table(result).splitlines()

    wide = table({1: "memory", 250: "compute"})
    header = next(line for line in wide if "of floor" in line)
    assert header.split().index("of") + 2 == header.split().index("bound")
    assert any(line.split()[0] == "250" and "compute" in line.split() for line in wide)
    assert not any("bound" in line for line in table({1: "memory", 2: "memory"}))


def test_recommendation_json_says_what_is_left_and_whether_flag_tuning_is_done(
    tmp_path: Path,
) -> None:
    """The same reading as the report's (physics.headroom_of): per level the best share any
    configuration measured and what flags and kernels could still add; flags_done beside the
    noise floor, and one line in the text the model reads."""
    from tools.base import ToolBox, ToolContext
    from tools.recommend import Recommend

    def recommend(folder: Path) -> tuple[dict[str, Any], str]:
        from state.run import Run

        run = Run.open(folder)
        ctx = ToolContext(run=run, config=plain_config())
        fa3 = {"--attention-backend": "fa3"}
        result, _ = asyncio.run(ToolBox([Recommend()]).call(ctx, "recommend", {"config": fa3}))
        assert not result.is_error, result.text
        return json.loads((folder / "recommendation.json").read_text()), result.text

    rec, text = recommend(floor_run(tmp_path / "done", {1: 0.79, 10: 0.85, 250: 0.5}))
    assert rec["headroom"]["1"] == {
        "bound": "memory", "best_share": 0.79, "flags": round(0.80 / 0.79 - 1, 4),
        "kernels": round(1 / 0.79 - 1, 4),
    }  # fmt: skip
    assert rec["headroom"]["10"]["flags"] == 0.0  # 85 %: past the flags' ceiling
    assert rec["headroom"]["250"] == {
        "bound": "compute", "best_share": 0.5, "flags": None, "kernels": None
    }  # fmt: skip
    assert rec["flags_done"] is True
    assert "flags could still add up to 1% (C=1), under the noise floor" in text
    rec, text = recommend(floor_run(tmp_path / "open", {1: 0.40, 10: 0.85}))
    assert rec["flags_done"] is False and "up to 100% (C=1), beyond the noise floor" in text
