"""A tiny random Llama in Hugging Face format, made on this machine for vLLM: no hub, no download.

    config.json              LlamaForCausalLM, 4 layers of 256 (the llama.cpp lab's target shape)
    model.safetensors        random float32 weights (vLLM casts them to --dtype)
    tokenizer.json           a byte-level BPE trained here with `tokenizers` on the text the
    tokenizer_config.json    llama.cpp lab's vocabulary is built from (its corpus())
    generation_config.json

and, with --eagle3, an EAGLE-3 draft head for it (`make_eagle3_drafter`): one decoder layer whose
attention reads the token's embedding beside the target's fused hidden states, random weights in
the layout the drafter pipeline's `convert` writes (layers.0.*; SpecForge's midlayer.* renamed).

It needs `tokenizers`, `safetensors` and numpy, which vLLM's venv has and the project's need not:
run it with that venv's python (`make_model_with`) or in it:

    $VLLM_PY -m tools.servers.vllm_cpu.tiny_model DIR [--eagle3 DRAFTER_DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from tools.servers.llama_cpp.tiny_model import DRAFT, TARGET, Shape, corpus

SPECIALS = ["<unk>", "<s>", "</s>"]
VOCAB = 2048
# a minimal chat template, so /v1/chat/completions answers (the model has none of its own)
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def write_tokenizer(folder: Path) -> int:
    """Trains the tokenizer, writes its files; returns its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte: no <unk> in practice
        show_progress=False,
    )
    tok.train_from_iterator(corpus().splitlines(), trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]
    )
    tok.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "model_max_length": 4096,
        "chat_template": CHAT_TEMPLATE,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    return int(tok.get_vocab_size())


def write_weights(folder: Path, shape: Shape, vocab: int, seed: int) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    h, f = shape.hidden, shape.ffn

    def w(*dims: int) -> np.ndarray:
        return (rng.standard_normal(dims) * 0.02).astype(np.float32)

    tensors = {
        "model.embed_tokens.weight": w(vocab, h),
        "model.norm.weight": np.ones(h, np.float32),
        "lm_head.weight": w(vocab, h),
    }
    for i in range(shape.layers):
        p = f"model.layers.{i}."
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[f"{p}self_attn.{name}.weight"] = w(h, h)
        tensors[f"{p}mlp.gate_proj.weight"] = w(f, h)
        tensors[f"{p}mlp.up_proj.weight"] = w(f, h)
        tensors[f"{p}mlp.down_proj.weight"] = w(h, f)
        tensors[f"{p}input_layernorm.weight"] = np.ones(h, np.float32)
        tensors[f"{p}post_attention_layernorm.weight"] = np.ones(h, np.float32)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


def make_model(folder: Path, shape: Shape = TARGET, seed: int = 0) -> Path:
    """The model's folder (what `--model` / the server's first argument takes)."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = write_tokenizer(folder)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": shape.hidden,
        "intermediate_size": shape.ffn,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.heads,
        "max_position_embeddings": shape.context,
        "vocab_size": vocab,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    gen = {"bos_token_id": 1, "eos_token_id": 2}
    (folder / "generation_config.json").write_text(json.dumps(gen))
    write_weights(folder, shape, vocab, seed)
    return folder


def aux_layers(layers: int) -> list[int]:
    """Three distinct layers of a target with `layers` layers (at least 3): early, middle, late."""
    return sorted({1, layers // 2, layers - 1}) if layers >= 4 else [0, 1, 2]


def make_eagle3_drafter(folder: Path, target: Path, shape: Shape = DRAFT, seed: int = 1) -> Path:
    """An EAGLE-3 draft head for the model at `target` (its hidden size and vocabulary): the
    folder `--speculative-config '{"method": "eagle3", "model": FOLDER, ...}'` names. Random
    weights: vLLM serves it and accepts almost none of its drafts - what it shows is that the
    engine loads and runs the drafter a pipeline converts, not a speed-up."""
    import numpy as np
    from safetensors.numpy import save_file

    base = json.loads((target / "config.json").read_text())
    h, f, vocab = base["hidden_size"], shape.ffn, base["vocab_size"]
    rng = np.random.default_rng(seed)

    def w(*dims: int) -> np.ndarray:
        return (rng.standard_normal(dims) * 0.02).astype(np.float32)

    p = "layers.0."  # the pipeline's convert: SpecForge's midlayer.* as the engine loads it
    tensors = {
        "fc.weight": w(h, 3 * h),  # three of the target's layers' hidden states, fused
        f"{p}hidden_norm.weight": np.ones(h, np.float32),
        f"{p}input_layernorm.weight": np.ones(h, np.float32),
        f"{p}post_attention_layernorm.weight": np.ones(h, np.float32),
        f"{p}mlp.gate_proj.weight": w(f, h),
        f"{p}mlp.up_proj.weight": w(f, h),
        f"{p}mlp.down_proj.weight": w(h, f),
        f"{p}self_attn.o_proj.weight": w(h, h),
        "norm.weight": np.ones(h, np.float32),
        "lm_head.weight": w(vocab, h),
    }
    for name in ("q_proj", "k_proj", "v_proj"):  # the embedding and the fused state, side by side
        tensors[f"{p}self_attn.{name}.weight"] = w(h, 2 * h)
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        **{k: base[k] for k in ("model_type", "hidden_size", "vocab_size", "rms_norm_eps")},
        **{k: base[k] for k in ("max_position_embeddings", "rope_theta", "hidden_act")},
        "architectures": ["LlamaForCausalLMEagle3"],
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.heads,
        "intermediate_size": f,
        "draft_vocab_size": vocab,  # the target's: no d2t mapping to ship
        # the three target layers fc fuses: vLLM's default (2, L // 2, L - 3) is two distinct
        # layers of a 4-layer target, and fc then gets 2 x hidden where it takes 3 x
        "eagle_aux_hidden_state_layer_ids": aux_layers(base["num_hidden_layers"]),
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def make_model_with(
    python: Path, folder: Path, timeout_s: float = 300, eagle3: Path | None = None
) -> Path:
    """make_model (and make_eagle3_drafter into `eagle3`) run by `python` (vLLM's venv, which
    has tokenizers and safetensors)."""
    root = Path(__file__).resolve().parents[3]
    extra = ["--eagle3", str(eagle3)] if eagle3 is not None else []
    done = subprocess.run(
        [str(python), "-m", "tools.servers.vllm_cpu.tiny_model", str(folder), *extra],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"the tiny model could not be made: {tail}")
    return folder


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a tiny random Llama for vLLM, made here")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--eagle3", type=Path, metavar="DRAFTER_DIR", help="an EAGLE-3 head too")
    args = parser.parse_args()
    print(make_model(args.folder))
    if args.eagle3 is not None:
        print(make_eagle3_drafter(args.eagle3, args.folder))
