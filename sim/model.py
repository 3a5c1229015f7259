"""The performance and memory model: what a configuration costs on a hardware profile.

Pure and deterministic (noise is applied by the engine). The formulas are documented in
docs/sim.md; the engine and `sim.truth` both read them from here, so they cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

from sim import drafter, predictability
from sim import profile as profiles
from sim.flags import ServerArgs, spec_params
from sim.hardware import Hardware
from sim.profile import BACKENDS

# the built-in box's model constants (a profile file may change each: sim/profile.py)
_BUILTIN = profiles.builtin("reference")
DEFAULT_MEM_FRACTION = _BUILTIN.default_mem_fraction
SPEC_MAX_RUNNING = _BUILTIN.spec_max_running  # SGLang resets max_running_requests to 48 for EAGLE
HEADS = _BUILTIN.heads  # attention heads of the served model: --tp must divide them
__all__ = ["BACKENDS", "DEFAULT_MEM_FRACTION", "HEADS", "SPEC_MAX_RUNNING", "Failure", "Model"]


@dataclass(frozen=True)
class Failure:
    """Why a start fails, where, and the log lines it leaves (see sim.startup)."""

    kind: str  # "tp", "oom_weights", "no_kv", "oom_graph", "custom_all_reduce"
    phase: str  # "args" (before loading), "load" (at fraction), "kv", "graph"
    message: str
    fraction: float = 1.0  # of the weights loaded when it fails (phase "load")


class Model:
    """One server configuration on one hardware profile."""

    def __init__(self, args: ServerArgs) -> None:
        self.args = args
        # the box's physics: a profile (file or shipped name), else the built-in --hardware box
        self.profile = (
            profiles.load(args.profile) if args.profile else profiles.builtin(args.hardware)
        )
        self.hw: Hardware = self.profile.hardware
        values = args.flag_values()
        self.effects = [e for e in self.profile.effects if profiles.holds(e.when, values)]
        self.rules = [f for f in self.profile.failures if profiles.holds(f.when, values)]
        self.steps, self.topk, self.draft_tokens = spec_params(args) if args.spec else (0, 1, 1)
        # a trained drafter (--speculative-draft-model-path) brings its own acceptance
        self.base_alpha = drafter.alpha_for(
            args.speculative_algorithm, args.speculative_draft_model_path, self.hw.alpha
        )

    # ---------------------------------------------------------------- memory
    def factor(self, term: str) -> float:
        """The product of the profile's effects on one term of the step model."""
        out = 1.0
        for effect in self.effects:
            out *= getattr(effect, term)
        return out

    @property
    def mem_fraction(self) -> float:
        return self.args.mem_fraction_static or self.profile.default_mem_fraction

    @property
    def weights_per_gpu_gb(self) -> float:
        draft = self.hw.draft_weights_gb if self.args.spec else 0.0
        return (self.hw.weights_gb + draft) / self.args.tp

    @property
    def kv_bytes_per_token(self) -> float:
        spec = 1.02 if self.args.spec else 1.0
        return self.hw.kv_kb_per_token * 1000 * spec * self.factor("kv")

    @property
    def kv_pool_gb(self) -> float:
        return self.mem_fraction * self.hw.gpu_mem_gb - self.weights_per_gpu_gb

    @property
    def max_total_tokens(self) -> int:
        return max(0, int(self.kv_pool_gb * 1e9 / self.kv_bytes_per_token))

    @property
    def graph_gb(self) -> float:
        if self.args.disable_cuda_graph:
            return 0.0
        tree = 1 + self.draft_tokens / 4 if self.args.spec else 1.0
        return self.args.cuda_graph_max_bs * self.hw.graph_gb_per_bs * tree

    @property
    def free_gb(self) -> float:
        """Memory outside the static pool, where activations and CUDA graphs live."""
        return (1 - self.mem_fraction) * self.hw.gpu_mem_gb

    @property
    def used_gb(self) -> float:
        """What the GPU-memory reservation shows per GPU once the server is up."""
        return self.mem_fraction * self.hw.gpu_mem_gb + self.hw.act_gb + self.graph_gb

    @property
    def context_len(self) -> int:
        return self.args.context_length or self.hw.context_len

    @cached_property
    def max_running(self) -> int:
        if self.args.max_running_requests is not None:
            return self.args.max_running_requests
        slots = self.profile.slots_flag
        given = self.args.flag_values().get(slots) if slots is not None else None
        if given is not None and given is not False:
            return int(str(given))
        return self.profile.spec_max_running if self.args.spec else self.profile.max_running

    def capacity(self, input_len: int, max_tokens: int) -> int:
        """How many requests of this shape run at once: the admission limit or the KV pool."""
        per_request = input_len + max_tokens + (self.draft_tokens if self.args.spec else 0)
        return max(1, min(self.max_running, self.max_total_tokens // max(1, per_request)))

    # ---------------------------------------------------------------- startup
    @cached_property
    def failure(self) -> Failure | None:
        """The first thing that stops this configuration from coming up, or None."""
        hw, args = self.hw, self.args
        if args.ideal:
            return None
        draft_error = drafter.load_failure(
            args.speculative_algorithm, args.speculative_draft_model_path
        )
        if draft_error is not None:
            return Failure("draft", "load", draft_error, 0.95)
        for rule in self.rules:  # the profile's own start-failure rules, in order
            return Failure("profile", rule.phase, rule.message, 0.5)
        if args.tp > hw.gpus:
            return Failure(
                "tp",
                "args",
                f"ValueError: tp_size ({args.tp}) is larger than "
                f"the number of GPUs on this node ({hw.gpus})",
            )
        if self.profile.heads % args.tp:
            return Failure(
                "tp",
                "args",
                f"ValueError: the number of attention heads ({self.profile.heads}) "
                f"must be divisible by tp_size ({args.tp})",
            )
        if args.attention_backend == "fa3" and hw.sm < 90:
            return Failure(
                "fa3", "args", "ValueError: fa3 attention backend requires SM90 (Hopper)"
            )
        if self.weights_per_gpu_gb > hw.gpu_mem_gb - 1.0:
            fraction = (hw.gpu_mem_gb - 1.0) / self.weights_per_gpu_gb
            need = self.weights_per_gpu_gb - hw.gpu_mem_gb + 1.0
            return Failure("oom_weights", "load", oom(need, hw.gpu_mem_gb, 0.4), fraction)
        if self.max_total_tokens < 4096:
            return Failure(
                "no_kv",
                "kv",
                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
            )
        if args.tp > 1 and not hw.nvlink and not args.disable_custom_all_reduce:
            return Failure(
                "custom_all_reduce",
                "graph",
                "RuntimeError: custom allreduce timed out: "
                "[Rank 0] Watchdog caught collective operation timeout "
                "(custom_all_reduce, 600000 ms); P2P over PCIe is not supported "
                "without NVLink - pass --disable-custom-all-reduce",
            )
        need = hw.act_gb + self.graph_gb
        if need > self.free_gb:
            return Failure(
                "oom_graph",
                "graph",
                oom(need - self.free_gb + 0.5, hw.gpu_mem_gb, max(0.0, self.free_gb - hw.act_gb)),
            )
        return None

    # ---------------------------------------------------------------- step model
    @cached_property
    def fixed_ms(self) -> float:
        """The batch-independent part of one decode step (target forward + draft steps)."""
        hw, args = self.hw, self.args
        a = hw.a_ms * self.profile.backends[args.attention_backend][0] * self.factor("fixed")
        fused = args.enable_flashinfer_allreduce_fusion or args.tp == 1
        if not fused:
            a += hw.ar_ms
        if hw.nvlink and args.tp > 1 and not args.disable_custom_all_reduce:
            a += hw.custom_ar_ms
        if self.args.spec:
            draft = hw.d_ms * (1 + hw.topk_overhead * (self.topk - 1))
            if not fused:
                draft += hw.ar_draft_ms
            a += self.steps * draft
        return a

    @cached_property
    def per_seq_ms(self) -> float:
        """The per-sequence part of one decode step."""
        hw = self.hw
        m = hw.m_ms * self.profile.backends[self.args.attention_backend][1]
        if not self.args.spec:
            return (m + hw.c_ms) * self.factor("per_seq")
        draft = hw.e_ms * self.steps * (1 + 0.1 * (self.topk - 1))
        return (m + hw.c_ms * self.draft_tokens + draft) * self.factor("per_seq")

    def eager(self, batch: int) -> bool:
        return self.args.disable_cuda_graph or batch > self.args.cuda_graph_max_bs

    def decode_ms(self, batch: int) -> float:
        """Model time of one decode step over `batch` running sequences (no noise)."""
        t = self.fixed_ms + self.per_seq_ms * batch
        if self.eager(batch):
            t += self.hw.g_ms * (1 + self.steps) * self.factor("eager")
        return t

    # ---------------------------------------------------------------- physics
    @property
    def physics(self) -> dict[str, float | int | str] | None:
        """The bandwidth model the step model sits above, as /server_info's "physics" states it
        (tools/domain/physics.py reads it), or None where the profile models no bandwidth. The
        KV cache per token is per GPU (MLA's latent cache is replicated on every rank)."""
        hw = self.hw
        if hw.mem_bw_gb_s <= 0:
            return None
        return {
            "device": hw.device,
            "devices": self.args.tp,
            "mem_bw_gb_s": hw.mem_bw_gb_s,
            "weight_bytes": hw.weights_gb * 1e9,
            "expert_bytes": hw.expert_weights_gb * 1e9,
            "experts": hw.experts,
            "active_experts": hw.active_experts,
            "kv_bytes_per_token": hw.kv_kb_per_token * 1000 * self.factor("kv"),
            "kv_split": 1,
            "source": "the simulator's box",
            "model_source": "the simulator's profile",
            # the bounds at high batch, where modelled (hardware.py): 16-bit parameters
            "weights_dtype": "bfloat16",
            "peak_tflops": hw.peak_tflops,
            "link_gb_s": hw.link_gb_s,
            "hidden": hw.hidden,
            "layers": hw.layers,
        }

    def floor_ms(self, batch: int, context: float) -> float:
        """The shortest decode step the modelled box allows over `batch` sequences of `context`
        tokens, no speculation: the longest of its three bounds (floor_bounds_ms)."""
        return max(self.floor_bounds_ms(batch, context).values())

    def floor_bound(self, batch: int, context: float) -> str:
        """Which bound the floor is: memory, compute or interconnect (the first on a tie)."""
        bounds = self.floor_bounds_ms(batch, context)
        return max(bounds, key=lambda k: bounds[k])

    def floor_bounds_ms(self, batch: int, context: float) -> dict[str, float]:
        """Each bound on a decode step, ms (0: not modelled). Memory: the bytes one GPU reads
        (its share of the dense weights and of the experts `batch` tokens touch, and its KV
        cache) over its bandwidth. Compute: 2 FLOPs per active parameter per token over the
        GPUs' peak. Interconnect: two ring all-reduces a layer, each sending 2 (n - 1) / n of
        batch x hidden x 2 bytes from every GPU over its link (latency left out)."""
        hw, tp = self.hw, self.args.tp
        if hw.mem_bw_gb_s <= 0:
            return {"memory": 0.0, "compute": 0.0, "interconnect": 0.0}
        touched = 0.0
        if hw.experts > 0:
            touched = 1 - (1 - hw.active_experts / hw.experts) ** batch
        weights = (hw.weights_gb - hw.expert_weights_gb * (1 - touched)) * 1e9 / tp
        kv = batch * context * hw.kv_kb_per_token * 1000 * self.factor("kv")
        memory = (weights + kv) / (hw.mem_bw_gb_s * 1e9) * 1000
        compute = 0.0
        if hw.peak_tflops > 0:
            share = hw.active_experts / hw.experts if hw.experts > 0 else 1.0
            active = (hw.weights_gb - hw.expert_weights_gb * (1 - share)) * 1e9 / 2
            compute = 2 * active * batch / (hw.peak_tflops * 1e12 * tp) * 1000
        link = 0.0
        if tp > 1 and hw.link_gb_s > 0 and hw.hidden > 0 and hw.layers > 0:
            sent = hw.layers * 2 * 2 * (tp - 1) / tp * batch * hw.hidden * 2
            link = sent / (hw.link_gb_s * 1e9) * 1000
        return {"memory": memory, "compute": compute, "interconnect": link}

    def prefill_ms(self, tokens: int) -> float:
        draft = 1.05 if self.args.spec else 1.0
        backend = self.profile.backends[self.args.attention_backend][2]
        return self.hw.p_ms * backend * draft * tokens * self.factor("prefill")

    # ---------------------------------------------------------------- speculation
    def alpha(self, temperature: float = 0.0, text_score: float = 0.0) -> float:
        """Per-depth acceptance probability: top-k branches raise it, sampling lowers it,
        predictable text (sim.predictability) raises it."""
        depth = min(self.steps, self.draft_tokens - 1)
        width = max(1.0, min(self.topk, (self.draft_tokens - 1) / max(1, depth)))
        base = predictability.lift(self.base_alpha, text_score)
        a = 1 - (1 - base) ** (width**self.hw.tree_gain)
        return a * (1 - 0.1 * min(max(temperature, 0.0), 2.0))

    @property
    def depth(self) -> int:
        return min(self.steps, self.draft_tokens - 1) if self.args.spec else 0

    def accept_probs(self, temperature: float = 0.0, text_score: float = 0.0) -> tuple[float, ...]:
        """P(a step yields j tokens) for j = 1 .. depth + 1 (j - 1 drafts accepted + 1 bonus)."""
        return _accept_probs(self.alpha(temperature, text_score), self.depth)

    def tau(self, temperature: float = 0.0, text_score: float = 0.0) -> float:
        """The average acceptance length (tokens per sequence per step)."""
        probs = self.accept_probs(temperature, text_score)
        return sum((j + 1) * p for j, p in enumerate(probs))

    def expected_steps(self, tokens: int, text_score: float = 0.0) -> float:
        """Expected decode steps to produce `tokens` tokens (the last step may overshoot)."""
        if not self.args.spec:
            return float(max(0, tokens))
        return _expected_steps(self.accept_probs(0.0, text_score), max(0, tokens))


def oom(need_gb: float, total_gb: float, free_gb: float) -> str:
    return (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {need_gb:.2f} GiB. "
        f"GPU 0 has a total capacity of {total_gb:.2f} GiB of which {free_gb:.2f} GiB is free."
    )


@lru_cache(maxsize=256)
def _accept_probs(alpha: float, depth: int) -> tuple[float, ...]:
    probs = [alpha**i * (1 - alpha) for i in range(depth)]
    probs.append(alpha**depth)
    return tuple(probs)


@lru_cache(maxsize=256)
def _expected_steps(probs: tuple[float, ...], tokens: int) -> float:
    e = [0.0] * (tokens + 1)
    for n in range(1, tokens + 1):
        e[n] = 1 + sum(p * e[max(0, n - j - 1)] for j, p in enumerate(probs))
    return e[tokens]
