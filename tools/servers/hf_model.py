"""What one decode step of a Hugging Face model folder reads (tools/domain/physics.py): its
config.json and the tensors its safetensors files declare, read from their headers only (8 bytes
of length, then JSON: each tensor's dtype and shape), so no weight is loaded and nothing beyond
the standard library is needed.

A step reads every tensor but the token embeddings, of which it looks up one row per token
(unless the embeddings are tied to the output head: then the head reads them whole). The
parameters are counted, not the bytes: the dtype they are served in is the configuration's
(vLLM's --dtype), so the figures are stated in the checkpoint's dtype and rescaled per
configuration (`ModelBytes.served`).
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import replace
from pathlib import Path

from tools.domain.physics import ModelBytes, hf_model_bytes

# safetensors' dtype names -> the names the engines' flags use
SAFETENSORS_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16", "F8_E4M3": "fp8"}
EMBEDDINGS = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight")
MAX_HEADER = 100 << 20  # a header past this is no safetensors file


class ModelFilesError(Exception):
    """The folder is not a model whose bytes can be read; the message is one line."""


def tensor_header(path: Path) -> dict[str, dict[str, object]]:
    """{tensor name: {"dtype", "shape", ...}} of one safetensors file (its metadata left out)."""
    try:
        with path.open("rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            if size > MAX_HEADER:
                raise ModelFilesError(f"{path}: a header of {size} bytes: not safetensors")
            header = json.loads(f.read(size))
    except (OSError, struct.error, ValueError) as err:
        raise ModelFilesError(f"{path}: not a readable safetensors file ({err})") from None
    if not isinstance(header, dict):
        raise ModelFilesError(f"{path}: its header is not a JSON object")
    return {k: v for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)}


def model_folder_bytes(folder: Path) -> ModelBytes:
    """The bytes per decode step of the model in `folder`: the parameters a step reads, in the
    checkpoint's dtype (the one most parameters are in), with config.json's KV cache shape."""
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as err:
        raise ModelFilesError(f"{folder}: no readable config.json ({err})") from None
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ModelFilesError(f"{folder}: no *.safetensors file")
    tensors: dict[str, dict[str, object]] = {}
    for path in files:
        tensors.update(tensor_header(path))
    tied = bool(config.get("tie_word_embeddings", False))
    counts: dict[str, int] = {}
    for name, info in tensors.items():
        if not tied and name.endswith(EMBEDDINGS):
            continue  # one row per token looked up, not read whole
        shape = info.get("shape")
        dtype = SAFETENSORS_DTYPES.get(str(info.get("dtype")))
        if dtype is None or not isinstance(shape, list):
            raise ModelFilesError(f"{folder}: tensor {name} in {info.get('dtype')!r}: no size")
        counts[dtype] = counts.get(dtype, 0) + math.prod(int(d) for d in shape)
    if not counts:
        raise ModelFilesError(f"{folder}: its safetensors files declare no tensor a step reads")
    dtype = max(counts, key=lambda d: counts[d])
    model = hf_model_bytes(config, dtype, float(sum(counts.values())))
    return replace(model, source="config.json and safetensors headers")
