"""Against physics: how far a measured throughput is from what the hardware allows.

Decoding streams the weights (and the KV cache of every running sequence) from memory once per
step, so at a batch of B sequences a step cannot take less than

    step_s(B) = bytes read per device per step / memory bandwidth per device
    bytes(B)  = dense weights / devices
              + routed-expert weights / devices x (1 - (1 - active / experts) ** B)
              + B x context x KV bytes per token per device

(a mixture of experts touches, on average, that share of its experts for B independent tokens;
context = input + half the output, the mean length a sequence has while it decodes). The floor of
a level of concurrency C is C sequences in one batch:

    floor per stream = 1 / step_s(C) tok/s        floor of the batch = C / step_s(C) tok/s
    share            = measured output tok/s / floor of the batch

`floor_of` and `share_of` are the one formula: the bench points, the report, recommendation.json
and the tools' text all read them. The floor leaves speculation out (a speculative step yields
more than one token per sequence), so a speculative configuration may pass 100 %: the share says
by how much. Where the device or the model is not known the floor is None and no share is
printed - never a guess stated as a fact (`DEVICES` lists what is known, each with its source).

This layer does no I/O: the engine's /server_info, the model's config.json, a GGUF file's size
and agent.toml's [hardware] are read by their callers and handed in as numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from state.numbers import Amount, Count

GB = 1e9


@dataclass(frozen=True)
class Device:
    """One accelerator as its vendor's datasheet states it (each figure from `source`)."""

    name: str  # how we name it in a table
    aliases: tuple[str, ...]  # `nvidia-smi --query-gpu=name` strings, normalised (see `_key`)
    mem_bw_gb_s: float  # peak memory bandwidth, GB/s (1e9 bytes)
    mem_gb: float  # memory, GB
    bf16_tflops: float  # peak dense BF16 tensor throughput (without sparsity), TFLOPS
    interconnect: str  # between devices of one box, as the datasheet names it
    source: str  # the datasheet the figures above come from


# The known devices. Dense BF16 is the datasheet's "with sparsity" figure halved where the sheet
# gives only that one (its footnote says so).
DEVICES: tuple[Device, ...] = (
    Device(
        "H100 SXM",
        ("h100 80gb hbm3", "h100 sxm5 80gb", "h100 sxm"),
        3350.0,
        80.0,
        989.0,
        "NVLink 900 GB/s",
        "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column)",
    ),
    Device(
        "H100 PCIe",
        ("h100 pcie", "h100 80gb pcie"),
        2000.0,
        80.0,
        756.0,
        "PCIe Gen5 128 GB/s (NVLink bridge 600 GB/s)",
        "NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe column)",
    ),
    Device(
        "H100 NVL",
        ("h100 nvl",),
        3900.0,
        94.0,
        835.0,
        "PCIe Gen5 128 GB/s (NVLink bridge 600 GB/s)",
        "NVIDIA H100 Tensor Core GPU datasheet (H100 NVL column)",
    ),
    Device(
        "H200 SXM",
        ("h200", "h200 sxm", "h200 141gb hbm3e"),
        4800.0,
        141.0,
        989.0,
        "NVLink 900 GB/s",
        "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column)",
    ),
    Device(
        "H200 NVL",
        ("h200 nvl",),
        4800.0,
        141.0,
        835.0,
        "PCIe Gen5 128 GB/s (NVLink bridge 900 GB/s)",
        "NVIDIA H200 Tensor Core GPU datasheet (H200 NVL column)",
    ),
    Device(
        "A100 40GB SXM",
        ("a100 sxm4 40gb",),
        1555.0,
        40.0,
        312.0,
        "NVLink 600 GB/s",
        "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB SXM column)",
    ),
    Device(
        "A100 80GB SXM",
        ("a100 sxm4 80gb",),
        2039.0,
        80.0,
        312.0,
        "NVLink 600 GB/s",
        "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM column)",
    ),
    Device(
        "A100 80GB PCIe",
        ("a100 80gb pcie",),
        1935.0,
        80.0,
        312.0,
        "PCIe Gen4 64 GB/s (NVLink bridge 600 GB/s)",
        "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB PCIe column)",
    ),
    Device(
        "L4",
        ("l4",),
        300.0,
        24.0,
        121.0,
        "PCIe Gen4 64 GB/s",
        "NVIDIA L4 Tensor Core GPU datasheet (BF16 242 TFLOPS with sparsity)",
    ),
    Device(
        "L40S",
        ("l40s",),
        864.0,
        48.0,
        362.0,
        "PCIe Gen4 64 GB/s",
        "NVIDIA L40S GPU datasheet (BF16 733 TFLOPS with sparsity)",
    ),
    Device(
        "A10",
        ("a10",),
        600.0,
        24.0,
        125.0,
        "PCIe Gen4 64 GB/s",
        "NVIDIA A10 Tensor Core GPU datasheet (BF16 250 TFLOPS with sparsity)",
    ),
    Device(
        "B200",
        ("b200",),
        8000.0,
        180.0,
        2250.0,
        "NVLink 1.8 TB/s",
        "NVIDIA HGX B200 datasheet (8 GPUs: 1.44 TB, 64 TB/s, BF16 36 PFLOPS with sparsity)",
    ),
)


