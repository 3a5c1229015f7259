"""Against physics: how far a measured throughput is from what the hardware allows.

Decoding streams the weights (and the KV cache of every running sequence) from memory once per
step, so at a batch of B sequences a step cannot take less than

    step_s(B) = bytes read per device per step / memory bandwidth per device
    bytes(B)  = dense weights / devices
              + routed-expert weights / devices x (1 - (1 - active / experts) ** B)
              + B x context x KV bytes per token per device

(a mixture of experts touches, on average, that share of its experts for B independent tokens;
context = input + half the output, the mean length a sequence has while it decodes). At high
batch two more bounds may take over, each computed where its figures are known:

    compute_s(B) = 2 x active parameters x B / (devices x peak FLOP/s)
    link_s(B)    = layers x 2 all-reduces x 2 (n - 1) / n x B x hidden x activation bytes
                   / interconnect bytes per second (one direction), over n tensor-parallel devices

The step takes at least the longest of the three; that one is the level's bound. The floor of a
level of concurrency C is C sequences in one batch:

    floor per stream = 1 / step_s(C) tok/s        floor of the batch = C / step_s(C) tok/s
    share            = measured output tok/s / floor of the batch

Each bound leaves work out (attention's FLOPs, an all-reduce's latency), so each stays a floor.
The bytes follow the dtypes a configuration serves in (`Served`: vLLM's --dtype and
--kv-cache-dtype, llama.cpp's --cache-type-k/-v), where the stated figures name their dtype.

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
from typing import Annotated, Any, Literal

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
    # the interconnect one device sends over, GB/s in one direction (half the datasheet's
    # bidirectional figure: NVLink 900 -> 450, PCIe Gen5 x16 128 -> 64); the link a tensor-parallel
    # all-reduce runs over without a bridge or switch named
    link_gb_s: float = 0.0


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
        450.0,
    ),
    Device(
        "H100 PCIe",
        ("h100 pcie", "h100 80gb pcie"),
        2000.0,
        80.0,
        756.0,
        "PCIe Gen5 128 GB/s (NVLink bridge 600 GB/s)",
        "NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe column)",
        64.0,
    ),
    Device(
        "H100 NVL",
        ("h100 nvl",),
        3900.0,
        94.0,
        835.0,
        "PCIe Gen5 128 GB/s (NVLink bridge 600 GB/s)",
        "NVIDIA H100 Tensor Core GPU datasheet (H100 NVL column)",
        64.0,
    ),
    Device(
        "H200 SXM",
        ("h200", "h200 sxm", "h200 141gb hbm3e"),
        4800.0,
        141.0,
        989.0,
        "NVLink 900 GB/s",
        "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column)",
        450.0,
    ),
    Device(
        "H200 NVL",
        ("h200 nvl",),
        4800.0,
        141.0,
        835.0,
        "PCIe Gen5 128 GB/s (NVLink bridge 900 GB/s)",
        "NVIDIA H200 Tensor Core GPU datasheet (H200 NVL column)",
        64.0,
    ),
    Device(
        "A100 40GB SXM",
        ("a100 sxm4 40gb",),
        1555.0,
        40.0,
        312.0,
        "NVLink 600 GB/s",
        "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB SXM column)",
        300.0,
    ),
    Device(
        "A100 80GB SXM",
        ("a100 sxm4 80gb",),
        2039.0,
        80.0,
        312.0,
        "NVLink 600 GB/s",
        "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM column)",
        300.0,
    ),
    Device(
        "A100 80GB PCIe",
        ("a100 80gb pcie",),
        1935.0,
        80.0,
        312.0,
        "PCIe Gen4 64 GB/s (NVLink bridge 600 GB/s)",
        "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB PCIe column)",
        32.0,
    ),
    Device(
        "L4",
        ("l4",),
        300.0,
        24.0,
        121.0,
        "PCIe Gen4 64 GB/s",
        "NVIDIA L4 Tensor Core GPU datasheet (BF16 242 TFLOPS with sparsity)",
        32.0,
    ),
    Device(
        "L40S",
        ("l40s",),
        864.0,
        48.0,
        362.0,
        "PCIe Gen4 64 GB/s",
        "NVIDIA L40S GPU datasheet (BF16 733 TFLOPS with sparsity)",
        32.0,
    ),
    Device(
        "A10",
        ("a10",),
        600.0,
        24.0,
        125.0,
        "PCIe Gen4 64 GB/s",
        "NVIDIA A10 Tensor Core GPU datasheet (BF16 250 TFLOPS with sparsity)",
        32.0,
    ),
    Device(
        "B200",
        ("b200",),
        8000.0,
        180.0,
        2250.0,
        "NVLink 1.8 TB/s",
        "NVIDIA HGX B200 datasheet (8 GPUs: 1.44 TB, 64 TB/s, BF16 36 PFLOPS with sparsity)",
        900.0,
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


# Bytes per element of a dtype as the engines name it: vLLM's and SGLang's --dtype and
# --kv-cache-dtype (vllm/config/model.py ModelDType, vllm/config/cache.py CacheDType), llama.cpp's
# --cache-type-k/-v (ggml's block types count their scales: q8_0 keeps 32 values in 34 bytes).
# A name not here has no size: a floor that needs it is not computed.
DTYPE_BYTES: dict[str, float] = {
    "float32": 4.0,
    "float": 4.0,
    "fp32": 4.0,
    "f32": 4.0,
    "bfloat16": 2.0,
    "bf16": 2.0,
    "float16": 2.0,
    "half": 2.0,
    "fp16": 2.0,
    "f16": 2.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "fp8_inc": 1.0,
    "int8": 1.0,
    "q8_0": 34 / 32,
    "q5_1": 24 / 32,
    "q5_0": 22 / 32,
    "q4_1": 20 / 32,
    "q4_0": 18 / 32,
    "iq4_nl": 18 / 32,
}
AUTO = "auto"  # the engine's default: the model's dtype (its rules in `Served`)


def dtype_bytes(name: str) -> float | None:
    """Bytes per element of the dtype `name` (any case), or None when the table has no size."""
    return DTYPE_BYTES.get(name.strip().lower())


@dataclass(frozen=True)
class Served:
    """The dtypes one configuration serves in, as its flags say ("auto": the flag absent or
    auto) and how its engine reads "auto" (tools/bench/floor.py builds it from the engine
    profile's [precision] flags)."""

    weights: str = AUTO  # vLLM's --dtype: the weights' and activations' dtype
    kv_k: str = AUTO  # the K cache's (vLLM's --kv-cache-dtype sets K and V alike)
    kv_v: str = AUTO
    # what "auto" makes of a float32 checkpoint ("": keeps it): vLLM and SGLang serve it in 16
    # bits (vllm/config/model.py _resolve_auto_dtype: "Downcast for float32 models")
    auto_float32: str = ""


class UnknownDtype(ValueError):
    """A dtype the floor's bytes would need that has no size in DTYPE_BYTES."""


@dataclass(frozen=True)
class ModelBytes:
    """What one decode step reads, in bytes, for all devices together (split over `devices`)."""

    weight_bytes: float  # every weight the step may read (all experts included)
    kv_bytes_per_token: float  # the KV cache of one token of context (all layers)
    expert_bytes: float = 0.0  # the routed experts' part of weight_bytes (0: a dense model)
    experts: int = 0  # routed experts per layer (0: a dense model)
    active_experts: int = 0  # routed experts each token uses
    source: str = ""  # where the figures come from (config.json, a GGUF file, agent.toml, ...)
    # the dtypes the figures above are in ("": fixed, whatever a configuration's flags say - a
    # quantized checkpoint, a GGUF's tensors); with one named, the bytes follow `Served`
    weights_dtype: str = ""
    kv_dtype: str = ""
    hidden: int = 0  # the hidden size: an all-reduce's message per token (0: not known)
    layers: int = 0  # transformer layers: all-reduces per step (0: not known)

    def weights_read(self, batch: int) -> float:
        """Weight bytes one step over `batch` sequences reads: the dense part, and the share of
        the experts `batch` independent tokens touch."""
        dense = self.weight_bytes - self.expert_bytes
        if self.experts <= 0 or self.expert_bytes <= 0:
            return self.weight_bytes
        untouched = (1.0 - min(self.active_experts, self.experts) / self.experts) ** batch
        return dense + self.expert_bytes * (1.0 - untouched)

    def active_params(self) -> float | None:
        """Parameters one token multiplies through (a mixture of experts: its active experts'
        share), from the bytes and their dtype; None where the dtype is not named."""
        size = dtype_bytes(self.weights_dtype) if self.weights_dtype else None
        if not size:
            return None
        per_token = self.weight_bytes - self.expert_bytes
        if self.experts > 0:
            per_token += self.expert_bytes * min(self.active_experts, self.experts) / self.experts
        return per_token / size

    def served(self, served: Served) -> ModelBytes:
        """The bytes in the dtypes a configuration serves in: weights x (served / stated bytes
        per element), each of K and V likewise. A figure whose dtype is not named stays as it
        is. Raises UnknownDtype for a served dtype without a size."""
        weights = self.weights_dtype
        scale = 1.0
        if weights:
            stated = _size(weights, "[hardware] weights_dtype")
            target = served.weights
            if target.lower() == AUTO:
                downcast = served.auto_float32 and stated == 4.0
                target = served.auto_float32 if downcast else weights
            scale = _size(target, "--dtype") / stated
            weights = target
        kv = self.kv_bytes_per_token
        if self.kv_dtype:
            stated_kv = _size(self.kv_dtype, "[hardware] kv_dtype")
            auto = weights or self.kv_dtype  # an auto KV cache: the served weights' dtype
            k, v = (auto if d.lower() == AUTO else d for d in (served.kv_k, served.kv_v))
            kv *= (_size(k, "the K cache dtype") + _size(v, "the V cache dtype")) / 2 / stated_kv
            kv_dtype = k if k == v else f"{k}+{v}"
        return ModelBytes(
            self.weight_bytes * scale,
            kv,
            self.expert_bytes * scale,
            self.experts,
            self.active_experts,
            self.source,
            weights,
            kv_dtype if self.kv_dtype else "",
            self.hidden,
            self.layers,
        )


def _size(name: str, what: str) -> float:
    size = dtype_bytes(name)
    if size is None:
        raise UnknownDtype(
            f"no floor: {what} {name!r} has no size in the dtype table (docs/physics.md)"
        )
    return size


Bound = Literal["memory", "compute", "interconnect"]


@dataclass(frozen=True)
class Physics:
    """The hardware and the model one server runs: enough for the floor."""

    device: str  # the device's name (a table's, an engine's, or a CPU host's)
    devices: int  # devices the server spreads the model over (tensor parallel)
    mem_bw_gb_s: float  # memory bandwidth per device, GB/s
    model: ModelBytes
    source: str  # where the bandwidth comes from: a datasheet, a probe, agent.toml, the engine
    kv_split: int = 0  # devices the KV cache is split over (0: `devices`; 1: replicated, MLA)
    peak_tflops: float = 0.0  # dense 16-bit tensor TFLOPS per device (0: no compute bound)
    link_gb_s: float = 0.0  # interconnect per device, one direction (0: no interconnect bound)

    def step_bytes(self, batch: int, context: float) -> float:
        """Bytes one device reads in one decode step over `batch` sequences of `context` tokens."""
        kv_devices = self.kv_split or self.devices
        weights = self.model.weights_read(batch) / self.devices
        return weights + batch * context * self.model.kv_bytes_per_token / kv_devices

    def compute_s(self, batch: int) -> float:
        """The shortest step the devices' peak compute allows: 2 FLOPs per active parameter per
        token (attention's left out); 0 where the peak or the parameters are not known. An 8-bit
        model's peak is twice the 16-bit one (fp8 tensor cores), a 4-bit's four times: a floor
        may overstate the peak, never understate it."""
        params = self.model.active_params()
        if not self.peak_tflops or not params:
            return 0.0
        size = dtype_bytes(self.model.weights_dtype) or 2.0
        peak = self.peak_tflops * 1e12 * max(1.0, 2.0 / size) * self.devices
        return 2 * params * batch / peak

    def link_s(self, batch: int) -> float:
        """The shortest step the interconnect allows a tensor-parallel box: two ring all-reduces
        a layer (after attention, after the MLP), each sending 2 (n - 1) / n of B x hidden
        activations from every device (latency left out); 0 on one device or where the link,
        the hidden size or the layers are not known."""
        m, n = self.model, self.devices
        if n < 2 or not self.link_gb_s or not m.hidden or not m.layers:
            return 0.0
        size = dtype_bytes(m.weights_dtype) if m.weights_dtype else None
        act = max(2.0, size or 2.0)  # activations in 16 bits, or the model's float32
        sent = m.layers * 2 * 2 * (n - 1) / n * batch * m.hidden * act
        return sent / (self.link_gb_s * GB)

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
            "weights_dtype": self.model.weights_dtype,
            "kv_dtype": self.model.kv_dtype,
            "hidden": self.model.hidden,
            "layers": self.model.layers,
            "peak_tflops": self.peak_tflops,
            "link_gb_s": self.link_gb_s,
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
            weights_dtype=str(raw.get("weights_dtype", "")),
            kv_dtype=str(raw.get("kv_dtype", "")),
            hidden=int(raw.get("hidden", 0)),
            layers=int(raw.get("layers", 0)),
        )
        kv_split = int(raw.get("kv_split", 0))
        peak = _at_least_zero(raw.get("peak_tflops", 0.0))
        link = _at_least_zero(raw.get("link_gb_s", 0.0))
    except (KeyError, TypeError, ValueError):
        return None
    if devices < 1 or kv_split < 0 or model.expert_bytes > model.weight_bytes:
        return None
    if min(model.hidden, model.layers) < 0:
        return None
    name, source = str(raw.get("device", "")), str(raw.get("source", ""))
    return Physics(name, devices, bw, model, source, kv_split, peak, link)


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
    """The floor of one level: C sequences decoding in one batch, at the tightest bound."""

    concurrency: int
    step_bytes: float  # bytes per device per step
    step_ms: float  # the shortest step the hardware allows: the longest of the three below
    stream_tok_s: float  # one sequence's tokens per second at that step
    batch_tok_s: float  # the batch's: concurrency x stream_tok_s
    bound: Bound = "memory"  # which bound the step is
    memory_ms: float = 0.0  # the step the memory bandwidth allows
    compute_ms: float = 0.0  # the step the peak compute allows (0: not known)
    link_ms: float = 0.0  # the step the interconnect allows (0: not known, or one device)


