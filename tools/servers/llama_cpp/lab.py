"""The real lab: llama.cpp's llama-server on this machine, a tiny target model and its draft made
here, and an agent.toml whose search space is what one tunes on a laptop or a workstation -
threads, parallel slots, flash attention, KV cache types, batch sizes, speculative decoding."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.domain.config import _free_port
from tools.domain.config_toml import to_toml
from tools.servers.llama_cpp.tiny_model import make_models

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


def setup(folder: Path, binary: Path, seed: int = 0) -> Lab:
    """Models and agent.toml in `folder` for the llama-server at `binary`."""
    folder = folder.expanduser().resolve()
    target, draft = make_models(folder / "models", seed)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    body = lab_toml(binary, target, draft, _free_port(8080), cpus or 1)
    config = folder / "agent.toml"
    tmp = config.with_suffix(".toml.tmp")
    tmp.write_text(HEADER.format(config=shlex.quote(str(config))) + "\n" + to_toml(body))
    tmp.replace(config)
    return Lab(folder, config, binary, target, draft)
