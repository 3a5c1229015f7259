"""A fleet run's trials, folded from its events (agent/fleet/controller.py and run_trial write
them, docs/fleet.md): the boxes, the trials in flight and where they run, the trials that
ended, the retries, and how busy the boxes were. The supervisor's view (agent/view/fleet.py),
`agent watch --json --fleet` and the time-left estimate read it; utilisation is computed here
and nowhere else.

Events: `fleet_started {nodes: {node: box}, slots}` (again on each session of the run),
`trial_started {trial, purpose, why, flags, levels, attempt}`, `trial_placed {trial, node, box}`
(where a trial runs, as soon as the backend knows: optional - without it a trial's box is known
when it ends), `trial_ended {trial, node, box, ok, reason, seconds, ...}`, `trial_retried
{trial, reason, avoid}`, `trial_reaped {trial, reason, cleanup}` (a trial only its pid file
named, on resume), `trial_cleaned {trial, node, box, cleanup}` (a clean-up that got no answer
from a wedged node at first, done when the node answered again), `trial_left {trial, node, box,
reason, pgid, port, kill}` (one that never ran by the run's end: what is left, and the command
that kills it by hand); `run_finished` closes the session.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from state.events import Event, epoch
from state.launches import failure_line


def first_name(trial: str) -> str:
    """A trial's name without its -tryN: its label, and what its tries share."""
    return trial.rsplit("-try", 1)[0]


def try_name(first: str, attempt: int) -> str:
    """The name of a trial's `attempt`-th try: the first keeps its name, then <first>-tryN."""
    return first if attempt == 1 else f"{first}-try{attempt}"


@dataclass
class Trial:
    name: str
    purpose: str = ""
    why: str = ""
    flags: dict[str, Any] = field(default_factory=dict)
    levels: list[int] = field(default_factory=list)
    attempt: int = 1
    since: float = 0.0  # when the controller placed it (trial_started), epoch seconds
    node: str = ""
    box: str = ""  # known once the backend says where it runs (trial_placed), else at its end

    @property
    def label(self) -> str:
        """The name without its -tryN: the label its result files carry."""
        return first_name(self.name)


@dataclass
class Ended:
    trial: Trial
    box: str
    ok: bool
    reason: str
    seconds: float  # the box-seconds it held: the trial's own clock, else the log's
    at: float  # when it was recorded (trial_ended), epoch seconds
    ready_s: float | None = None  # from its start to its server's readiness
    retried: bool = False  # trial_retried followed: it runs again as <trial>-tryN

    @property
    def verdict(self) -> str:
        """ "ok", or the reason's first line."""
        return "ok" if self.ok else failure_line(self.reason or "")


@dataclass
class Session:
    """One controller's time on the fleet: from fleet_started to run_finished (or the next
    fleet_started, when a crashed run was resumed)."""

    boxes: int
    began: float
    ended: float | None = None


