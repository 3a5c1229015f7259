"""The stages of an EAGLE-3 drafter pipeline, as a SpecForge-style run on a GPU box would do them,
writing small real files in the working directory. Model-time costs are the reference
campaign's: 10K samples of data generation took about 5.3 hours, training about 2.6 hours."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

from sim import drafter
from sim.pipeline.clock import Clock, StageFailed, say

DATAGEN_S = 1.9  # model seconds per generated sample (10K samples ~ 5.3 h)
EXTRACT_S = 0.24  # per sample: one forward of the verifier with its hidden states
TRAIN_S = 1.25  # per optimizer step of batch 4 (3 epochs of 10K samples ~ 2.6 h)
BATCH = 4
TARGET_VOCAB, DRAFT_VOCAB = 163840, 32000
DEFECT_RATE = 0.12  # samples whose reasoning the buggy script does not close with </think>
SAMPLES = "data/samples.jsonl"
HIDDEN = "hidden/manifest.json"
VOCAB = "vocab/d2t.json"
# the draft head's weights, as SpecForge names them; the engine loads them as layers.0.*
KEYS = [
    "midlayer.hidden_norm.weight",
    "midlayer.input_layernorm.weight",
    "midlayer.self_attn.q_proj.weight",
    "midlayer.self_attn.k_proj.weight",
    "midlayer.self_attn.v_proj.weight",
    "midlayer.self_attn.o_proj.weight",
    "midlayer.mlp.gate_proj.weight",
    "midlayer.mlp.up_proj.weight",
    "midlayer.mlp.down_proj.weight",
    "midlayer.post_attention_layernorm.weight",
    "fc.weight",
    "norm.weight",
    "lm_head.weight",
]


def write_json(path: Path, body: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(body, indent=1))
    tmp.replace(path)


def read_json(path: Path, made_by: str) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        say(f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'")
        raise StageFailed(f"{path} is missing: run {made_by} first") from None
    except ValueError as err:
        say(f"json.decoder.JSONDecodeError: {err} in {path}")
        raise StageFailed(f"{path} is malformed") from None


def is_malformed(line: str) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return True
    text = record.get("response", "") if isinstance(record, dict) else ""
    return not isinstance(text, str) or text.count("<think>") != text.count("</think>")


def datagen(work: Path, clock: Clock, samples: int, defect: bool, seed: int) -> None:
    rng = random.Random(seed)
    out = work / SAMPLES
    out.parent.mkdir(parents=True, exist_ok=True)
    say(f"generating {samples} samples with the verifier -> {SAMPLES} (time scale {clock.scale:g})")
    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w") as f:
        for i in range(samples):
            close = "" if defect and rng.random() < DEFECT_RATE else "</think>"
            reply = f"<think>step {i} of the reasoning{close} answer {i}"
            f.write(json.dumps({"id": i, "prompt": f"question {i}", "response": reply}) + "\n")
        clock.run("Generating", samples, DATAGEN_S, "samples")
    tmp.replace(out)  # a killed run leaves the old data, never half a file
    say(f"wrote {samples} samples to {SAMPLES}")


def check(work: Path, expect: int | None) -> None:
    path = work / SAMPLES
    if not path.is_file():
        say(f"FileNotFoundError: [Errno 2] No such file or directory: '{SAMPLES}'")
        raise StageFailed("no data: run datagen first")
    lines = path.read_text().splitlines()
    bad = [n for n, line in enumerate(lines, 1) if is_malformed(line)]
    say(f"checked {len(lines)} samples in {SAMPLES}: {len(bad)} malformed")
    if bad:
        say(
            f"ERROR: {len(bad)}/{len(lines)} samples malformed: reasoning not closed by </think> "
            f"(first at line {bad[0]}); fix the generation script and regenerate"
        )
        raise StageFailed("malformed samples")
    if expect is not None and len(lines) < expect:
        say(f"ERROR: {len(lines)} samples, expected {expect}: the generation did not finish")
        raise StageFailed("too few samples")
    say("data check passed")


def extract(work: Path, clock: Clock) -> None:
    path = work / SAMPLES
    if not path.is_file():
        say(f"FileNotFoundError: [Errno 2] No such file or directory: '{SAMPLES}'")
        raise StageFailed("no data")
    lines = path.read_text().splitlines()
    unparsable = next((n for n, line in enumerate(lines, 1) if not _json_ok(line)), None)
    if unparsable is not None:
        say(f"json.decoder.JSONDecodeError: Expecting value: line {unparsable} column 1")
        raise StageFailed("malformed input")
    malformed = sum(1 for line in lines if is_malformed(line))
    say(f"extracting the verifier's hidden states (layers 2, 30, 58) for {len(lines)} samples")
    clock.run("Extracting", len(lines), EXTRACT_S, "samples")
    body = {"samples": len(lines), "malformed": malformed, "layers": [2, 30, 58]}
    write_json(work / HIDDEN, body)
    say(f"hidden states of {len(lines)} samples in hidden/")


def vocab(work: Path, clock: Clock) -> None:
    say(f"mapping the verifier's {TARGET_VOCAB}-token vocabulary to the drafter's {DRAFT_VOCAB}")
    clock.run("Counting tokens", 20, 4.5, "shards")
    write_json(work / VOCAB, {"target_vocab": TARGET_VOCAB, "draft_vocab": DRAFT_VOCAB})
    say(f"wrote {VOCAB} (d2t, t2d): top {DRAFT_VOCAB} tokens cover 97.3% of the data")


def train(work: Path, clock: Clock, epochs: int) -> None:
    hidden = read_json(work / HIDDEN, "extract")
    read_json(work / VOCAB, "vocab")
    samples, malformed = int(hidden["samples"]), int(hidden["malformed"])
    steps = max(1, samples // BATCH)
    say(f"training the EAGLE-3 head: {samples} samples, {epochs} epochs, {steps} steps/epoch")
    for epoch in range(1, epochs + 1):

        def loss_at(done: int, epoch: int = epoch) -> str:
            loss = _loss(epoch - 1 + done / steps, malformed, samples)
            return f"epoch {epoch}/{epochs} loss={loss:.3f}"

        before = (epoch - 1) * steps
        clock.run("Training", steps, TRAIN_S, "it", loss_at, before, steps * epochs)
        ckpt = work / "ckpt" / f"epoch_{epoch}"
        body = {"samples": samples, "malformed": malformed, "epochs": epoch, "keys": KEYS}
        write_json(ckpt / "checkpoint.json", body)
        loss = _loss(epoch, malformed, samples)
        say(f"epoch {epoch}: loss {loss:.3f}; saved checkpoint {ckpt.relative_to(work)}")
    say("training done")


def convert(work: Path, clock: Clock, ckpt: str | None, out: str, keep_layout: bool) -> None:
    folder = work / ckpt if ckpt else _latest(work)
    body = read_json(folder / "checkpoint.json", "train")
    clock.run("Converting", len(body["keys"]), 4.0, "tensors")
    keys = [
        k if keep_layout else k.replace("midlayer.", drafter.LAYOUT_PREFIX) for k in body["keys"]
    ]
    alpha = drafter.trained_alpha(body["samples"], body["malformed"], body["epochs"])
    dest = work / out
    write_json(
        dest / "config.json",
        {
            "architectures": ["LlamaForCausalLMEagle3"],
            "draft_vocab_size": DRAFT_VOCAB,
            "vocab_size": TARGET_VOCAB,
        },
    )
    write_json(dest / "weights.json", {"weight_map": {k: "model.safetensors" for k in keys}})
    meta = {k: body[k] for k in ("samples", "malformed", "epochs")}
    write_json(dest / drafter.META, {**meta, "alpha": alpha})
    layout = "kept midlayer.*" if keep_layout else "midlayer.* -> layers.0.*"
    say(f"converted {len(keys)} tensors ({layout}) from {folder.relative_to(work)} to {out}/")
    say(
        f"drafter {out}/: trained on {body['samples']} samples ({body['malformed']} malformed), "
        f"{body['epochs']} epochs: per-token acceptance {alpha:.3f}, "
        f"acceptance length {drafter.acceptance_length(alpha, 3):.2f} at 3 draft steps"
    )


def _latest(work: Path) -> Path:
    found = sorted((work / "ckpt").glob("epoch_*"), key=lambda p: int(p.name.split("_")[1]))
    if not found:
        say("FileNotFoundError: no checkpoint under ckpt/")
        raise StageFailed("no checkpoint: run train first")
    return found[-1]


def _loss(epochs_done: float, malformed: int, samples: int) -> float:
    return 1.2 + 2.6 * math.exp(-1.1 * epochs_done) + 2.0 * malformed / max(1, samples)


def _json_ok(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True