def floor_of(physics: Physics, concurrency: int, input_len: int, output_len: int) -> Floor:
    """The floor at `concurrency` sequences of `input_len` prompt tokens and `output_len` answer
    tokens: the longest of the memory, compute and interconnect bounds (the one formula; the
    module's docstring states it)."""
    batch = max(1, concurrency)
    context = input_len + output_len / 2
    step_bytes = physics.step_bytes(batch, context)
    bounds: dict[Bound, float] = {
        "memory": step_bytes / (physics.mem_bw_gb_s * GB),
        "compute": physics.compute_s(batch),
        "interconnect": physics.link_s(batch),
    }
    bound = max(bounds, key=lambda k: bounds[k])  # the memory bound on a tie: the first
    step_s = bounds[bound]
    ms = {k: v * 1000 for k, v in bounds.items()}
    return Floor(
        batch,
        step_bytes,
        step_s * 1000,
        1 / step_s,
        batch / step_s,
        bound,
        ms["memory"],
        ms["compute"],
        ms["interconnect"],
    )


def share_of(output_tok_s: float, floor: Floor) -> float:
    """A measured output throughput's share of the floor of its level (1.0: at the floor)."""
    return output_tok_s / floor.batch_tok_s


# ------------------------------------------------------------------ what is left to gain