def _key(name: str) -> str:
    """'NVIDIA A100-SXM4-80GB' -> 'a100 sxm4 80gb': lower case, no vendor, one space between."""
    words = re.sub(r"[^a-z0-9]+", " ", name.lower()).split()
    return " ".join(w for w in words if w not in ("nvidia", "tesla", "geforce"))


def device_for(name: str) -> Device | None:
    """The device an `nvidia-smi --query-gpu=name` string names, or None when not known here
    (a table's own name works as well: "H100 SXM")."""
    key = _key(name)
    for device in DEVICES:
        if key == _key(device.name) or key in device.aliases:
            return device
    return None


def unknown_device_line(name: str) -> str:
    """What a host with a device not in the table says, in one line."""
    return (
        f"device {name!r} is not in the known devices' table (docs/physics.md): no floor and no "
        "share of it; state its bandwidth as [hardware] mem_bw_gb_s in agent.toml"
    )


@dataclass(frozen=True)
class ModelBytes:
    """What one decode step reads, in bytes, for all devices together (split over `devices`)."""

    weight_bytes: float  # every weight the step may read (all experts included)
    kv_bytes_per_token: float  # the KV cache of one token of context (all layers)
    expert_bytes: float = 0.0  # the routed experts' part of weight_bytes (0: a dense model)
    experts: int = 0  # routed experts per layer (0: a dense model)
    active_experts: int = 0  # routed experts each token uses
    source: str = ""  # where the figures come from (config.json, a GGUF file, agent.toml, ...)

    def weights_read(self, batch: int) -> float:
        """Weight bytes one step over `batch` sequences reads: the dense part, and the share of
        the experts `batch` independent tokens touch."""
        dense = self.weight_bytes - self.expert_bytes
        if self.experts <= 0 or self.expert_bytes <= 0:
            return self.weight_bytes
        untouched = (1.0 - min(self.active_experts, self.experts) / self.experts) ** batch
        return dense + self.expert_bytes * (1.0 - untouched)


@dataclass(frozen=True)
class Physics:
    """The hardware and the model one server runs: enough for the floor."""

    device: str  # the device's name (a table's, an engine's, or a CPU host's)
    devices: int  # devices the server spreads the model over (tensor parallel)
    mem_bw_gb_s: float  # memory bandwidth per device, GB/s
    model: ModelBytes
    source: str  # where the bandwidth comes from: a datasheet, a probe, agent.toml, the engine
    kv_split: int = 0  # devices the KV cache is split over (0: `devices`; 1: replicated, MLA)

    def step_bytes(self, batch: int, context: float) -> float:
        """Bytes one device reads in one decode step over `batch` sequences of `context` tokens."""
        kv_devices = self.kv_split or self.devices
        weights = self.model.weights_read(batch) / self.devices
        return weights + batch * context * self.model.kv_bytes_per_token / kv_devices

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "devices": self.devices,
            "mem_bw_gb_s": self.mem_bw_gb_s,
            "weight_bytes": self.model.weight_bytes,
            "expert_bytes": self.model.expert_bytes,
            "experts": self.model.experts,
            "active_experts": self.model.active_experts,
            "kv_bytes_per_token": self.model.kv_bytes_per_token,
            "kv_split": self.kv_split,
            "source": self.source,
            "model_source": self.model.source,
        }


