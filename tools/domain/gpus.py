"""The GPUs a configuration asks for, read from its parallelism flags: one function for the
planner (which prefers fewer GPUs at the same value), the report's per-GPU Pareto chart and the
deploy/ files, so a configuration is never 2 GPUs in one place and 1 in the other. The flags and
how they multiply are the engine profile's `[parallelism]` (tools/domain/engines.py)."""

from __future__ import annotations

from collections.abc import Mapping

from tools.domain import engines


def gpus_of(flags: Mapping[str, object], engine: str | engines.Parallelism | None = None) -> int:
    """Tensor x pipeline x data x context parallel sizes (each 1 when absent or unreadable), by
    the flags the engine's profile names (`--tp_size` for TensorRT-LLM, `--tensor-parallel-size`
    for vLLM): its name, or its profile's `parallelism` (a user's profile file); an engine that
    names none, or None: every built-in profile's spellings."""
    return engines.parallelism(engine).gpus(flags)