# What a lever family reaches at a memory-bound level, as a share of the floor. Well-built stacks
# stop at 75-80 % of the bandwidth floor at batch 1 (SGLang: 158 of 209 tok/s, 76 %, Llama-3.1-8B
# on an H100; Hazy Research's megakernel: 78 % of HBM bandwidth on Llama-3.2-1B): flags choose
# among the kernels a stack has, so they reach that at most (the upper end, so that a family is
# never said to be spent too early). Kernels written for the model approach the floor itself;
# speculation passes it (more than one token a step) and has no ceiling.
Family = Literal["flags", "kernels", "speculation"]
CEILINGS: dict[Family, float | None] = {"flags": 0.80, "kernels": 1.0, "speculation": None}


def headroom(best_share: float, family: Family) -> float | None:
    """What is left to `family` at a memory-bound level where the best share measured is
    `best_share`: its ceiling over the best, minus 1 (0: reached; None: no ceiling). Beside the
    objective's noise floor it says whether tuning that family can still pay."""
    ceiling = CEILINGS[family]
    if ceiling is None:
        return None
    return max(0.0, ceiling / best_share - 1) if best_share > 0 else float("inf")


@dataclass(frozen=True)
class LevelHeadroom:
    """One level against physics: the best share any configuration measured there, and what
    flags and kernels could still add (None where the level is not memory-bound: the ceilings
    are of memory-bound levels)."""

    level: int
    bound: str
    best_share: float
    flags: float | None
    kernels: float | None


