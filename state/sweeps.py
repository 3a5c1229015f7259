"""What one sweep is, the unit every count of measurements uses (the report's cost, configurations
and caveats, the autopilot's closing words): one configuration measured on one launch of a server,
under one label. A brain may cut a sweep into several run_benchmark calls by groups of levels
(the autopilot measures C=1,2, then C=5,10, C=30,70,100, C=250), each with its own result file and
`benchmark` event: a "benchmark call" is one of those, a sweep is what they add up to.

A benchmark event continues the latest sweep of its server when that server was not launched again
in between (no `server_started` of that name), the label is the same, and it measures no level
that sweep already has (a level measured again is a new sweep: a repeat). The autopilot merges
its measurements by the same rule (agent/brains/autopilot/observe.py `_add`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from state.events import Event


@dataclass
class Sweep:
    server: str
    launch: int  # the how-many-th launch of that server name (0 before any server_started)
    label: str
    ids: list[str] = field(default_factory=list)  # its benchmark results, in order
    levels: set[int] = field(default_factory=set)


def sweeps(events: list[Event]) -> list[Sweep]:
    """The run's sweeps, in the order they began."""
    launches: dict[str, int] = {}
    latest: dict[str, Sweep] = {}  # server name -> its latest sweep
    out: list[Sweep] = []
    for e in events:
        if e["type"] == "server_started":
            launches[str(e.get("name"))] = launches.get(str(e.get("name")), 0) + 1
            continue
        if e["type"] != "benchmark":
            continue
        server, label = str(e.get("server") or ""), str(e.get("label") or "")
        levels = {int(c) for c in e.get("summary") or {}}
        last = latest.get(server)
        launch = launches.get(server, 0)
        if last is None or (last.launch, last.label) != (launch, label) or last.levels & levels:
            last = Sweep(server, launch, label)
            latest[server] = last
            out.append(last)
        last.ids.append(str(e.get("id")))
        last.levels |= levels
    return out


def count(n: int, unit: str, units: str = "") -> str:
    """`n` with its unit, singular or plural: "1 sweep", "22 sweeps", "63 benchmark calls" -
    every count a person reads (the report, the time left, the autopilot's words) says it so."""
    return f"{n} {unit}" if n == 1 else f"{n} {units or unit + 's'}"
