"""What a start looks like in the log: SGLang-like load progress, then ready - or a failure.

Everything here writes log lines; `load` returns when the server is ready and raises
StartFailed (after printing SGLang-like lines) when this configuration does not come up.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

from sim.flags import ServerArgs
from sim.model import Failure, Model

SHARDS = 62
TRACE = """Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2894, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line {line}, in {where}
    {call}"""  # noqa: E501


def log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    sys.stdout.write(f"[{stamp}] {message}\n")
    sys.stdout.flush()


def raw(message: str) -> None:
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


class StartFailed(Exception):
    """The configuration does not come up; the log already says why."""


def args_line(args: ServerArgs, model: Model) -> str:
    fields = {
        "model_path": args.model_path or model.hw.model,
        "tp_size": args.tp,
        "attention_backend": args.attention_backend,
        "cuda_graph_max_bs": args.cuda_graph_max_bs,
        "disable_custom_all_reduce": args.disable_custom_all_reduce,
        "enable_flashinfer_allreduce_fusion": args.enable_flashinfer_allreduce_fusion,
        "mem_fraction_static": model.mem_fraction,
        "max_running_requests": args.max_running_requests,
        "speculative_algorithm": args.speculative_algorithm,
        "speculative_num_steps": model.steps if args.spec else None,
        "speculative_eagle_topk": model.topk if args.spec else None,
        "speculative_num_draft_tokens": model.draft_tokens if args.spec else None,
        "host": args.host,
        "port": args.port,
        "random_seed": args.seed,
    }
    return "server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")"


def fail_lines(f: Failure, where: str) -> None:
    calls = {
        "load": (1082, "load_model", "self.model = get_model(model_config=self.model_config)"),
        "kv": (1455, "init_memory_pool", "raise RuntimeError("),
        "graph": (1761, "init_device_graphs", "self.graph_runner = CudaGraphRunner(self)"),
    }
    line, func, call = calls.get(f.phase, calls["load"])
    log(f"Scheduler hit an exception: {TRACE.format(line=line, where=func, call=call)}")
    raw(f.message)
    if f.kind == "oom_graph":
        raw(
            "Capture cuda graph failed: CUDA out of memory. Possible solutions:\n"
            "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
            "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
            "3. disable CUDA graph by --disable-cuda-graph. "
            "(Not recommended. Huge performance loss)"
        )
    log(f"Received sigquit from a child process. It usually means the child failed ({where}).")


async def load(args: ServerArgs, model: Model) -> None:
    """Play the model load over --load-seconds real seconds; raise StartFailed on a failure."""
    total = max(0.0, args.load_seconds)
    f = model.failure
    hw = model.hw
    log("Init torch distributed begin.")
    await asyncio.sleep(0.05 * total)
    log(f"Init torch distributed ends. mem usage={0.6 + 0.1 * args.tp:.2f} GB")
    log(f"Load weight begin. avail mem={hw.gpu_mem_gb - 0.6:.2f} GB")
    stop_at = f.fraction if f is not None and f.phase == "load" else 1.0
    shards = int(SHARDS * stop_at)
    began = time.monotonic()
    step = max(1, SHARDS // 20)
    for done in range(0, shards + 1, step):
        elapsed = time.monotonic() - began
        rate = done / elapsed if elapsed > 0 else 0.0
        left = (SHARDS - done) / rate if rate > 0 else 0.0
        raw(
            f"Loading safetensors checkpoint shards: {100 * done // SHARDS:3d}% Completed | "
            f"{done}/{SHARDS} [{_mmss(elapsed)}<{_mmss(left)}, {rate:5.2f}it/s]"
        )
        await asyncio.sleep(0.75 * total * step / SHARDS)
    if f is not None and f.phase == "load":
        fail_lines(f, "loading weights")
        raise StartFailed(f.message)
    used = model.weights_per_gpu_gb
    avail = hw.gpu_mem_gb - used - 0.6
    log(
        f"Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
        f"avail mem={avail:.2f} GB, mem usage={used:.2f} GB."
    )
    if args.spec:
        log(
            "max_running_requests is reset to 48 for speculative decoding."
            if args.max_running_requests is None
            else "Speculative decoding enabled: EAGLE3."
        )
    if f is not None and f.phase == "kv":
        fail_lines(f, "allocating the KV cache")
        raise StartFailed(f.message)
    kv_gb = model.max_total_tokens * model.kv_bytes_per_token / 1e9
    log(f"KV Cache is allocated. #tokens: {model.max_total_tokens}, KV size: {kv_gb:.2f} GB")
    await asyncio.sleep(0.05 * total)
    avail = model.free_gb
    log(f"Capture cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB")
    if f is not None and f.kind == "custom_all_reduce":
        hang = args.hang_seconds
        if hang is None:
            hang = min(60.0, max(2.0, 300.0 / args.time_scale))
        await asyncio.sleep(hang)  # the all-reduce never completes: the watchdog ends it
        fail_lines(f, "custom all-reduce timed out")
        raise StartFailed(f.message)
    if f is not None and f.phase == "graph":
        await asyncio.sleep(0.1 * total)
        fail_lines(f, "capturing CUDA graphs")
        raise StartFailed(f.message)
    began = time.monotonic()
    await asyncio.sleep(0.15 * total)
    log(
        f"Capture cuda graph end. Time elapsed: {time.monotonic() - began:.2f} s. "
        f"mem usage={model.graph_gb:.2f} GB. avail mem={avail - model.graph_gb:.2f} GB."
    )
    log(
        f"max_total_num_tokens={model.max_total_tokens}, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={model.max_running}, "
        f"context_len={model.context_len}, available_gpu_mem={avail - model.graph_gb:.2f} GB"
    )


def _mmss(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60:02d}:{s % 60:02d}"


def ready_lines(args: ServerArgs) -> None:
    raw(f"INFO:     Started server process [{os.getpid()}]")
    raw("INFO:     Waiting for application startup.")
    raw("INFO:     Application startup complete.")
    raw(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
    log("The server is fired up and ready to roll!")
