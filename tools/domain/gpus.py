"""The GPUs a configuration asks for, read from its parallelism flags: one function for the
planner (which prefers fewer GPUs at the same value) and the report's per-GPU Pareto chart, so a
configuration is never 2 GPUs in one place and 1 in the other."""

from __future__ import annotations

from collections.abc import Mapping

# each kind of parallelism under every name the engines give it (vLLM, SGLang)
TENSOR = ("--tp", "--tp-size", "--tensor-parallel-size")
DATA = ("--dp", "--dp-size", "--data-parallel-size")
PIPELINE = ("--pp", "--pp-size", "--pipeline-parallel-size")
PARALLEL_FLAGS = (*TENSOR, *DATA, *PIPELINE)


def gpus_of(flags: Mapping[str, object]) -> int:
    """Tensor x data x pipeline parallel sizes (each 1 when absent or unreadable)."""
    n = 1
    for names in (TENSOR, DATA, PIPELINE):
        n *= next((size for name in names if (size := _size(flags.get(name))) is not None), 1)
    return n


def _size(value: object) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return max(1, int(float(str(value))))
    except ValueError:
        return None
