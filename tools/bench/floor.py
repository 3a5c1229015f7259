"""Each level's bandwidth floor and its share (tools/domain/physics.py, the one formula), on the
points of a sweep.

The description comes from the engine where it states one (/server_info's "physics": the
simulator states the physics it models), else from what the caller states (agent.toml's
[hardware], a CPU host's probe at lab setup). A point of a closed level gets `floor_step_ms`,
`floor_tok_s` (the batch's floor) and `floor_share` (its output tok/s over that floor), read from
its own mean prompt and answer lengths; without a description it gets none (an unknown device
says so in one note: tools/domain/physics.py's unknown_device_line).
"""

from __future__ import annotations

from typing import Any

from tools.bench.schema import Point, Workload
from tools.domain.physics import Physics, floor_of, physics_from_json, share_of

FLOOR_NOTE = "floor: "  # the start of the note that says what a result's floors came from


def engine_physics(info: dict[str, Any] | None) -> Physics | None:
    """The description an engine's /server_info states ("physics"), or None."""
    return physics_from_json(info.get("physics")) if info else None


def with_floor(point: Point, physics: Physics | None, workload: Workload) -> Point:
    """The point with its level's floor and share; as it was for an open level (no concurrency
    to read a batch from), a level that served nothing, or without a description."""
    if physics is None or workload.traffic != "concurrency" or point.max_concurrency < 1:
        return point
    done = point.completed
    prompt = point.total_input_tokens / done if done else float(workload.input_len)
    answer = point.total_output_tokens / done if done else float(workload.max_tokens)
    floor = floor_of(physics, point.max_concurrency, round(prompt), round(answer))
    update: dict[str, Any] = {
        "floor_step_ms": round(floor.step_ms, 4),
        "floor_tok_s": round(floor.batch_tok_s, 2),
    }
    if point.output_throughput > 0 and not point.level_failed:
        update["floor_share"] = round(share_of(point.output_throughput, floor), 4)
    return point.model_copy(update=update)


def describe(physics: Physics) -> str:
    """One line for a result's notes: where the floor comes from."""
    m = physics.model
    moe = f", {m.active_experts} of {m.experts} experts per token" if m.experts else ""
    box = f"{physics.devices} x {physics.device or 'device'} at {physics.mem_bw_gb_s:g} GB/s"
    return (
        f"{FLOOR_NOTE}{box} each ({physics.source}); weights {m.weight_bytes / 1e9:.3g} GB"
        f"{moe}, KV {m.kv_bytes_per_token / 1e3:.3g} KB per token ({m.source or 'stated'})"
    )
