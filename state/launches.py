"""The run's launches, folded once from its events (issue 45, "the run's measured record"): each
server the run started or tried to start, with its flags, why it was started, whether it came up
(or why not, in the start failure's words), where it ran, and what was measured on it. The
report, the watch and the autopilot's resume read this record instead of folding the server
events again each in its own way.

A launch is one of:
- a `server_started` (tools/start_server.py), ready (`server_ready`, or `server_adopted` on a
  resume) or failed (`server_failed`), its purpose the `planned` event of the start_server call
  that made it (the autopilot's: agent/brains/autopilot/launch_plan.py; a call is linked to the
  launch of the server name it asked for, made before the call was answered);
- a `server_failed` no launch of its name awaited: refused before launch, it says its own flags;
- a fleet's trial (`trial_started`, each try a launch of its own; its box from `trial_placed` or
  `trial_ended`, which says whether it was measured and why not).

Its sweeps are the run's sweeps on it, by the one merge rule (state/sweeps.py): a launch there is
(server name, how many `server_started` of that name came before, itself included) - a trial's,
which starts no server of the run, (its name, 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from state.events import Event
from state.server_events import ServerFailed, ServerStarted, server_event
from state.sweeps import Sweep, sweeps


@dataclass
class Launch:
    name: str  # the server's name; a fleet's trial: the trial's (a retry's with its -tryN)
    n: int  # the `server_started` of that name it is, from 1 (refused before launch: the last's)
    flags: dict[str, Any] | None = None
    purpose: str = ""  # why it was started ("" not recorded: a model's run, an older log)
    why: str = ""
    plan: dict[str, Any] | None = None  # the autopilot's `planned` event (but call, seq, ts)
    call: str = ""  # the start_server call's id ("" a trial, or a start not seen as a call)
    host: str | None = None  # one box: the host it ran on
    box: str | None = None  # a fleet: the box its trial ran on
    ok: bool | None = None  # None: not ready nor failed yet (starting, or cut short)
    diagnosis: str = ""  # why it failed, whole (the start failure's, or the trial's reason)
    started: ServerStarted | None = None  # its server_started (None: refused, or a trial)
    failed: ServerFailed | None = None  # its server_failed
    trial: bool = False
    sweeps: list[Sweep] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, int]:
        """What its sweeps name it by (Sweep.launch)."""
        return (self.name, self.n)

    @property
    def verdict(self) -> str:
        """ "ok", "starting", or the diagnosis's first line."""
        if self.ok is None:
            return "starting"
        return "ok" if self.ok else failure_line(self.diagnosis)


def failure_line(reason: str) -> str:
    """What a failed launch or trial says in one line: its reason's first, else "failed"."""
    lines = reason.strip().splitlines()
    return lines[0] if lines else "failed"


@dataclass
class LaunchRecord:
    launches: list[Launch]  # in the order they began
    failed: list[Launch]  # those that failed, in the order they failed

    def of(self, name: str) -> list[Launch]:
        """The launches of one server name, in order."""
        return [launch for launch in self.launches if launch.name == name]


class Launches:
    """The fold: `apply` every event in order (RunState does, as it folds), `record()` reads."""

    def __init__(self) -> None:
        self._launches: list[Launch] = []
        self._failed: list[Launch] = []
        self._starts: dict[str, int] = {}  # server_started events so far, by name
        self._calls: dict[str, str] = {}  # start_server calls unanswered, by the name asked
        self._plans: dict[str, dict[str, Any]] = {}  # `planned` events by call id
        self._trials: dict[str, Launch] = {}
        self._measured: list[Event] = []  # what the sweeps are read from

    def apply(self, e: Event) -> None:
        kind = e.get("type")
        if kind == "tool_call" and e.get("name") == "start_server":
            inp = e.get("input")
            if isinstance(inp, dict):  # start_server's own default name
                self._calls[str(inp.get("name", "server"))] = str(e.get("id"))
        elif kind == "tool_result":  # a start after the call's answer is not the call's
            self._calls = {k: v for k, v in self._calls.items() if v != str(e.get("id"))}
        elif kind == "planned":
            self._plans[str(e.get("call"))] = {
                k: v for k, v in e.items() if k not in ("seq", "ts", "type", "call")
            }
        elif kind == "server_started":
            self._measured.append(e)
            self._started(e)
        elif kind in ("server_ready", "server_adopted"):
            latest = self._latest(str(e.get("name")))
            if latest is not None and latest.ok is None:
                latest.ok = True
        elif kind == "server_failed":
            self._server_failed(e)
        elif kind == "benchmark":
            self._measured.append(e)
        elif str(kind).startswith("trial_"):
            self._trial(str(kind), e)

    def record(self) -> LaunchRecord:
        """The launches so far (the fold goes on updating them as events come)."""
        by_key: dict[object, list[Sweep]] = {}
        for s in sweeps(self._measured):
            by_key.setdefault(s.launch, []).append(s)
        for launch in self._launches:
            launch.sweeps = by_key.get(launch.key, []) if launch.started or launch.trial else []
            if launch.call and launch.plan is None:
                launch.plan = self._plans.get(launch.call)
            if launch.plan is not None and not launch.trial:
                launch.purpose = str(launch.plan.get("purpose") or "")
                launch.why = str(launch.plan.get("why") or "")
        return LaunchRecord(list(self._launches), list(self._failed))

    def _latest(self, name: str) -> Launch | None:
        return next((x for x in reversed(self._launches) if x.name == name), None)

    def _started(self, e: Event) -> None:
        s = server_event(e)
        if not isinstance(s, ServerStarted):
            return  # a hand edit the typed readers skip
        self._starts[s.name] = self._starts.get(s.name, 0) + 1
        call = self._calls.pop(s.name, "")
        launch = Launch(s.name, self._starts[s.name], s.flags, host=s.host, call=call, started=s)
        self._launches.append(launch)

    def _server_failed(self, e: Event) -> None:
        f = server_event(e)
        if not isinstance(f, ServerFailed):
            return
        latest = self._latest(f.name)
        if latest is None or latest.started is None or latest.ok is not None:
            # nothing of that name awaited: refused before launch (it says its own flags)
            latest = Launch(f.name, self._starts.get(f.name, 0), f.flags)
            latest.call = self._calls.pop(f.name, "")
            self._launches.append(latest)
        elif f.flags is not None:
            latest.flags = f.flags
        latest.ok, latest.failed = False, f
        latest.diagnosis = f.diagnosis or "failed"
        self._failed.append(latest)

    def _trial(self, kind: str, e: Event) -> None:
        name = str(e.get("trial"))
        if kind == "trial_started":
            placed = Launch(name, 0, dict(e.get("flags") or {}), trial=True)
            placed.purpose, placed.why = str(e.get("purpose") or ""), str(e.get("why") or "")
            self._trials[name] = placed
            self._launches.append(placed)
            return
        launch = self._trials.get(name)
        if launch is None:
            return  # a trial known only by what it left (trial_reaped, ...)
        if kind == "trial_placed":
            launch.box = str(e.get("box") or "") or launch.box
        elif kind == "trial_ended" and not e.get("interrupted"):
            launch.box = str(e.get("box") or "") or launch.box
            launch.ok = bool(e.get("ok"))
            if not launch.ok:
                launch.diagnosis = str(e.get("reason") or "failed")
                self._failed.append(launch)


def launches(events: list[Event]) -> LaunchRecord:
    """The record of a whole log (RunState folds the same as it goes: RunState.launches)."""
    fold = Launches()
    for e in events:
        fold.apply(e)
    return fold.record()