@dataclass(frozen=True)
class Headroom:
    """What is left to gain at each level, and whether tuning flags is done: the most flags
    could still add at a memory-bound level is under the objective's noise floor. The report
    and recommend both read it from `headroom_of`."""

    levels: list[LevelHeadroom]
    noise: float | None  # the objective's noise floor (None: not known)

    @property
    def most(self) -> LevelHeadroom | None:
        """The memory-bound level where flags could still add the most; None without one."""
        bound = [h for h in self.levels if h.flags is not None]
        return max(bound, key=lambda h: h.flags or 0.0, default=None)

    @property
    def flags_done(self) -> bool | None:
        """True when flags could add less than the noise floor at every memory-bound level;
        None where that cannot be said (no memory-bound level, or the noise floor unknown)."""
        most = self.most
        if most is None or self.noise is None:
            return None
        return (most.flags or 0.0) < self.noise

    @property
    def flags_spent(self) -> bool:
        """The autopilot's stop signal: flags could add less than the noise floor at every level
        of the headroom, each one memory-bound. Stricter than `flags_done`, which reads the
        memory-bound levels only: a level of another bound has no ceiling to stop at, and an
        unknown noise floor says nothing."""
        if not self.levels or self.noise is None:
            return False
        return all(h.flags is not None and h.flags < self.noise for h in self.levels)

    def spent_line(self) -> str:
        """Why flags are spent, in one line (the planner's narration and its `planned` event)."""
        most = self.most
        left = 0.0 if most is None else most.flags or 0.0
        where = "" if most is None else f" (C={most.level})"
        shares = ", ".join(f"C={h.level} {h.best_share:.0%}" for h in self.levels)
        return (
            f"against physics, flags are spent: with the best shares of the floor at {shares}, "
            f"flags could still add at most {left:.1%}{where} (their ceiling: "
            f"{CEILINGS['flags']:.0%} of the floor), under the least gain the campaign resolves "
            f"({self.noise or 0:.1%});"
            " only kernels or speculation can gain more"
        )


