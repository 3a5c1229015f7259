"""/metrics (Prometheus text, SGLang gauges and counters, vLLM-named speculative counters) and
/server_info (SGLang-like: the server args and internal_states with avg_spec_accept_length)."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.api import App
    from sim.hardware import Hardware

VERSION = "0.5.4-sim"


def modelled_power(hw: Hardware, gpus: int, running: int, max_running: int) -> float:
    """The modelled box's power (W) over the server's `gpus`: each idle while no request runs or
    waits (`running`: both), else from busy (a batch of one) up to peak (a full batch of
    max_running) in proportion to the batch - a function of the scheduler's state only, so the
    same run draws the same watts."""
    if running <= 0:
        per_gpu = hw.idle_w
    else:
        load = min(1.0, (running - 1) / max(1, max_running - 1))
        per_gpu = hw.busy_w + (hw.peak_w - hw.busy_w) * load
    return gpus * per_gpu


def prometheus(app: App) -> str:
    label = f'{{model_name="{app.served}"}}'
    e = app.engine
    # a request waiting is being prefilled, or waits for a full batch: the GPUs work either way
    busy = app.ideal_running if e is None else len(e.running) + len(e.waiting)
    power = modelled_power(app.model.hw, app.args.tp, busy, app.model.max_running)
    if e is None:
        counters: dict[str, float] = {
            "sglang:num_requests_total": app.ideal_requests,
            "sglang:prompt_tokens_total": app.ideal_prompt_tokens,
            "sglang:generation_tokens_total": app.ideal_tokens,
        }
        # every request runs at once, nothing queues, no KV cache is modelled
        gauges: dict[str, float] = {
            "sglang:num_running_reqs": app.ideal_running,
            "sglang:num_queue_reqs": 0,
        }
    else:
        counters = {
            "sglang:num_requests_total": e.requests_total,
            "sglang:num_requests_finished_total": e.finished_total,
            "sglang:prompt_tokens_total": e.prompt_tokens_total,
            "sglang:generation_tokens_total": e.generation_tokens_total,
            "sglang:cached_tokens_total": e.prefix_cache.hit_tokens,  # served by the prefix cache
        }
        gauges = {
            "sglang:num_running_reqs": len(e.running),
            "sglang:num_queue_reqs": len(e.waiting),
            "sglang:token_usage": round(e.token_usage, 4),
        }
        if app.args.spec:
            counters |= {
                "vllm:spec_decode_num_drafts_total": e.spec_drafts,
                "vllm:spec_decode_num_draft_tokens_total": e.spec_draft_tokens,
                "vllm:spec_decode_num_accepted_tokens_total": e.spec_accepted,
            }
            gauges["sglang:spec_accept_length"] = round(e.accept_length, 4)
    gauges["sim:power_watts"] = round(power, 2)  # the modelled box's GPUs (docs/sim.md)
    lines = []
    for name, value in counters.items():
        lines += [f"# TYPE {name} counter", f"{name}{label} {value}"]
    for name, value in gauges.items():
        lines += [f"# TYPE {name} gauge", f"{name}{label} {value}"]
    return "\n".join(lines) + "\n"


def server_info(app: App) -> dict[str, Any]:
    args, model, e = app.args, app.model, app.engine
    info: dict[str, Any] = {k: v for k, v in dataclasses.asdict(args).items() if k != "tp"}
    info |= {
        "tp_size": args.tp,
        "model_path": args.model_path or model.hw.model,
        "served_model_name": app.served,
        "mem_fraction_static": model.mem_fraction,
        "max_running_requests": model.max_running,
        "max_total_num_tokens": model.max_total_tokens,
        "context_length": model.context_len,
        "version": VERSION,
    }
    if args.spec:
        steps, topk, tokens = model.steps, model.topk, model.draft_tokens
        info |= {
            "speculative_num_steps": steps,
            "speculative_eagle_topk": topk,
            "speculative_num_draft_tokens": tokens,
        }
    state: dict[str, Any] = {"last_gen_throughput": 0.0, "ready": app.ready}
    if e is not None:
        state["last_gen_throughput"] = round(e.last_gen_throughput, 2)
        if args.spec:
            state["avg_spec_accept_length"] = round(e.accept_length, 4)
    info["internal_states"] = [state]
    if "avg_spec_accept_length" in state:
        info["avg_spec_accept_length"] = state["avg_spec_accept_length"]
    physics = None if args.ideal else model.physics
    if physics is not None:  # the bandwidth model (docs/physics.md): the floor of each level
        info["physics"] = physics
    info["sim"] = {
        "hardware": model.hw.description,
        "time_scale": args.time_scale,
        "noise": args.noise,
        "ideal": args.ideal,
        "max_lag_ms": round(e.max_lag_ms, 3) if e is not None else 0.0,
        "drift": args.drift,  # the injected schedule (sim/drift.py), and its speed now
        "speed": round(e.speed(), 4) if e is not None else 1.0,
        "note": "throughputs measured by a client are time_scale times the modelled ones",
    }
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in info.items()}