@dataclass
class FleetState:
    nodes: dict[str, str] = field(default_factory=dict)  # node id -> box, of the latest session
    slots: int = 0
    running: dict[str, Trial] = field(default_factory=dict)  # in flight, in the order placed
    ended: list[Ended] = field(default_factory=list)
    lost: list[Trial] = field(default_factory=list)  # in flight when its session ended
    retried: list[tuple[str, str]] = field(default_factory=list)  # (trial, why), in order
    reaped: list[str] = field(default_factory=list)  # trials known only by what they left
    cleaned: list[str] = field(default_factory=list)  # late clean-ups done (trial_cleaned)
    left: list[dict[str, Any]] = field(default_factory=list)  # servers LEFT (trial_left events)
    sessions: list[Session] = field(default_factory=list)
    baseline: dict[str, Any] = field(default_factory=dict)  # the flags of the first baseline
    placed: bool = False  # the backend reports placements (trial_placed, or box on start)
    last: float = 0.0  # the latest event's time, epoch seconds
    before: float = 0.0  # the one before it

    def apply(self, event: Event) -> None:
        at = epoch(event.get("ts"))
        self.before, self.last = self.last, at if at is not None else self.last
        handler = getattr(self, "_on_" + str(event.get("type")), None)
        if handler is not None:
            # an event shaped unlike we expect is left out of the picture: it must not stop a
            # resume or a view
            with contextlib.suppress(TypeError, ValueError, AttributeError):
                handler(event, self.last)

    def _on_fleet_started(self, e: Event, at: float) -> None:
        self._close(self.before)
        self.nodes = {str(k): str(v) for k, v in (e.get("nodes") or {}).items()}
        self.slots = int(e.get("slots") or 0)
        self.sessions.append(Session(len(self.nodes), at))

    def _on_run_finished(self, e: Event, at: float) -> None:
        self._close(at)

    def _on_run_resumed(self, e: Event, at: float) -> None:
        """A run resumed without run_finished: its controller died after its last event."""
        self._close(self.before)

    def _close(self, at: float) -> None:
        if self.sessions and self.sessions[-1].ended is None:
            self.sessions[-1].ended = at
        self.lost += self.running.values()
        self.running = {}

    def _on_trial_started(self, e: Event, at: float) -> None:
        trial = Trial(
            name=str(e.get("trial", "")),
            purpose=str(e.get("purpose") or ""),
            why=str(e.get("why") or ""),
            flags=dict(e.get("flags") or {}),
            levels=list(e.get("levels") or []),
            attempt=int(e.get("attempt") or 1),
            since=at,
        )
        if trial.purpose == "baseline" and not self.baseline:
            self.baseline = trial.flags
        self.running[trial.name] = trial
        if e.get("box"):
            self._on_trial_placed(e, at)
        elif len(set(self.nodes.values())) == 1:  # a fleet of one box: it runs there
            trial.box = next(iter(self.nodes.values()))

    def _on_trial_placed(self, e: Event, at: float) -> None:
        trial = self.running.get(str(e.get("trial", "")))
        if trial is not None:
            trial.node, trial.box = str(e.get("node") or ""), str(e.get("box") or "")
            self.placed = True

    def _on_trial_ended(self, e: Event, at: float) -> None:
        name = str(e.get("trial", ""))
        known = self.running.pop(name, None) or self._unlost(name)
        trial = known or Trial(name=name, since=at)
        box = str(e.get("box") or trial.box or "")
        seconds = e.get("seconds")
        # the box-seconds it held while the fleet was up: a trial a killed session left, recorded
        # as ended when the run was resumed an hour later, held its box to its session's end,
        # not through the hour the fleet was down (which no session offers as capacity)
        up = self.uptime(trial.since, at) if known is not None else None
        held = float(seconds) if isinstance(seconds, int | float) else (up or 0.0)
        held = max(min(held, up) if up is not None else held, 0.0)
        ok, ready = bool(e.get("ok")), e.get("ready_s")
        ready_s = float(ready) if isinstance(ready, int | float) and ready > 0 else None
        self.ended.append(Ended(trial, box, ok, str(e.get("reason") or ""), held, at, ready_s))

    def _unlost(self, name: str) -> Trial | None:
        """A trial its session left in flight, recorded as ended after all."""
        found = next((t for t in self.lost if t.name == name), None)
        if found is not None:
            self.lost.remove(found)
        return found

    def _on_trial_reaped(self, e: Event, at: float) -> None:
        """A trial a killed session ran whose own events the kill lost: what it left, killed."""
        self.reaped.append(str(e.get("trial", "")))

    def _on_trial_cleaned(self, e: Event, at: float) -> None:
        """A clean-up a wedged node did not answer at first, done when it answered again: the
        server it names is no longer left."""
        trial = str(e.get("trial", ""))
        self.cleaned.append(trial)
        self.left = [x for x in self.left if x.get("trial") != trial]

    def _on_trial_left(self, e: Event, at: float) -> None:
        """A server whose clean-up never ran by the run's end (a node that never answered)."""
        self.left.append({k: v for k, v in e.items() if k not in ("seq", "ts", "type")})

    def _on_trial_retried(self, e: Event, at: float) -> None:
        name = str(e.get("trial", ""))
        self.retried.append((name, str(e.get("reason") or "")))
        for ended in reversed(self.ended):
            if ended.trial.name == name:
                ended.retried = True
                break

    # --- what the supervisor reads ---------------------------------------------------------------
    def boxes(self) -> list[str]:
        """Every box of the fleet and every box a trial ended on, in a natural order."""
        names = set(self.nodes.values()) | {e.box for e in self.ended if e.box}
        names |= {t.box for t in self.running.values() if t.box}
        return sorted(names, key=_natural)

    def per_box(self) -> dict[str, int]:
        """How many trials ended on each box (failed ones too; "?" when the box is unknown)."""
        counts = dict.fromkeys(self.boxes(), 0)
        for e in self.ended:
            counts[e.box or "?"] = counts.get(e.box or "?", 0) + 1
        return counts

    def busy_per_box(self) -> dict[str, float]:
        """The box-seconds each box spent on trials that ended."""
        busy = dict.fromkeys(self.boxes(), 0.0)
        for e in self.ended:
            busy[e.box or "?"] = busy.get(e.box or "?", 0.0) + e.seconds
        return busy

    def waiting(self) -> list[Trial]:
        """Trials in flight that wait for a box: those not placed yet when the backend reports
        placements, else those beyond the fleet's slots (the controller places at most that
        many, so on a healthy fleet none)."""
        trials = list(self.running.values())
        if self.placed:
            return [t for t in trials if not t.box]
        return trials[self.slots :] if self.slots else []

    def busy_seconds(self, now: float | None = None) -> float:
        """Box-seconds spent on trials: those that ended (their own seconds), those in flight
        (from their start to `now`) and those a stopped session left (to its end)."""
        now = self._now(now)
        busy = sum(e.seconds for e in self.ended)
        waiting = {t.name for t in self.waiting()}
        busy += sum(max(now - t.since, 0.0) for t in self.running.values() if t.name not in waiting)
        for t in self.lost:
            end = next((s.ended for s in self.sessions if s.ended and s.ended >= t.since), now)
            busy += max(end - t.since, 0.0)
        return busy

    def elapsed(self, now: float | None = None) -> float:
        """Seconds the fleet has been up, over every session."""
        now = self._now(now)
        return sum(max((s.ended if s.ended is not None else now) - s.began, 0.0)
                   for s in self.sessions)  # fmt: skip

    def uptime(self, since: float, until: float) -> float:
        """Seconds of [since, until] the fleet was up (in one of its sessions)."""
        return sum(
            max(min(s.ended if s.ended is not None else until, until) - max(s.began, since), 0.0)
            for s in self.sessions
        )

    def capacity(self, now: float | None = None) -> float:
        """Box-seconds the fleet offered: its boxes times the time it was up, per session."""
        now = self._now(now)
        return sum(
            s.boxes * max((s.ended if s.ended is not None else now) - s.began, 0.0)
            for s in self.sessions
        )

    def utilisation(self, now: float | None = None) -> float | None:
        """Busy box-seconds / (boxes x elapsed), so far; None before the fleet has been up."""
        capacity = self.capacity(now)
        return self.busy_seconds(now) / capacity if capacity > 0 else None

    def at_once(self, now: float | None = None) -> float | None:
        """How many trials ran at once on average, so far (boxes x utilisation)."""
        elapsed = self.elapsed(now)
        return self.busy_seconds(now) / elapsed if elapsed > 0 else None

    def _now(self, now: float | None) -> float:
        return self.last if now is None else now


def _natural(name: str) -> tuple[Any, ...]:
    """box2 before box10."""
    head = name.rstrip("0123456789")
    tail = name[len(head) :]
    return (head, int(tail) if tail else -1, name)