def headroom_of(best: Mapping[int, tuple[float, str]], noise: float | None) -> Headroom:
    """The headroom of each level from {level: (the best share measured, its bound)}."""
    levels = []
    for level, (share, bound) in sorted(best.items()):
        memory = bound == "memory"
        flags = headroom(share, "flags") if memory else None
        kernels = headroom(share, "kernels") if memory else None
        levels.append(LevelHeadroom(level, bound, share, flags, kernels))
    return Headroom(levels, noise)


# ------------------------------------------------------------------ the model's bytes


def hf_model_bytes(config: Mapping[str, Any], dtype: str, params: float) -> ModelBytes:
    """A Hugging Face config.json's model: `params` parameters (those a step reads) in `dtype`
    ("bfloat16"), the KV cache per token from its layers, KV heads and head dim (K and V in the
    same dtype), and a mixture of experts' routed share from its expert counts and sizes. The
    figures name their dtype, so a configuration's --dtype rescales them (`ModelBytes.served`)."""
    size = _size(dtype, "the model's dtype")
    text = config.get("text_config")
    cfg: Mapping[str, Any] = text if isinstance(text, Mapping) else config
    layers = int(cfg["num_hidden_layers"])
    hidden = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    kv = 2 * layers * kv_heads * head_dim * size
    experts = int(cfg.get("n_routed_experts") or cfg.get("num_local_experts") or 0)
    active = int(cfg.get("num_experts_per_tok") or 0)
    expert_bytes = 0.0
    if experts and active:
        inter = int(cfg.get("moe_intermediate_size") or cfg["intermediate_size"])
        moe_layers = layers - int(cfg.get("first_k_dense_replace") or 0)
        expert_bytes = 3 * hidden * inter * experts * moe_layers * size
    weights = params * size
    return ModelBytes(
        weights,
        kv,
        min(expert_bytes, weights),
        experts,
        active,
        "config.json x parameters",
        dtype,
        dtype,
        hidden,
        layers,
    )


