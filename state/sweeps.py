"""What one sweep is, the unit every count of measurements uses (the report's cost, configurations
and caveats, the autopilot's closing words and its History, the statistics' repeats): one
configuration measured on one launch of a server, under one label. A brain may cut a sweep into
several run_benchmark calls by groups of levels (the autopilot measures C=1,2, then C=5,10,
C=30,70,100, C=250), each with its own result file and `benchmark` event: a "benchmark call" is one
of those, a sweep is what they add up to.

The one merge rule (`continued`): a benchmark continues the latest sweep of its launch when the
label is the same and it measures no level that sweep already has (a level measured again is a new
sweep: a repeat). Each reader says what a launch is as far as it can tell: the events by
`server_started` (`sweeps`), the autopilot by its start_server calls (its History's measurements),
result files by runs of one label (tools.bench.results).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from state.events import Event


class Swept(Protocol):
    """What the rule reads of a sweep recorded so far."""

    @property
    def launch(self) -> Hashable: ...
    @property
    def label(self) -> str: ...
    @property
    def per_level(self) -> Mapping[int, float]: ...


def continued(
    record: Sequence[Swept], launch: Hashable, label: str, levels: Collection[int]
) -> int | None:
    """The index in `record` of the sweep a benchmark of `launch` under `label` measuring `levels`
    continues: the latest sweep of that launch, when its label is the same and it has none of the
    levels; None: the benchmark begins a sweep."""
    for i in range(len(record) - 1, -1, -1):
        s = record[i]
        if s.launch == launch:
            return i if s.label == label and not set(levels) & set(s.per_level) else None
    return None


@dataclass
class Sweep:
    launch: Hashable  # which launch of a server it measured, as its reader tells them apart
    label: str
    per_level: dict[int, float] = field(default_factory=dict)  # output tok/s (0.0: failed)
    ids: list[str] = field(default_factory=list)  # its benchmark results, in order


def grouped(benchmarks: Iterable[tuple[Hashable, str, Mapping[int, float], str]]) -> list[Sweep]:
    """The sweeps that benchmarks (launch, label, per-level values, result id), in the order
    measured, add up to, in the order they began."""
    out: list[Sweep] = []
    for launch, label, per_level, result_id in benchmarks:
        i = continued(out, launch, label, per_level)
        if i is None:
            out.append(Sweep(launch, label))
        s = out[-1 if i is None else i]
        s.per_level = dict(sorted({**s.per_level, **per_level}.items()))
        s.ids.append(result_id)
    return out


def sweeps(events: list[Event]) -> list[Sweep]:
    """The run's sweeps, in the order they began; a launch is (server name, how many
    `server_started` of that name came before: 0 before any)."""
    return grouped(_benchmarks(events))


def per_level_of(event: Mapping[str, object]) -> dict[int, float]:
    """A `benchmark` event's output tok/s per level (its `summary`; a failed level 0.0)."""
    summary = event.get("summary")
    return {
        int(c): float(v or 0.0) for c, v in (summary if isinstance(summary, dict) else {}).items()
    }


def _benchmarks(
    events: list[Event],
) -> Iterable[tuple[tuple[str, int], str, dict[int, float], str]]:
    launches: dict[str, int] = {}
    for e in events:
        if e["type"] == "server_started":
            launches[str(e.get("name"))] = launches.get(str(e.get("name")), 0) + 1
        elif e["type"] == "benchmark":
            server, label = str(e.get("server") or ""), str(e.get("label") or "")
            yield (server, launches.get(server, 0)), label, per_level_of(e), str(e.get("id"))


def count(n: int, unit: str, units: str = "") -> str:
    """`n` with its unit, singular or plural: "1 sweep", "22 sweeps", "63 benchmark calls" -
    every count a person reads (the report, the time left, the autopilot's words) says it so."""
    return f"{n} {unit}" if n == 1 else f"{n} {units or unit + 's'}"
