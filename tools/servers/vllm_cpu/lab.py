"""The real-vLLM lab: vLLM's CPU build in its cached venv, a tiny random Llama made here, and an
agent.toml whose search space is what a vLLM user tunes on this backend (issue 28): batch limits,
chunked prefill, prefix caching, ngram speculation and its token count, dtype, the KV cache space
and eager vs compiled. The KV cache space is an environment variable on this backend
(VLLM_CPU_KVCACHE_SPACE, GiB), and a search space holds flags only: the command fixes it at 1."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.domain.config import _free_port
from tools.domain.config_toml import to_toml
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


def setup(folder: Path, python: Path) -> Lab:
    """The model and agent.toml in `folder` for the vLLM venv whose python is `python`."""
    folder = folder.expanduser().resolve()
    model = make_model_with(python, folder / "model")
    config = folder / "agent.toml"
    tmp = config.with_suffix(".toml.tmp")
    body = lab_toml(python, model, _free_port(8000))
    tmp.write_text(HEADER.format(config=shlex.quote(str(config))) + "\n" + to_toml(body))
    tmp.replace(config)
    return Lab(folder, config, python, model)