def gguf_model_bytes(
    weight_bytes: float, layers: int, kv_heads: int, head_dim: int, kv_dtype: str = "f16"
) -> ModelBytes:
    """A GGUF model: the bytes of the tensors a step reads (every tensor but the token
    embeddings, of which a step looks up one row - unless they are the output head too), fixed
    whatever the flags; the KV cache per token from the header's layers, KV heads and head dim,
    in llama.cpp's default f16, which --cache-type-k/-v change (`ModelBytes.served`)."""
    kv = 2 * layers * kv_heads * head_dim * _size(kv_dtype, "the KV cache dtype")
    return ModelBytes(
        float(weight_bytes), kv, source="GGUF tensors and header", kv_dtype=kv_dtype, layers=layers
    )


# ------------------------------------------------------------------ agent.toml's [hardware]


def _known_dtype(name: str | None) -> str | None:
    if name is not None and dtype_bytes(name) is None:
        raise ValueError(f"dtype {name!r} has no size in the dtype table (docs/physics.md)")
    return name


class HardwareConfig(BaseModel):
    """[hardware]: what nothing else can tell - the device (a name of the known devices' table)
    or its bandwidth, and the model's bytes. Each figure bounded, as every number of the config
    (state/numbers.py). A mixture of experts needs expert_weights_gb, experts and active_experts
    together; with any of them missing the model is read as dense (every weight each step).
    weights_dtype and kv_dtype name the dtype the weights and the KV figure are stated in: with
    them, the bytes follow each configuration's --dtype and KV cache flags."""

    model_config = ConfigDict(extra="forbid")

    device: str | None = None  # a name the table knows ("H100 SXM", "NVIDIA H100 80GB HBM3")
    mem_bw_gb_s: Annotated[Amount, Field(le=1e6)] | None = None  # per device, GB/s
    devices: Annotated[Count, Field(le=4096)] | None = None  # None: the configuration's GPUs
    weights_gb: Annotated[Amount, Field(le=1e5)] | None = None  # all weights, all devices
    expert_weights_gb: Annotated[Amount, Field(le=1e5)] | None = None  # routed experts' part
    experts: Annotated[Count, Field(le=100_000)] | None = None
    active_experts: Annotated[Count, Field(le=100_000)] | None = None
    kv_kb_per_token: Annotated[Amount, Field(le=1e6)] | None = None  # all layers, all devices
    weights_dtype: str | None = None  # the dtype weights_gb is in ("bfloat16"; none: fixed)
    kv_dtype: str | None = None  # the dtype kv_kb_per_token is in ("bfloat16", llama.cpp "f16")
    # the bounds at high batch (the device's table figures where it names one)
    peak_tflops: Annotated[Amount, Field(le=1e6)] | None = None  # dense 16-bit, per device
    link_gb_s: Annotated[Amount, Field(le=1e6)] | None = None  # per device, one direction
    hidden_size: Annotated[Count, Field(le=1_000_000)] | None = None  # all-reduce per token
    layers: Annotated[Count, Field(le=100_000)] | None = None

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
        _known_dtype(self.weights_dtype)
        _known_dtype(self.kv_dtype)
        return self

    @property
    def states_device(self) -> bool:
        """It names the device or its bandwidth (else the host's nvidia-smi is asked)."""
        return self.device is not None or self.mem_bw_gb_s is not None

    def physics(
        self, devices: int, found: Device | None = None, served: Served | None = None
    ) -> Physics | None:
        """The description it states for a configuration over `devices` GPUs (its own `devices`
        wins) serving in the dtypes `served` (None: as stated), with the device `found` on the
        host where it names none; None when the bandwidth or the weights are left out. Raises
        UnknownDtype where a served dtype has no size."""
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
            self.weights_dtype or "",
            self.kv_dtype or "",
            self.hidden_size or 0,
            self.layers or 0,
        )
        if served is not None:
            model = model.served(served)
        peak = self.peak_tflops or (known.bf16_tflops if known else 0.0)
        link = self.link_gb_s or (known.link_gb_s if known else 0.0)
        count = self.devices or max(1, devices)
        return Physics(name, count, bw, model, source, peak_tflops=peak, link_gb_s=link)
