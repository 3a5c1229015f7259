"""The supervisor's view of a fleet run (docs/fleet.md "Watching a fleet run"): the boxes and
what each runs now, the trials waiting for a box, one line per trial that ends, the retries, the
trials per box and the fleet's utilisation - all read from the fold of the events
(state/fleet.py, where utilisation is computed). The live view and `agent watch` draw
`fleet_panel`; the event lines use `fleet_line`; `agent watch --json --fleet` prints `snapshot`.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agent.brains.autopilot.steps import FIRST
from agent.report.measured import flags_change, human_label
from agent.view.words import clock, short
from state.events import Event
from state.fleet import Ended, FleetState, Trial

ENDED_SHOWN = 5  # the latest trials that ended, in the panel
WHERE_UNKNOWN = "on a box Ray chose, known when the trial ends; -: idle, or running it"
FLEET_EVENTS = (
    "fleet_started",
    "trial_started",
    "trial_placed",
    "trial_ended",
    "trial_retried",
    "trial_cleaned",
    "trial_left",
)


def ended_text(trial: str, box: str, seconds: float | None, verdict: str) -> str:
    took = f"{seconds:.1f} s" if isinstance(seconds, int | float) else "-"
    return f"fleet: {trial} on {box or '?'}: {took}, {verdict}"


def fleet_line(event: Event) -> str | None:
    """The event line of a fleet event (None for any other event)."""
    t = event["type"]
    if t == "fleet_started":
        boxes = sorted(set((event.get("nodes") or {}).values()))
        return (
            f"fleet: {len(boxes)} box{'es' if len(boxes) != 1 else ''} ({', '.join(boxes)}), "
            f"{event.get('slots')} trial(s) at once"
        )
    if t == "trial_started":
        levels = ",".join(str(c) for c in event.get("levels") or [])
        trial = Trial(str(event.get("trial", "")), purpose=str(event.get("purpose") or ""))
        again = f", try {event['attempt']}" if (event.get("attempt") or 1) > 1 else ""
        return f"fleet: {trial.name} starts ({human_label(trial.label)} at C={levels}{again})"
    if t == "trial_placed":
        return f"fleet: {event.get('trial')} runs on {event.get('box') or '?'}"
    if t == "trial_ended":
        reason = str(event.get("reason") or "failed").strip().splitlines() or ["failed"]
        verdict = "ok" if event.get("ok") else short(reason[0], 120)
        box = str(event.get("box") or "")
        return ended_text(str(event.get("trial")), box, event.get("seconds"), verdict)
    if t == "trial_retried":
        if event.get("avoid"):  # its node was lost: the trial_ended line said how
            return f"fleet: {event.get('trial')} runs again, on another box"
        return f"fleet: {event.get('trial')} runs again: {short(str(event.get('reason')), 120)}"
    if t == "trial_cleaned":  # a clean-up that got no answer at first, done when the node answered
        return f"fleet: {event.get('trial')}: {short(str(event.get('cleanup')), 160)}"
    if t == "trial_left":
        where = [f"{k} {event[k]}" for k in ("pgid", "port") if event.get(k)]
        known = f" ({', '.join(where)})" if where else ""
        return (
            f"fleet: {event.get('trial')}: {short(str(event.get('reason')), 200)}{known}; "
            f"kill it: {event.get('kill')}"
        )
    return None


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def summary(fleet: FleetState, now: float | None = None) -> str:
    """One line: the trials per box and the utilisation so far."""
    per_box = ", ".join(f"{box} {n}" for box, n in fleet.per_box().items())
    at_once = fleet.at_once(now)
    running = f"{at_once:.1f} trials at once on average" if at_once is not None else ""
    retries = len(fleet.retried)
    whose = "box's" if len(fleet.nodes) == 1 else "boxes'"
    return (
        f"fleet: {len(fleet.ended)} trials ended ({per_box or 'none yet'}); "
        f"busy {percent(fleet.utilisation(now))} of {len(fleet.nodes)} {whose} time"
        + (f", {running}" if running else "")
        + (f"; {retries} retried" if retries else "")
    )


def fleet_panel(fleet: FleetState, now: float | None = None) -> RenderableType:
    """One row per box (what it runs now, for how long, the trials it ran, its busy time), one
    per trial in flight whose box is not known yet (or that waits for one), then the latest
    trials that ended; `now` None: the time of the latest event (a run that ended)."""
    now = fleet.last if now is None else now
    table = Table(box=None, padding=(0, 1), show_edge=False)
    table.add_column("box", style="bold", no_wrap=True)
    table.add_column("trial · flags vs the baseline", overflow="fold")
    table.add_column("purpose", no_wrap=True)
    for col in ("for", "trials", "busy"):
        table.add_column(col, justify="right", no_wrap=True)
    on: dict[str, Trial] = {t.box: t for t in fleet.running.values() if t.box}
    busy = fleet.busy_per_box()
    unknown = any(not t.box for t in fleet.running.values())  # a "?" trial may run on any box
    for box, count in fleet.per_box().items():
        t = on.get(box)
        free = Text("-" if unknown else "idle", style="dim")
        running = _row(t, fleet, now) if t else (free, "", "")
        table.add_row(box, *running, str(count), clock(busy.get(box, 0.0)))
    waiting = {t.name for t in fleet.waiting()}
    for t in fleet.running.values():
        if not t.box:
            where = "waiting" if t.name in waiting else "?"
            table.add_row(Text(where, style="yellow" if where == "waiting" else "dim"),
                          *_row(t, fleet, now))  # fmt: skip
    parts: list[RenderableType] = [table]
    if any(not t.box and t.name not in waiting for t in fleet.running.values()):
        parts.append(Text(f"(?: {WHERE_UNKNOWN})", style="dim"))
    for e in fleet.ended[-ENDED_SHOWN:]:
        parts.append(Text(short(_ended_line(e), 110), style="" if e.ok else "red"))
    for t in fleet.lost[-ENDED_SHOWN:]:
        parts.append(Text(f"fleet: {t.name} never came back (its session ended first)", "dim"))
    boxes = len(fleet.nodes)
    title = (
        f"fleet: {boxes} box{'es' if boxes != 1 else ''}, {fleet.slots} at once · "
        f"busy {percent(fleet.utilisation(now))} of box time so far"
    )
    return Panel(Group(*parts), title=title, title_align="left")


def _row(t: Trial, fleet: FleetState, now: float) -> tuple[Text, str, str]:
    """A trial in flight: its name (and try) over its flags, its purpose in words, how long."""
    name = t.name if t.attempt == 1 or "-try" in t.name else f"{t.name} (try {t.attempt})"
    cell = Text(short(name, 60))
    cell.append("\n" + flags_text(t, fleet), style="dim")
    return cell, purpose_words(t), clock(now - t.since)


def purpose_words(t: Trial) -> str:
    """What the trial is for, in the report's words: "screened", "candidate", "baseline repeat"."""
    return human_label(t.label).split(":")[0]