def physics_from_json(raw: object) -> Physics | None:
    """A description as `to_json` writes it (a result file's, an engine's /server_info
    "physics"), or None when it is not one: every figure a finite number above 0 where needed."""
    if not isinstance(raw, Mapping):
        return None
    try:
        bw = _positive(raw["mem_bw_gb_s"])
        devices = int(raw.get("devices", 1))
        model = ModelBytes(
            weight_bytes=_positive(raw["weight_bytes"]),
            kv_bytes_per_token=_at_least_zero(raw.get("kv_bytes_per_token", 0.0)),
            expert_bytes=_at_least_zero(raw.get("expert_bytes", 0.0)),
            experts=int(raw.get("experts", 0)),
            active_experts=int(raw.get("active_experts", 0)),
            source=str(raw.get("model_source", "")),
        )
        kv_split = int(raw.get("kv_split", 0))
    except (KeyError, TypeError, ValueError):
        return None
    if devices < 1 or kv_split < 0 or model.expert_bytes > model.weight_bytes:
        return None
    name, source = str(raw.get("device", "")), str(raw.get("source", ""))
    return Physics(name, devices, bw, model, source, kv_split)


def _positive(value: object) -> float:
    out = _at_least_zero(value)
    if out <= 0:
        raise ValueError("not above 0")
    return out


