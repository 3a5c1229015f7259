"""Tiny Llama models as GGUF files, made on this machine: no hub, no download, no torch.

The tokenizer is a SentencePiece-style vocabulary ("llama" in GGUF) built from text the machine
has (Debian's license texts, else Python's own license): the most frequent words, each with every
prefix so that llama.cpp's merges can reach it, single characters, and byte fallback for the rest.
The weights are random, written directly with the `gguf` package (the writer llama.cpp's own
converter uses). The target and its draft share the tokenizer, the embeddings, the first layer
and the output head, and the target's further layers add little to the residual stream: the draft
then guesses most of the target's tokens, so speculative decoding has something to win - as with
a real draft model - while the text itself is noise.
"""

from __future__ import annotations

import collections
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

LICENSES = Path("/usr/share/common-licenses")  # Debian's; else Python's own license text
SPACE = "\u2581"  # SentencePiece's word boundary
N_BYTES = 256
UNKNOWN, NORMAL, CONTROL, BYTE = 2, 1, 3, 6  # GGUF token types


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    ffn: int
    context: int = 4096


TARGET = Shape(hidden=256, layers=4, heads=4, ffn=768)
DRAFT = Shape(hidden=256, layers=1, heads=4, ffn=768)


def corpus(limit_bytes: int = 2_000_000) -> str:
    """Text this machine has, for the vocabulary."""
    files = [*sorted(LICENSES.glob("*")), Path(sysconfig.get_paths()["stdlib"]) / "LICENSE.txt"]
    parts = [__doc__ or ""]  # never empty
    for path in files:
        try:
            parts.append(path.read_text(errors="replace") if path.is_file() else "")
        except OSError:
            continue
        if sum(map(len, parts)) >= limit_bytes:
            break
    return "\n".join(parts)


def vocabulary(text: str, words: int = 1500) -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, types): specials, bytes, characters, then words and their prefixes."""
    tokens = ["<unk>", "<s>", "</s>"]
    types = [UNKNOWN, CONTROL, CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(N_BYTES)]
    types += [BYTE] * N_BYTES
    pieces: dict[str, None] = {}
    for ch in sorted({c for c in text if c.isprintable() and not c.isspace()}):
        pieces[ch] = None
        pieces[SPACE + ch] = None
    pieces[SPACE] = None
    counts = collections.Counter(re.findall(r"[A-Za-z]+", text))
    for word, _ in counts.most_common(words):
        piece = SPACE + word
        for end in range(2, len(piece) + 1):  # every prefix: the merges must be able to reach it
            pieces[piece[:end]] = None
    tokens += list(pieces)
    types += [NORMAL] * len(pieces)
    scores = [0.0] * (3 + N_BYTES) + [-float(i) for i in range(len(pieces))]
    return tokens, scores, types


def write_model(
    path: Path, shape: Shape, vocab: tuple[list[str], list[float], list[int]], seed: int, name: str
) -> Path:
    """A random-weight Llama as an f32 GGUF file (the same seed gives the same shared weights)."""
    import gguf  # the lab's dependency; imported here so the engines layer loads without it

    tokens, scores, types = vocab
    rng = np.random.default_rng(seed)
    n_vocab, h, head_dim = len(tokens), shape.hidden, shape.hidden // shape.heads

    def mat(rows: int, cols: int, scale: float = 1.0) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)).astype(np.float32)

    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(name)
    w.add_context_length(shape.context)
    w.add_embedding_length(h)
    w.add_block_count(shape.layers)
    w.add_feed_forward_length(shape.ffn)
    w.add_head_count(shape.heads)
    w.add_head_count_kv(shape.heads)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    ones = np.ones(h, dtype=np.float32)
    w.add_tensor("token_embd.weight", mat(n_vocab, h, np.sqrt(h)))
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", mat(n_vocab, h, 4.0))
    for layer in range(shape.layers):
        # layer 0 is the draft's too; the target's later layers barely move the residual stream
        out_scale = 1.0 if layer == 0 else 0.02
        p = f"blk.{layer}."
        w.add_tensor(p + "attn_norm.weight", ones)
        w.add_tensor(p + "attn_q.weight", mat(h, h))
        w.add_tensor(p + "attn_k.weight", mat(h, h))
        w.add_tensor(p + "attn_v.weight", mat(h, h))
        w.add_tensor(p + "attn_output.weight", mat(h, h, out_scale))
        w.add_tensor(p + "ffn_norm.weight", ones)
        w.add_tensor(p + "ffn_gate.weight", mat(shape.ffn, h))
        w.add_tensor(p + "ffn_up.weight", mat(shape.ffn, h))
        w.add_tensor(p + "ffn_down.weight", mat(h, shape.ffn, out_scale))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def make_models(folder: Path, seed: int = 0) -> tuple[Path, Path]:
    """(target.gguf, draft.gguf) in `folder`, sharing the tokenizer and their first layer."""
    vocab = vocabulary(corpus())
    target = write_model(folder / "target.gguf", TARGET, vocab, seed, "tiny-llama-target")
    draft = write_model(folder / "draft.gguf", DRAFT, vocab, seed, "tiny-llama-draft")
    return target, draft
