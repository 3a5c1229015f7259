"""Each level's bandwidth floor and its share (tools/domain/physics.py, the one formula), on the
points of a sweep.

The description comes from the engine where it states one (/server_info's "physics": the
simulator states the physics it models), else from what the caller states (agent.toml's
[hardware], a CPU host's probe at lab setup). A point of a closed level gets `floor_step_ms`,
`floor_tok_s` (the batch's floor) and `floor_share` (its output tok/s over that floor), read from
its own mean prompt and answer lengths, and `floor_bound` (memory, compute or interconnect: the
bound its floor is); without a description it gets none (an unknown device says so in one note:
tools/domain/physics.py's unknown_device_line).

What [hardware] states follows the dtypes the measured configuration serves in: its command's and
its flags' --dtype and KV cache types, as its engine's profile spells and defaults them
([precision], `served_of`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from tools.bench.confighash import normalize_command
from tools.bench.schema import Point, Workload
from tools.domain import engines
from tools.domain.physics import (
    HardwareConfig,
    Physics,
    Served,
    UnknownDtype,
    device_for,
    floor_of,
    physics_from_json,
    share_of,
    unknown_device_line,
)
from tools.hosts.base import Host, HostError

CALL_S = 10.0  # one nvidia-smi call for the device's name
NAME_QUERY = "nvidia-smi --query-gpu=name --format=csv,noheader"

FLOOR_NOTE = "floor: "  # the start of the note that says what a result's floors came from


def engine_physics(info: dict[str, Any] | None) -> Physics | None:
    """The description an engine's /server_info states ("physics"), or None."""
    return physics_from_json(info.get("physics")) if info else None


def served_of(
    precision: engines.Precision | None,
    command: str | None = None,
    flags: dict[str, Any] | None = None,
) -> Served | None:
    """The dtypes a server serves in: its launch command's flags, then the flags under test, read
    as its engine's profile spells them ([precision]: engines.precision(name) for a built-in
    one); None without one (the stated figures are taken as they are)."""
    if precision is None:
        return None
    given = dict(normalize_command(command)["flags"]) if command else {}
    given.update(flags or {})
    named = precision.of(given)
    return Served(named["weights"], named["kv_k"], named["kv_v"], precision.auto_float32)


async def stated_physics(
    hardware: HardwareConfig | None,
    devices: int,
    host: Host | None,
    call_s: float = CALL_S,
    served: Served | None = None,
) -> tuple[Physics | None, str | None]:
    """What agent.toml's [hardware] states for a server over `devices` GPUs serving in the
    dtypes `served`, the device found by nvidia-smi on its host where [hardware] names none:
    (the description, None), or (None, the one line that says why there is no floor); (None,
    None) without [hardware]."""
    if hardware is None:
        return None, None
    if hardware.weights_gb is None:
        return None, "no floor: [hardware] in agent.toml states no weights_gb (docs/physics.md)"
    found = None
    if not hardware.states_device:
        name = await host_device(host, call_s) if host is not None else None
        if name is None:
            return None, (
                "no floor: [hardware] names no device and the server's host has no nvidia-smi "
                "to ask: state device or mem_bw_gb_s (docs/physics.md)"
            )
        found = device_for(name)
        if found is None:
            return None, unknown_device_line(name)
    try:
        return hardware.physics(devices, found, served), None
    except UnknownDtype as err:
        return None, str(err)


async def host_device(host: Host, call_s: float = CALL_S) -> str | None:
    """The first GPU's name by nvidia-smi on `host`; None without one (or past `call_s`)."""
    command = f"command -v nvidia-smi >/dev/null || exit 127; {NAME_QUERY}"
    try:  # the host's own deadline kills the command; ours bounds the call (an SSH channel)
        async with asyncio.timeout(call_s + 2.0):
            res = await host.run(command, timeout=call_s, cwd="/")
    except (TimeoutError, HostError):
        return None
    lines = res.stdout.strip().splitlines()
    if res.timed_out or res.exit_code != 0 or not lines:
        return None
    return lines[0].strip()


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
        "floor_bound": floor.bound,
    }
    if point.output_throughput > 0 and not point.level_failed:
        update["floor_share"] = round(share_of(point.output_throughput, floor), 4)
    return point.model_copy(update=update)


def describe(physics: Physics) -> str:
    """One line for a result's notes: where the floor comes from."""
    m = physics.model
    moe = f", {m.active_experts} of {m.experts} experts per token" if m.experts else ""
    box = f"{physics.devices} x {physics.device or 'device'} at {physics.mem_bw_gb_s:g} GB/s"
    more = f", {physics.peak_tflops:g} TFLOPS" if physics.compute_s(1) > 0 else ""
    if physics.link_s(1) > 0:
        more += f", link {physics.link_gb_s:g} GB/s"
    weights = f" ({m.weights_dtype})" if m.weights_dtype else ""
    kv = f" ({m.kv_dtype})" if m.kv_dtype else ""
    return (
        f"{FLOOR_NOTE}{box}{more} each ({physics.source}); weights {m.weight_bytes / 1e9:.3g} GB"
        f"{weights}{moe}, KV {m.kv_bytes_per_token / 1e3:.3g} KB per token{kv} "
        f"({m.source or 'stated'})"
    )