def _at_least_zero(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("not a number")
    out = float(value)
    if not (0 <= out < float("inf")):
        raise ValueError("not a finite number >= 0")
    return out


@dataclass(frozen=True)
class Floor:
    """The bandwidth floor of one level: C sequences decoding in one batch."""

    concurrency: int
    step_bytes: float  # bytes per device per step
    step_ms: float  # the shortest step the bandwidth allows
    stream_tok_s: float  # one sequence's tokens per second at that step
    batch_tok_s: float  # the batch's: concurrency x stream_tok_s


def floor_of(physics: Physics, concurrency: int, input_len: int, output_len: int) -> Floor:
    """The bandwidth floor at `concurrency` sequences of `input_len` prompt tokens and
    `output_len` answer tokens (the one formula; the module's docstring states it)."""
    batch = max(1, concurrency)
    context = input_len + output_len / 2
    step_bytes = physics.step_bytes(batch, context)
    step_s = step_bytes / (physics.mem_bw_gb_s * GB)
    return Floor(batch, step_bytes, step_s * 1000, 1 / step_s, batch / step_s)


def share_of(output_tok_s: float, floor: Floor) -> float:
    """A measured output throughput's share of the floor of its level (1.0: at the floor)."""
    return output_tok_s / floor.batch_tok_s


# ------------------------------------------------------------------ the model's bytes


def hf_model_bytes(config: Mapping[str, Any], dtype_bytes: float, params: float) -> ModelBytes:
    """A Hugging Face config.json's model: `params` parameters of `dtype_bytes` each (2 for
    BF16), the KV cache per token from its layers, KV heads and head dim (K and V, in the same
    dtype), and a mixture of experts' routed share from its expert counts and sizes."""
    text = config.get("text_config")
    cfg: Mapping[str, Any] = text if isinstance(text, Mapping) else config
    layers = int(cfg["num_hidden_layers"])
    heads = int(cfg["num_attention_heads"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads)
    kv = 2 * layers * kv_heads * head_dim * dtype_bytes
    experts = int(cfg.get("n_routed_experts") or cfg.get("num_local_experts") or 0)
    active = int(cfg.get("num_experts_per_tok") or 0)
    expert_bytes = 0.0
    if experts and active:
        inter = int(cfg.get("moe_intermediate_size") or cfg["intermediate_size"])
        moe_layers = layers - int(cfg.get("first_k_dense_replace") or 0)
        expert_bytes = 3 * int(cfg["hidden_size"]) * inter * experts * moe_layers * dtype_bytes
    weights = params * dtype_bytes
    return ModelBytes(
        weights, kv, min(expert_bytes, weights), experts, active, "config.json x parameters"
    )


def gguf_model_bytes(
    weight_bytes: float, layers: int, kv_heads: int, head_dim: int, kv_dtype_bytes: float = 2.0
) -> ModelBytes:
    """A GGUF model: the bytes of the tensors a step reads (every tensor but the token
    embeddings, of which a step looks up one row - unless they are the output head too), the KV
    cache per token from the header's layers, KV heads and head dim (f16 by default)."""
    kv = 2 * layers * kv_heads * head_dim * kv_dtype_bytes
    return ModelBytes(float(weight_bytes), kv, source="GGUF tensors and header")


# ------------------------------------------------------------------ agent.toml's [hardware]


class HardwareConfig(BaseModel):
    """[hardware]: what nothing else can tell - the device (a name of the known devices' table)
    or its bandwidth, and the model's bytes. Each figure bounded, as every number of the config
    (state/numbers.py). A mixture of experts needs expert_weights_gb, experts and active_experts
    together; with any of them missing the model is read as dense (every weight each step)."""

    model_config = ConfigDict(extra="forbid")

    device: str | None = None  # a name the table knows ("H100 SXM", "NVIDIA H100 80GB HBM3")
    mem_bw_gb_s: Annotated[Amount, Field(le=1e6)] | None = None  # per device, GB/s
    devices: Annotated[Count, Field(le=4096)] | None = None  # None: the configuration's GPUs
    weights_gb: Annotated[Amount, Field(le=1e5)] | None = None  # all weights, all devices
    expert_weights_gb: Annotated[Amount, Field(le=1e5)] | None = None  # routed experts' part
    experts: Annotated[Count, Field(le=100_000)] | None = None
    active_experts: Annotated[Count, Field(le=100_000)] | None = None
    kv_kb_per_token: Annotated[Amount, Field(le=1e6)] | None = None  # all layers, all devices

    @model_validator(mode="after")
    def coherent(self) -> HardwareConfig:
        if self.device is not None and device_for(self.device) is None:
            raise ValueError(unknown_device_line(self.device))
        if self.device is not None and self.mem_bw_gb_s is not None:
            raise ValueError("set device or mem_bw_gb_s, not both")
        if (self.active_experts or 0) > (self.experts or self.active_experts or 0):
            raise ValueError("active_experts is more than experts")
        if (self.expert_weights_gb or 0) > (self.weights_gb or self.expert_weights_gb or 0):
            raise ValueError("expert_weights_gb is more than weights_gb")
        return self

    @property
    def states_device(self) -> bool:
        """It names the device or its bandwidth (else the host's nvidia-smi is asked)."""
        return self.device is not None or self.mem_bw_gb_s is not None

    def physics(self, devices: int, found: Device | None = None) -> Physics | None:
        """The description it states for a configuration over `devices` GPUs (its own `devices`
        wins), with the device `found` on the host where it names none; None when the bandwidth
        or the weights are left out."""
        if self.weights_gb is None:
            return None
        known = device_for(self.device) if self.device is not None else found
        if known is not None:
            bw, name, source = known.mem_bw_gb_s, known.name, known.source
        elif self.mem_bw_gb_s is not None:
            bw, name, source = self.mem_bw_gb_s, "device", "agent.toml [hardware] mem_bw_gb_s"
        else:
            return None
        model = ModelBytes(
            self.weights_gb * GB,
            (self.kv_kb_per_token or 0.0) * 1000,
            (self.expert_weights_gb or 0.0) * GB,
            self.experts or 0,
            self.active_experts or 0,
            "agent.toml [hardware]",
        )
        return Physics(name, self.devices or max(1, devices), bw, model, source)
