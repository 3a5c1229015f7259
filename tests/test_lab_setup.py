"""`agent lab setup llama.cpp`'s parts without a build: the models it makes are GGUF files llama.cpp
can read (the gguf reader here; loading them in llama-server is tests/test_real_llama.py), and its
agent.toml is a valid config whose search space keeps llama.cpp's rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tools.domain.config import load_config
from tools.domain.space import SearchSpace
from tools.servers.llama_cpp.lab import setup
from tools.servers.llama_cpp.tiny_model import SPACE, vocabulary

gguf = pytest.importorskip("gguf")


def test_the_vocabulary_reaches_every_word_through_its_prefixes() -> None:
    tokens, scores, types = vocabulary("the license the licensee, free software", words=10)
    assert tokens[:3] == ["<unk>", "<s>", "</s>"] and len(tokens) == len(scores) == len(types)
    assert len(set(tokens)) == len(tokens)
    for word in ("the", "license", "licensee", "free"):
        piece = SPACE + word
        assert all(piece[:end] in tokens for end in range(2, len(piece) + 1))


def test_lab_setup_writes_models_and_a_config_that_loads(tmp_path: Path) -> None:
    lab = setup(tmp_path / "lab", Path("/opt/llama/bin/llama-server"))
    target, draft = (gguf.GGUFReader(str(p)) for p in (lab.target, lab.draft))

    def field(reader: object, key: str) -> int:
        return int(reader.fields[key].parts[-1][0])  # type: ignore[attr-defined]

    assert field(target, "llama.block_count") == 4 and field(draft, "llama.block_count") == 1
    tensors = {t.name: t for t in target.tensors}
    draft_tensors = {t.name: t for t in draft.tensors}
    # the draft shares the target's embeddings and first layer: it guesses the target's tokens
    for name in ("token_embd.weight", "blk.0.attn_q.weight", "output.weight"):
        assert np.array_equal(tensors[name].data, draft_tensors[name].data)
    assert not np.array_equal(
        tensors["blk.0.attn_q.weight"].data, tensors["blk.1.attn_q.weight"].data
    )

    config = load_config(lab.config)
    assert config.server.engine == "llama.cpp" and str(lab.target) in config.server.command
    # [hardware]: this machine's copy bandwidth, measured; the bytes a step reads, from the GGUF
    # file: every f32 tensor but the token embeddings (a row looked up); f16 K and V per token
    hardware = config.hardware
    assert hardware is not None and lab.probe is not None
    assert hardware.mem_bw_gb_s == lab.probe.gb_s > 0 and hardware.devices == 1
    read = sum(int(t.n_elements) * 4 for n, t in tensors.items() if n != "token_embd.weight")
    assert hardware.weights_gb == pytest.approx(read / 1e9)
    assert hardware.kv_kb_per_token == 2 * 4 * 4 * (256 // 4) * 2 / 1e3  # layers, heads, dim
    assert "copy probe at lab setup" in lab.config.read_text()
    assert "--metrics" in config.server.command.split()  # /metrics sampled during each level
    assert config.bench.concurrency == [1, 2, 4, 8]
    assert config.server.side_by_side  # its models are tiny: the winner is proven in a duet
    space = SearchSpace.parse(config.search)
    base = space.baseline
    # a quantized V cache only with flash attention; the draft model only with draft-simple
    assert space.problems({**base, "--cache-type-v": "q8_0"})
    assert not space.problems({**base, "--flash-attn": "on", "--cache-type-v": "q8_0"})
    spec = {
        "--spec-type": "draft-simple",
        "--spec-draft-model": str(lab.draft),
        "--spec-draft-n-max": 8,
    }
    assert not space.problems({**base, **spec})


def test_the_vllm_lab_runs_side_by_side_where_two_servers_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """About 4 GiB a server: a duet where the machine holds two with room, launch pairs on a
    smaller one."""
    from tools.servers.vllm_cpu import lab as vllm_lab

    for memory, side in ((24 << 30, True), (8 << 30, False)):
        monkeypatch.setattr(vllm_lab, "memory_bytes", lambda m=memory: m)
        body = vllm_lab.lab_toml(Path("/venv/bin/python"), tmp_path / "model", 8000)
        assert body["server"]["side_by_side"] is side