def flags_text(t: Trial, fleet: FleetState) -> str:
    """How the trial's flags differ from the baseline's (all of them before a baseline ran)."""
    if t.purpose in FIRST:
        return "(baseline flags)"
    return short(flags_change(t.flags, fleet.baseline), 120)


def _ended_line(e: Ended) -> str:
    verdict = e.verdict if e.ok else short(e.verdict, 60)
    return ended_text(e.trial.name, e.box, e.seconds, verdict + (" → retried" if e.retried else ""))


def snapshot(fleet: FleetState, now: float | None = None) -> dict[str, Any]:
    """The fleet as `agent watch --json --fleet` prints it after each fleet event."""
    now = fleet.last if now is None else now
    waiting = {t.name for t in fleet.waiting()}

    def trial(t: Trial) -> dict[str, Any]:
        return {
            "trial": t.name,
            "purpose": t.purpose,
            "what": human_label(t.label),
            "flags_changed": flags_text(t, fleet),
            "flags": t.flags,
            "attempt": t.attempt,
            "box": t.box or None,
            "waiting": t.name in waiting,
            "seconds": round(max(now - t.since, 0.0), 1),
        }

    return {
        "boxes": fleet.boxes(),
        "slots": fleet.slots,
        "running": [trial(t) for t in fleet.running.values()],
        "ended": [
            {
                "trial": e.trial.name,
                "box": e.box or None,
                "ok": e.ok,
                "reason": e.verdict if not e.ok else "",
                "seconds": round(e.seconds, 1),
                "retried": e.retried,
            }
            for e in fleet.ended
        ],
        "retried": [{"trial": name, "reason": why} for name, why in fleet.retried],
        "never_ended": [t.name for t in fleet.lost],
        "trials_per_box": fleet.per_box(),
        "busy_s": round(fleet.busy_seconds(now), 1),
        "elapsed_s": round(fleet.elapsed(now), 1),
        "utilisation": _round(fleet.utilisation(now)),
        "at_once": _round(fleet.at_once(now)),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
