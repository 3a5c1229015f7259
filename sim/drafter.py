"""A trained EAGLE-3 drafter as the simulator sees it: the acceptance its training earned.

`python -m sim.pipeline convert` writes a drafter folder: config.json, weights.json (the weight
keys, as a safetensors index would list them) and sim_drafter.json (what it was trained on and the
per-token acceptance that follows). The server reads it when started with
`--speculative-draft-model-path PATH`; a folder in the wrong layout fails to load as SGLang's
draft loader does. docs/pipeline.md gives the formula.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

ALPHA_MAX = 0.78  # a drafter trained on plenty of clean data for long enough
SAMPLES_SCALE = 4000.0  # samples at which the data term reaches 1 - 1/e
EPOCHS_SCALE = 1.5  # epochs at which the fit term reaches 1 - 1/e
MALFORMED_PENALTY = 1.5  # each malformed sample teaches the wrong thing
NGRAM_ALPHA = 0.30  # prompt-lookup speculation on chat traffic: few n-grams repeat
LAYOUT_PREFIX = "layers.0."  # the weight keys SGLang's LlamaForCausalLMEagle3 loads
META = "sim_drafter.json"


class DraftLoadError(Exception):
    """The draft checkpoint does not load; the message is the engine's last log line."""


@dataclass(frozen=True)
class Drafter:
    alpha: float
    samples: int
    malformed: int
    epochs: int


def trained_alpha(samples: int, malformed: int, epochs: int) -> float:
    """Per-token acceptance a drafter earns: more clean samples and more epochs give more."""
    if samples <= 0 or epochs <= 0:
        return 0.0
    data = 1 - math.exp(-samples / SAMPLES_SCALE)
    fit = 1 - math.exp(-epochs / EPOCHS_SCALE)
    clean = max(0.0, 1 - MALFORMED_PENALTY * malformed / samples)
    return round(ALPHA_MAX * data * fit * clean, 4)


def load(path: str) -> Drafter:
    """The drafter at `path`, or DraftLoadError with the line the engine would print."""
    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise DraftLoadError(
            f"OSError: Can't load the configuration of '{path}'. Make sure '{path}' is the "
            "correct path to a directory containing a config.json file"
        )
    try:
        keys = json.loads((folder / "weights.json").read_text())["weight_map"]
        meta = json.loads((folder / META).read_text())
    except (OSError, ValueError, KeyError, TypeError):
        raise DraftLoadError(
            f"OSError: Error no file named model.safetensors found in directory {path}"
        ) from None
    # SpecForge names the decoder layer midlayer.*; the engine's params are layers.0.*
    wrong = next((k for k in keys if str(k).startswith("midlayer.")), None)
    if wrong is not None:
        # what params_dict[name] raises in LlamaForCausalLMEagle3.load_weights
        raise DraftLoadError(f"KeyError: '{wrong}'")
    return Drafter(
        alpha=float(meta["alpha"]),
        samples=int(meta.get("samples", 0)),
        malformed=int(meta.get("malformed", 0)),
        epochs=int(meta.get("epochs", 0)),
    )


def alpha_for(algorithm: str | None, draft_path: str | None, default: float) -> float:
    """The per-token acceptance a server uses: the trained drafter's when one is given, n-gram's
    for NGRAM, else the hardware profile's. A drafter that does not load gives the default (the
    start fails anyway, see load_failure)."""
    if algorithm == "NGRAM":
        return NGRAM_ALPHA
    if draft_path is None:
        return default
    try:
        return load(draft_path).alpha
    except DraftLoadError:
        return default


def load_failure(algorithm: str | None, draft_path: str | None) -> str | None:
    """Why the draft model does not load, or None."""
    if algorithm is None or algorithm == "NGRAM" or draft_path is None:
        return None
    try:
        load(draft_path)
    except DraftLoadError as err:
        return str(err)
    return None


def acceptance_length(alpha: float, steps: int) -> float:
    """Tokens per verify step of a chain of `steps` drafts: 1 + alpha + ... + alpha^steps."""
    return sum(alpha**i for i in range(steps + 1))
