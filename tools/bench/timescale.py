"""The simulator runs its physics `time_scale` times faster than the box it models, so a client
measures time_scale x the modelled throughput and 1/time_scale the latencies. Sweeps against it
are converted back to model time, so every figure the agent sees is the modelled box's."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tools.bench.schema import Point

RATES = (
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "request_goodput",
    "achieved_request_rate",
)
KEEP = ("max_concurrency", "achieved_concurrency", "client_cpu_percent", "client_processes")


async def server_info(url: str, timeout: float = 5.0, total_s: float = 30.0) -> dict[str, Any]:
    """GET /server_info as a JSON object; {} for a server without one, and for one that does not
    answer whole within `total_s` (httpx's timeouts are per read)."""
    try:
        async with asyncio.timeout(total_s), httpx.AsyncClient(timeout=timeout) as client:
            resp = await client.get(f"{url.rstrip('/')}/server_info")
        info = resp.json() if resp.status_code == 200 else {}
    except (httpx.HTTPError, ValueError, TimeoutError):
        return {}
    return info if isinstance(info, dict) else {}


def time_scale_of(info: dict[str, Any]) -> float:
    """The simulator's time scale from its /server_info; 1.0 for any other server."""
    try:
        scale = float(info["sim"]["time_scale"])
    except (ValueError, KeyError, TypeError):
        return 1.0
    return scale if scale > 0 else 1.0


async def server_time_scale(url: str, timeout: float = 5.0, total_s: float = 30.0) -> float:
    """The simulator's time scale from GET /server_info; 1.0 for any other server."""
    return time_scale_of(await server_info(url, timeout, total_s))


def to_model_time(point: dict[str, Any], scale: float) -> dict[str, Any]:
    """A point measured against a time-scaled server, in the modelled box's time."""
    if scale == 1.0:
        return point
    return {**point, **_in_model_time(point, scale)}


def point_to_model_time(point: Point, scale: float) -> Point:
    """to_model_time for a typed Point: the same keys changed, its fields set kept."""
    if scale == 1.0:
        return point
    return point.model_copy(update=_in_model_time(point.model_dump(exclude_unset=True), scale))


def _in_model_time(point: dict[str, Any], scale: float) -> dict[str, Any]:
    """The keys that change, in model time, and `time_scale` (added last)."""
    out: dict[str, Any] = {}
    for key, value in point.items():
        if key == "ttfts" and isinstance(value, list):  # per request, in seconds
            out[key] = [v * scale for v in value]
            continue
        if not isinstance(value, int | float) or isinstance(value, bool) or key in KEEP:
            continue
        if key in RATES:
            out[key] = value / scale
        elif key.endswith("_ms") or key == "duration":
            out[key] = value * scale
    out["time_scale"] = scale
    return out
