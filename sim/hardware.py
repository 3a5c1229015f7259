"""Hardware profiles: the box the simulator pretends to be, with its fitted step-model constants.

Times are milliseconds of simulated (model) time. docs/sim.md explains each constant and how
the reference profile was calibrated against the public figures.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hardware:
    name: str
    description: str
    gpus: int
    gpu_mem_gb: float
    nvlink: bool
    sm: int  # compute capability x10; fa3 needs 90
    model: str  # the model served by default
    weights_gb: float  # target weights, all ranks together (split by --tp)
    draft_weights_gb: float  # EAGLE-3 draft head, all ranks together
    kv_kb_per_token: float  # KV cache per token per GPU (MLA: replicated on every rank)
    context_len: int
    act_gb: float  # activations, NCCL buffers: outside the static pool
    graph_gb_per_bs: float  # CUDA-graph memory per captured batch size
    # --- step model (ms) ---
    a_ms: float  # fixed cost of one decode forward (flashinfer, fused all-reduce, CUDA graph)
    ar_ms: float  # extra fixed cost per forward when the all-reduce is not fused
    m_ms: float  # per-sequence cost (attention, KV reads)
    c_ms: float  # per-token cost (MoE experts, GEMMs): paid for every verified token
    d_ms: float  # fixed cost of one draft step
    ar_draft_ms: float  # extra fixed cost per draft step without all-reduce fusion
    e_ms: float  # per-sequence cost of one draft step (draft head, tree bookkeeping)
    topk_overhead: float  # relative extra draft cost per additional top-k branch
    g_ms: float  # eager-mode penalty per forward when the batch exceeds cuda-graph-max-bs
    p_ms: float  # prefill cost per prompt token
    alpha: float  # EAGLE-3 per-token acceptance probability (greedy, chain)
    tree_gain: float  # how much extra top-k branches raise the acceptance (exponent)
    custom_ar_ms: float  # fixed-cost change when custom all-reduce works (NVLink only)
    # --- modelled power per GPU (W), served on /metrics as sim:power_watts (docs/sim.md) ---
    idle_w: float = 70.0  # loaded, nothing running
    busy_w: float = 250.0  # decoding a batch of one (memory-bound: the weights read each step)
    peak_w: float = 380.0  # a full batch (max-running-requests): H100 NVL's 400 W board limit
    # --- the physics the step model sits above (docs/sim.md, "Against physics"): /server_info's
    # "physics"; mem_bw_gb_s 0: not modelled (a profile that changes the box and states none) ---
    device: str = ""  # the device, as the known devices' table names it (tools/domain/physics.py)
    mem_bw_gb_s: float = 0.0  # memory bandwidth per GPU, GB/s
    expert_weights_gb: float = 0.0  # the routed experts' part of weights_gb (0: a dense model)
    experts: int = 0  # routed experts per layer
    active_experts: int = 0  # routed experts each token uses
    # the bounds at high batch (docs/physics.md): 0 where not modelled. The compute bound counts
    # 2 FLOPs per active parameter, the parameters being the active bytes over 2 (a 16-bit
    # statement: for 8- or 4-bit weights the tensor cores' peak doubles or quadruples as the
    # parameters per byte do, so the bound is the same); the interconnect's, two ring all-reduces
    # of hidden x 2 bytes per token a layer over the tensor-parallel GPUs
    peak_tflops: float = 0.0  # dense 16-bit TFLOPS per GPU
    link_gb_s: float = 0.0  # interconnect per GPU, one direction, GB/s
    hidden: int = 0  # the model's hidden size: an all-reduce's message per token
    layers: int = 0


REFERENCE = Hardware(
    name="reference",
    description="8x H100 NVL 94 GB on PCIe Gen5 (no NVLink), 1T-parameter MoE in INT4 (SGLang)",
    gpus=8,
    gpu_mem_gb=94.0,
    nvlink=False,
    sm=90,
    model="moonshotai/Kimi-K2-Thinking",
    weights_gb=520.0,
    draft_weights_gb=8.0,
    kv_kb_per_token=40.0,
    context_len=131072,
    act_gb=4.0,
    graph_gb_per_bs=0.015,
    a_ms=9.65,
    ar_ms=0.90,
    m_ms=0.25,
    c_ms=0.72,
    d_ms=2.36,
    ar_draft_ms=1.60,
    e_ms=0.78,
    topk_overhead=0.03,
    g_ms=21.8,
    p_ms=0.200,
    alpha=0.60,
    tree_gain=1.0,
    custom_ar_ms=0.0,
    device="H100 NVL",
    mem_bw_gb_s=3900.0,  # NVIDIA H100 NVL datasheet
    # Kimi K2: 384 routed experts, 8 per token; its ~11.7B non-expert parameters are BF16
    # (~24 GB), the rest of the 520 GB is the INT4 experts
    expert_weights_gb=496.0,
    experts=384,
    active_experts=8,
    peak_tflops=835.0,  # NVIDIA H100 NVL datasheet, dense BF16
    link_gb_s=64.0,  # PCIe Gen5 x16 one direction: the NVLink bridge joins pairs only
    hidden=7168,  # Kimi K2's config.json
    layers=61,
)

NVLINK = Hardware(
    name="nvlink",
    description="8x H100 SXM 80 GB with NVLink, 1T-parameter MoE in INT4 (SGLang)",
    gpus=8,
    gpu_mem_gb=80.0,
    nvlink=True,
    sm=90,
    model="moonshotai/Kimi-K2-Thinking",
    weights_gb=520.0,
    draft_weights_gb=8.0,
    kv_kb_per_token=40.0,
    context_len=131072,
    act_gb=4.0,
    graph_gb_per_bs=0.015,
    a_ms=7.0,
    ar_ms=0.5,
    m_ms=0.12,
    c_ms=0.70,
    d_ms=2.0,
    ar_draft_ms=0.8,
    e_ms=0.5,
    topk_overhead=0.03,
    g_ms=8.0,
    p_ms=0.15,
    alpha=0.66,
    tree_gain=0.6,
    custom_ar_ms=-1.0,
    device="H100 SXM",
    mem_bw_gb_s=3350.0,  # NVIDIA H100 SXM datasheet
    expert_weights_gb=496.0,
    experts=384,
    active_experts=8,
    peak_tflops=989.0,  # NVIDIA H100 SXM datasheet, dense BF16
    link_gb_s=450.0,  # NVLink 4, 900 GB/s both directions
    hidden=7168,
    layers=61,
)

PROFILES: dict[str, Hardware] = {h.name: h for h in (REFERENCE, NVLINK)}
