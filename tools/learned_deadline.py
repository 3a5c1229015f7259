"""The first-token deadline of a sweep at levels the run has already seen served (issue 49, item
8): a server that answers with keep-alive comments only would hold each request for the whole
static deadline (`[bench.deadlines] first_token_s`, 600 s, a long queue at C=250). Once this
server, or the run's baseline, has served every level a sweep asks for with the same workload,
the slowest p99 TTFT it measured there bounds what a healthy server takes to its first token:
the deadline becomes slack x that, at least floor_s, never above the static one
(tools/bench/deadlines.py `Deadlines.served`) - as a level's own pace tightens its total
deadline after LEARN_AFTER successes. A level never served keeps the static deadline for the
whole sweep: its queue may be longer than any measured.
"""

from __future__ import annotations

from typing import Any

from tools.bench.schema import ServerRef, Workload

# the workload fields that shape the time to a first token (the prompt, the queue in front of it)
TTFT_SHAPE = (
    "endpoint",
    "input_len",
    "max_tokens",
    "ignore_eos",
    "dataset",
    "lengths",
    "traffic",
    "shared_prefix",
    "multi_turn",
)


def served_ttft_s(
    benchmarks: list[dict[str, Any]],
    server: ServerRef,
    workload: Workload,
    levels: list[int],
    baseline: dict[str, Any] | None,
    any_name: bool = False,
) -> float | None:
    """The slowest p99 TTFT, in seconds, that this server or the baseline measured at `levels`
    with this workload (the run's `benchmark` events); None unless every level was served.
    `any_name`: a launch of the same flags under any name is this server (a fleet names each
    trial anew)."""
    shape = {k: getattr(workload, k) for k in TTFT_SHAPE}
    slowest: dict[int, float] = {}
    for e in benchmarks:
        wl = e.get("workload") or {}
        if any(wl.get(k, Workload.model_fields[k].default) != v for k, v in shape.items()):
            continue
        same = _same_flags(e, server) if any_name else _same_server(e, server)
        if not (same or _is_baseline(e, baseline)):
            continue
        for level, point in (e.get("points") or {}).items():
            ttft_ms = point.get("p99_ttft_ms") if isinstance(point, dict) else None
            served = not point.get("level_failed") and (point.get("completed") or 0) > 0
            if served and isinstance(ttft_ms, int | float) and ttft_ms > 0:
                lv = int(level)
                slowest[lv] = max(slowest.get(lv, 0.0), ttft_ms / 1000)
    if not levels or any(lv not in slowest for lv in levels):
        return None
    return max(slowest[lv] for lv in levels)


def _same_server(e: dict[str, Any], server: ServerRef) -> bool:
    """The same launch (name and flags), or the same bare URL."""
    if server.name is None:
        return not e.get("server") and bool(server.url) and e.get("url") == server.url
    return e.get("server") == server.name and _norm(e.get("flags")) == _norm(server.flags)


def _same_flags(e: dict[str, Any], server: ServerRef) -> bool:
    return bool(e.get("server")) and _norm(e.get("flags")) == _norm(server.flags)


def _is_baseline(e: dict[str, Any], baseline: dict[str, Any] | None) -> bool:
    """A result of the run's baseline: [search.baseline]'s flags, or a server named baseline."""
    if e.get("server") == "baseline":
        return True
    return bool(baseline) and _norm(e.get("flags")) == _norm(baseline)


def _norm(flags: Any) -> dict[str, Any]:
    """Flags as compared: omitted ones dropped, values as a command line spells them."""
    if not isinstance(flags, dict):
        return {}
    return {
        k: True if v is True else str(v)
        for k, v in sorted(flags.items())
        if v is not False and v is not None
    }
