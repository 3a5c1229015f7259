"""How long the campaign will still take, as the supervisor's view estimates it: the open items of
the planner's todo list times what one item costs as measured in this run - at least one launch
and one sweep, and the mean time the items that measured something took (a stage of the plan may
hold several experiments); the item in progress counts half an item, or as long again as it has
run. A rough figure (docs/supervising.md says how rough); there is none before the first launch
and sweep."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from state.events import Event

AFTER_TODOS = ("report", "recommend", "kill", "clean")  # closing items: seconds, not a sweep


@dataclass(frozen=True)
class Eta:
    seconds: float
    open_items: float
    item_s: float  # what one open item is expected to cost
    launch_s: float
    sweep_s: float


def measured_times(events: list[Event]) -> tuple[float, float] | None:
    """(mean seconds from launch to ready, mean seconds of one sweep), or None before both.
    A sweep is every run_benchmark call under one label (a brain may cut one into groups)."""
    loads = [float(e["seconds"]) for e in events if e["type"] == "server_ready" and "seconds" in e]
    labels: dict[str, str] = {}  # tool_use id -> the sweep's label
    sweeps: dict[str, float] = {}
    for e in events:
        if e["type"] == "tool_call" and e.get("name") == "run_benchmark":
            inp = e.get("input") or {}
            labels[str(e.get("id"))] = str(inp.get("label") or inp.get("server") or e["seq"])
        elif e["type"] == "tool_result" and e.get("name") == "run_benchmark":
            label = labels.get(str(e.get("id")), str(e.get("id")))
            sweeps[label] = sweeps.get(label, 0.0) + float(e.get("duration_s") or 0)
    if not loads or not sweeps:
        return None
    return sum(loads) / len(loads), sum(sweeps.values()) / len(sweeps)


def open_items(todos: list[dict[str, object]]) -> float:
    """Experiments left on the todo list: pending ones, the one in progress as half."""
    left = 0.0
    for t in todos:
        content = str(t.get("content", "")).lower()
        if any(content.startswith(word) for word in AFTER_TODOS):
            continue
        left += {"pending": 1.0, "in_progress": 0.5}.get(str(t.get("status")), 0.0)
    return left


def item_seconds(events: list[Event]) -> tuple[list[float], float]:
    """How long each finished todo item took, from in_progress to its end, for the items during
    which a benchmark ran (the quick ones, killing leftovers, say nothing of an experiment); and
    how long the item in progress has run."""
    began: dict[str, float] = {}
    took = []
    benched: set[str] = set()
    for e in events:
        at = stamp(e)
        if e["type"] == "benchmark":
            benched.update(began)
        if e["type"] != "todo" or at is None:
            continue
        for t in e.get("todos") or []:
            key, status = str(t.get("id")), t.get("status")
            if status == "in_progress":
                began.setdefault(key, at)
            elif key in began and status in ("completed", "cancelled"):
                if key in benched:
                    took.append(at - began[key])
                del began[key]
                benched.discard(key)
    last = stamp(events[-1]) if events else None
    current = max((last - t for t in began.values()), default=0.0) if last is not None else 0.0
    return took, current


def stamp(event: Event) -> float | None:
    try:
        return datetime.fromisoformat(str(event.get("ts", "")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def estimate(todos: list[dict[str, object]], events: list[Event]) -> Eta | None:
    times = measured_times(events)
    if times is None:
        return None
    launch, sweep = times
    items, current = item_seconds(events)
    spans = [*items, current] if current else items  # the one in progress: at least this long
    item = max(launch + sweep, sum(spans) / len(spans) if spans else 0.0)
    left = open_items(todos)
    # the item in progress: half an item, or as long again as it has run (a long stage is long)
    now = max(item / 2, current) if left % 1 else 0.0
    return Eta(int(left) * item + now, left, item, launch, sweep)


def eta_text(eta: Eta | None, finished: bool) -> str:
    if finished:
        return ""
    if eta is None:
        return "time left: estimated after the first launch and sweep"
    if eta.open_items == 0:
        return "time left: wrapping up"
    minutes = eta.seconds / 60
    amount = f"{minutes:.0f} min" if minutes >= 2 else f"{eta.seconds:.0f} s"
    return (
        f"about {amount} left ({eta.open_items:g} open todos × {clock(eta.item_s)} each; a launch "
        f"took {clock(eta.launch_s)}, a sweep {clock(eta.sweep_s)})"
    )


def clock(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}" if seconds >= 60 else f"{seconds} s"
