"""The real lab: llama.cpp's llama-server on this machine, a tiny target model and its draft made
here, and an agent.toml whose search space is what one tunes on a laptop or a workstation -
threads, parallel slots, flash attention, KV cache types, batch sizes, speculative decoding."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.domain.config import free_port
from tools.domain.config_toml import to_toml
from tools.domain.physics import ModelBytes, gguf_model_bytes
from tools.servers.llama_cpp.tiny_model import make_models
from tools.servers.memory_probe import CopyProbe, copy_bandwidth

HEADER = """\
# Written by `agent lab setup llama.cpp`: a real llama.cpp server on this machine, serving a tiny
# random-weight model made here (models/target.gguf) with a draft model for speculative decoding
# (models/draft.gguf). Run a campaign against it:
#   agent run --config {config} --goal "beat baseline" --model autopilot
# Sized for a CPU: short prompts and answers, concurrency up to 8. docs/engines.md says more.
"""


@dataclass(frozen=True)
class Lab:
    folder: Path
    config: Path
    binary: Path
    target: Path
    draft: Path
    probe: CopyProbe | None = None  # this machine's copy bandwidth ([hardware] mem_bw_gb_s)


def search_space(draft: Path, cpus: int) -> dict[str, Any]:
    threads = sorted({1, max(1, cpus // 2), cpus})
    return {
        "--threads": threads,
        "--parallel": [1, 2, 4, 8],  # server slots: requests decoded together
        "--flash-attn": ["off", "on"],
        "--cache-type-k": ["f16", "q8_0"],
        "--cache-type-v": [False, "q8_0"],  # false = the default, f16
        "--batch-size": [2048, 512],
        "--ubatch-size": [512, 128],
        "--spec-type": [False, "draft-simple", "ngram-mod"],
        "--spec-draft-model": [str(draft)],
        "--spec-draft-n-max": [4, 8, 16],
        "requires": {
            # llama.cpp refuses a quantized V cache without flash attention
            "--cache-type-v": {"--flash-attn": "on"},
            "--spec-draft-model": {"--spec-type": "draft-simple"},
            "--spec-draft-n-max": {"--spec-type": "draft-simple"},
        },
        "baseline": {
            "--threads": cpus,
            "--parallel": 4,
            "--flash-attn": "off",
            "--cache-type-k": "f16",
            "--batch-size": 2048,
            "--ubatch-size": 512,
        },
    }


def lab_toml(binary: Path, target: Path, draft: Path, port: int, cpus: int) -> dict[str, Any]:
    # --metrics: the benchmark samples /metrics during each level (the report's server metrics)
    command = shlex.join(
        [str(binary), "-m", str(target), "--ctx-size", "4096", "--no-webui", "--metrics"]
    )
    return {
        "server": {
            "engine": "llama.cpp",
            "command": command,
            "port": port,
            "ready_timeout_s": 120.0,
            "kill_timeout_s": 10.0,
            # the lab's models are tens of MB: two servers always fit, so the winner is proven
            # in a duet, not launch pairs (docs/statistics.md, "Duets")
            "side_by_side": True,
        },
        "bench": {
            "concurrency": [1, 2, 4, 8],
            "input_len": 64,
            "max_tokens": 64,
            "warmup_requests": 2,
        },
        "budget": {"max_minutes": 60.0},
        "search": search_space(draft, cpus),
    }


def gguf_bytes(path: Path) -> ModelBytes:
    """What one decode step of the GGUF model at `path` reads (tools/domain/physics.py): its
    tensors but the token embeddings (one row looked up, unless no separate output head exists),
    and the f16 KV cache per token from its header."""
    import gguf  # the lab's dependency, as tiny_model imports it

    reader = gguf.GGUFReader(str(path))
    names = {t.name: int(t.n_bytes) for t in reader.tensors}
    looked_up = names.get("token_embd.weight", 0) if "output.weight" in names else 0
    arch = str(reader.fields["general.architecture"].contents())

    def header(key: str) -> int:
        return int(reader.fields[f"{arch}.{key}"].contents())

    heads = header("attention.head_count")
    has_kv = f"{arch}.attention.head_count_kv" in reader.fields
    kv_heads = header("attention.head_count_kv") if has_kv else heads
    head_dim = header("embedding_length") // heads
    weights = sum(names.values()) - looked_up
    return gguf_model_bytes(weights, header("block_count"), kv_heads, head_dim)


def hardware_table(model: ModelBytes, probe: CopyProbe) -> dict[str, Any]:
    """agent.toml's [hardware] for this machine: the probe's bandwidth, the model's bytes (the
    KV cache in f16, which each configuration's --cache-type-k/-v rescale)."""
    return {
        "mem_bw_gb_s": probe.gb_s,
        "devices": 1,
        "weights_gb": model.weight_bytes / 1e9,
        "kv_kb_per_token": model.kv_bytes_per_token / 1e3,
        "kv_dtype": model.kv_dtype,
    }


def setup(folder: Path, binary: Path, seed: int = 0, probe: bool = True) -> Lab:
    """Models and agent.toml in `folder` for the llama-server at `binary`; with `probe`, this
    machine's copy bandwidth measured for [hardware] (each level's floor, docs/physics.md)."""
    folder = folder.expanduser().resolve()
    target, draft = make_models(folder / "models", seed)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    body = lab_toml(binary, target, draft, free_port(8080), cpus or 1)
    measured = copy_bandwidth() if probe else None
    header = HEADER.format(config=shlex.quote(str(config_path := folder / "agent.toml")))
    if measured is not None:
        body["hardware"] = hardware_table(gguf_bytes(target), measured)
        header += f"# [hardware]: the {measured.describe()}; the model's bytes from its GGUF file\n"
    tmp = config_path.with_suffix(".toml.tmp")
    tmp.write_text(header + "\n" + to_toml(body))
    tmp.replace(config_path)
    return Lab(folder, config_path, binary, target, draft, measured)
