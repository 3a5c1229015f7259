"""How long the campaign will still take, as the supervisor's view estimates it: the open items of
the planner's todo list, each costed by what this run says of its stages. An item that says how
many experiments it still holds ("... (12 experiments left)", as the autopilot's screening,
family and re-validation stages do) counts that many: in progress, each what one took from one
launch to the next within it so far (the screens, the confirming sweeps and the thinking between
them), at least one launch and one sweep; not begun, each a launch and a full sweep (one of the
most levels any sweep measured) - the re-validation's launches sweep every level where the
screens cover a few, and the mean of the run's launches costed it at two thirds of what it took.
An item that does not say holds as many launches as the items so far did on average (the one in
progress counted with the launches it says are left), each what one took from launch to launch
within any item - not as long as the items so far took, which the long screening stage would set
for every later, shorter one. The item in progress has what is left of an item to go, at least a
quarter of one; one that says its count: those. Before any launch is counted (a run whose events
have no `server_started`, a fleet) an item costs the mean time of the finished items that
measured something, at least a launch and a sweep. A rough figure (docs/supervising.md says how
rough); there is none before the first launch and sweep.

The figure shown is smoothed: the median of the estimates made at the last SMOOTH_OVER moments
something was learned (a todo update, a server ready, a benchmark), each less the time gone since
it was made - one odd estimate (a sweep half measured, an item just begun) does not move it. Its
breakdown is the one of the estimate chosen, and adds up to it.

A run with a minutes budget ends by it (the autopilot wraps up at the budget's warning and
starts no launch the minutes left cannot end): the figure is at most what the budget leaves, and
then says so beside what the open todos hold. Without it, a real-vLLM campaign given 45 minutes
was told 40 minutes left when 6 were.

On a fleet (docs/fleet.md "Watching a fleet run") a launch and a sweep are those of the trials
that ended (their time to ready, and the rest), and the experiments left run as many at once as
trials ran at once on average so far (state/fleet.py); the todo items are timed on the wall clock
as on one box, so they already include the parallelism."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from statistics import fmean

from state.events import Event, call_input, epoch
from state.fleet import FleetState
from state.fold import RunState, fold
from state.sweeps import count

AFTER_TODOS = ("report", "recommend", "kill", "clean")  # closing items: seconds, not a sweep
OPEN = {"pending": 1.0, "in_progress": 0.5}
LEFT = re.compile(r"\((\d+) experiments? left\)")
SMOOTH_OVER = 5  # the estimates the one shown is the median of
LEARNED = {"todo", "server_ready", "benchmark"}  # what may change the estimate


@dataclass(frozen=True)
class Eta:
    seconds: float
    open_items: float  # the items that do not say how many experiments they hold
    item_s: float  # what one open item is expected to cost
    launch_s: float
    sweep_s: float
    experiments: int = 0  # held by the items that say so: the one in progress's, `experiment_s`
    # each, and `later` of them held by items not begun, `fresh_s` each (a launch, a full sweep)
    at_once: float = 1.0  # how many of those run at once (a fleet: the average so far)
    # the parts, in seconds, that add up to `seconds` + `ago`: the experiments, the pending items
    # that do not say how many they hold, and what is left of the item in progress
    held_s: float = 0.0
    items_s: float = 0.0
    running_s: float = 0.0
    ago: float = 0.0  # made this long before the latest event (the smoothing chose it)
    experiment_s: float = 0.0  # what one experiment costs (0: a launch and a sweep)
    item_launches: float = 0.0  # the launches an item of unknown size holds (0: timed instead)
    planned_s: float = 0.0  # what the open todos hold, when the minutes budget ends first
    later: int = 0
    fresh_s: float = 0.0


def measured_times(events: list[Event]) -> tuple[float, float, float] | None:
    """(mean seconds from launch to ready, mean seconds of one sweep, mean seconds of a full
    sweep: one of those that measured the most levels), or None before both. A sweep is every
    run_benchmark call under one label (a brain may cut one into groups)."""
    loads = [float(e["seconds"]) for e in events if e["type"] == "server_ready" and "seconds" in e]
    labels: dict[str, str] = {}  # tool_use id -> the sweep's label
    sweeps: dict[str, float] = {}
    levels: dict[str, int] = {}  # label -> the levels it measured
    for e in events:
        if e["type"] == "tool_call" and e.get("name") == "run_benchmark":
            inp = call_input(e.get("input"))
            labels[str(e.get("id"))] = str(inp.get("label") or inp.get("server") or e["seq"])
        elif e["type"] == "tool_result" and e.get("name") == "run_benchmark":
            label = labels.get(str(e.get("id")), str(e.get("id")))
            sweeps[label] = sweeps.get(label, 0.0) + float(e.get("duration_s") or 0)
        elif e["type"] == "benchmark":
            label = str(e.get("label") or e.get("id"))
            levels[label] = levels.get(label, 0) + len(e.get("summary") or {})
    if not loads or not sweeps:
        return None
    if len(sweeps) > 1:  # the latest may be half measured: it counts once it is the only one
        sweeps.pop(list(sweeps)[-1])
    most = max((levels.get(label, 0) for label in sweeps), default=0)
    full = [t for label, t in sweeps.items() if levels.get(label, 0) == most]
    return sum(loads) / len(loads), sum(sweeps.values()) / len(sweeps), sum(full) / len(full)


def trial_times(fleet: FleetState) -> tuple[float, float, float] | None:
    """On a fleet: (mean seconds from a trial's start to its server's readiness, mean seconds of
    the rest of it - its sweep - twice: a trial's sweep is the only one its launch makes) over the
    trials that ended ok, or None before the first."""
    done = [e for e in fleet.ended if e.ok and e.ready_s is not None]
    if not done:
        return None
    loads = [e.ready_s or 0.0 for e in done]
    sweep = sum(e.seconds - (e.ready_s or 0.0) for e in done) / len(done)
    return sum(loads) / len(done), sweep, sweep


def experiments_left(todo: dict[str, object]) -> int:
    """How many experiments an open item says it still holds ("... (12 experiments left)", as
    the autopilot's screening item says), else 0."""
    found = LEFT.search(str(todo.get("content", "")))
    return int(found.group(1)) if found else 0


def open_items(todos: list[dict[str, object]]) -> tuple[float, int, int]:
    """What is left on the todo list: the open items (pending ones, the one in progress as
    half) that do not say how many experiments they hold, and the experiments of those that do:
    the one in progress's, and the pending ones'."""
    left, now, later = 0.0, 0, 0
    for t in todos:
        content = str(t.get("content", "")).lower()
        status = str(t.get("status"))
        if any(content.startswith(word) for word in AFTER_TODOS) or status not in OPEN:
            continue
        held = experiments_left(t)
        if not held:
            left += OPEN[status]
        elif status == "in_progress":
            now += held
        else:
            later += held
    return left, now, later


def item_seconds(events: list[Event]) -> tuple[list[float], float]:
    """How long each finished todo item took, from in_progress to its end, for the items during
    which a benchmark ran (the quick ones, killing leftovers, say nothing of an experiment) - only
    those that held several sweeps once one did (a stage of the plan: the later items are
    stages, not one sweep each); and how long the item in progress has run."""
    began: dict[str, float] = {}
    took: list[tuple[float, int]] = []  # (seconds, sweeps under it)
    benched: dict[str, set[str]] = {}  # item -> the labels measured under it
    for e in events:
        at = stamp(e)
        if e["type"] == "benchmark":
            for key in began:
                benched.setdefault(key, set()).add(str(e.get("label") or e.get("id")))
        if e["type"] != "todo" or at is None:
            continue
        for t in e.get("todos") or []:
            key, status = str(t.get("id")), t.get("status")
            if status == "in_progress":
                began.setdefault(key, at)
            elif key in began and status in ("completed", "cancelled"):
                if key in benched:
                    took.append((at - began[key], len(benched[key])))
                del began[key]
                benched.pop(key, None)
    stages = [s for s, n in took if n > 1]
    took_s = stages or [s for s, _ in took]
    last = stamp(events[-1]) if events else None
    current = max((last - t for t in began.values()), default=0.0) if last is not None else 0.0
    return took_s, current


def launch_gaps(events: list[Event]) -> tuple[list[float], list[float]]:
    """The times from one launch (`server_started`) to the next within one todo item: all of
    them, and those of the item in progress. A gap across items holds those items' other work
    (the baseline's repeat sweep on the same server, ...), not an experiment's."""
    gaps: list[float] = []
    previous: float | None = None
    item: str | None = None
    now = 0  # where the item in progress's gaps begin
    for e in events:
        if e["type"] == "todo":
            todos = e.get("todos") or []
            current = next(
                (str(t.get("id")) for t in todos if t.get("status") == "in_progress"), None
            )
            if current != item:
                item, previous, now = current, None, len(gaps)
        elif e["type"] == "server_started" and (at := stamp(e)) is not None:
            if previous is not None:
                gaps.append(at - previous)
            previous = at
    return gaps, gaps[now:]


def item_launches(events: list[Event]) -> tuple[list[int], int]:
    """The launches under each finished todo item that launched a server, and under the item in
    progress (the items that launched nothing - killing leftovers, the repeat on the server
    already up - say nothing of how many launches a stage holds)."""
    began: dict[str, int] = {}  # item in progress -> its launches so far
    sizes: list[int] = []
    for e in events:
        if e["type"] == "server_started":
            for key in began:
                began[key] += 1
        if e["type"] != "todo":
            continue
        for t in e.get("todos") or []:
            key, status = str(t.get("id")), t.get("status")
            if status == "in_progress":
                began.setdefault(key, 0)
            elif key in began and status in ("completed", "cancelled"):
                if began[key]:
                    sizes.append(began[key])
                del began[key]
    return sizes, max(began.values(), default=0)


def stamp(event: Event) -> float | None:
    return epoch(event.get("ts", ""))


def budget_left_s(state: RunState, events: list[Event]) -> float | None:
    """The seconds the run's minutes budget leaves as of the latest event (None: no budget)."""
    limit = state.limits.get("max_minutes")
    at = stamp(events[-1]) if events else None
    if not limit or at is None:
        return None
    return float(limit) * 60 - state.minutes_used(at) * 60


def estimate(
    todos: list[dict[str, object]],
    events: list[Event],
    fleet: FleetState | None = None,
    budget_s: float | None = None,
) -> Eta | None:
    """The smoothed estimate (the module's docstring): the median of the raw estimates at the
    last SMOOTH_OVER moments something was learned, each less the time since, as of the latest
    event, and at most `budget_s` (what the minutes budget leaves: budget_left_s); None when
    none of them had anything to go on."""
    if not events:
        return None
    last = stamp(events[-1])
    samples: list[Eta] = []
    latest = raw_estimate(todos, events, fleet)
    if latest is not None:
        samples.append(latest)
    moments = [i for i, e in enumerate(events[:-1]) if e["type"] in LEARNED]
    for i in moments[max(len(moments) - (SMOOTH_OVER - 1), 0) :] if last is not None else []:
        then = stamp(events[i])
        if then is None:
            continue
        todos_then = next(
            (list(e.get("todos") or []) for e in reversed(events[: i + 1]) if e["type"] == "todo"),
            [],
        )
        fleet_then = fold(events[: i + 1]).fleet if fleet is not None else None
        raw = raw_estimate(todos_then, events[: i + 1], fleet_then)
        if raw is not None:
            ago = max(last - then, 0.0)  # type: ignore[operator]
            samples.append(replace(raw, seconds=max(raw.seconds - ago, 0.0), ago=ago))
    if not samples:
        return None
    ranked = sorted(samples, key=lambda e: e.seconds)
    chosen = ranked[(len(ranked) - 1) // 2]  # the median, the lower one of an even count
    if budget_s is not None and chosen.seconds > budget_s:
        return replace(chosen, seconds=max(budget_s, 0.0), planned_s=chosen.seconds)
    return chosen


def raw_estimate(
    todos: list[dict[str, object]], events: list[Event], fleet: FleetState | None = None
) -> Eta | None:
    """The estimate from the todo list and the events up to now alone, unsmoothed."""
    times = measured_times(events)
    at_once = 1.0
    if fleet is not None:
        times = times or trial_times(fleet)
        at_once = max(fleet.at_once() or 1.0, 1.0)
    if times is None:
        return None
    launch, sweep, full = times
    gaps, gaps_now = launch_gaps(events)
    experiment = max(
        launch + sweep, fmean(gaps) if gaps else 0.0
    )  # an experiment of an item of unknown size
    # an item that says its count: in progress, launch to launch as it goes; not begun yet (the
    # re-validation, whose launches sweep every level), a launch and a full sweep
    fresh = launch + full
    running_each = max(launch + sweep, fmean(gaps_now)) if gaps_now else fresh
    left, now, later = open_items(todos)
    items, current = item_seconds(events)
    sizes, launched_now = item_launches(events)
    held_now = launched_now + now
    if held_now and (sizes or launched_now):  # the one in progress, once a launch is counted:
        sizes.append(held_now)  # what it launched and what it says is left
    per_item = sum(sizes) / len(sizes) if sizes else 0.0
    if per_item:
        item = max(experiment, per_item * experiment)
    else:  # no launch counted: the mean time of the items so far
        spans = [*items, current] if current else items  # the one in progress: at least this
        item = max(launch + sweep, sum(spans) / len(spans) if spans else 0.0)
    # the item in progress: what is left of an item, at least a quarter of one; one that says
    # how many experiments it holds: those (a floor of "as long again as it has run" overshot
    # the end of the re-validation stage once its count was its expected size: five lab runs)
    running = max(item - current, item / 4) if left % 1 else 0.0
    held = (now * running_each + later * fresh) / at_once
    pending = int(left) * item
    seconds = pending + held + running
    return Eta(
        seconds, left, item, launch, sweep, now + later, at_once, held, pending, running,
        experiment_s=running_each, item_launches=per_item, later=later, fresh_s=fresh,
    )  # fmt: skip


def eta_text(eta: Eta | None, finished: bool) -> str:
    if finished:
        return ""
    if eta is None:
        return "time left: estimated after the first launch and sweep"
    if eta.open_items == 0 and not eta.experiments:
        return "time left: wrapping up"
    minutes = eta.seconds / 60
    amount = f"{minutes:.0f} min" if minutes >= 2 else f"{eta.seconds:.0f} s"
    parts = []
    held = []
    if now := eta.experiments - eta.later:
        each = clock(eta.experiment_s or eta.launch_s + eta.sweep_s)
        held.append(f"{count(now, 'experiment')} × {each}")
    if eta.later:
        fresh = f"{clock(eta.fresh_s)} (a launch and a full sweep)"
        held.append(f"{count(eta.later, 'experiment')} to come × {fresh}")
    if held and eta.at_once > 1:
        together = " + ".join(held)
        held = [f"{f'({together})' if len(held) > 1 else together} ÷ {eta.at_once:.1f} at once"]
    parts += held
    pending = int(eta.open_items)
    if pending:
        size = f" ({eta.item_launches:.1f} launches)" if eta.item_launches else ""
        parts.append(f"{count(pending, 'open todo')} × {clock(eta.item_s)} each{size}")
    if eta.running_s >= 1:
        parts.append(f"{clock(eta.running_s)} for the one in progress")
    total = " + ".join(parts)
    planned = eta.planned_s or eta.seconds
    if len(parts) > 1 or eta.ago >= 1:
        total += f" = {clock(planned + eta.ago)}"
    if eta.ago >= 1:
        total += f", estimated {clock(eta.ago)} ago"
    if eta.planned_s:
        total = f"the minutes budget ends first; the open todos hold {total}"
    apart = ""
    if eta.experiment_s > eta.launch_s + eta.sweep_s:
        apart = f", launch to launch {clock(eta.experiment_s)}"
    return (
        f"about {amount} left ({total}; a launch took {clock(eta.launch_s)}, "
        f"a sweep {clock(eta.sweep_s)}{apart})"
    )


def clock(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}" if seconds >= 60 else f"{seconds} s"
