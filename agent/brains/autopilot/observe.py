"""The History of a run, rebuilt from its fold: what the brain's own tool calls did.

Launches and crashes come from the conversation (each start_server call and the typed part of
its result, the tool_result event's `data`: code never parses the text written for the model),
the numbers from the `benchmark` events. A sweep the autopilot split into several run_benchmark
calls (one per group of levels, so that each level runs about as many requests as it has
streams) is one measurement again: the calls of one turn on one launch share a label. Whether a
level met the SLO comes from the result files, read through tools/bench/results.py and judged by
tools.domain.stats.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.brains.autopilot.engine_limits import space_of
from agent.brains.autopilot.history import Duet, History
from state.fold import RunState
from state.run import read_state
from state.sweeps import continued, per_level_of
from tools.bench.results import ResultError, load, of_event
from tools.domain import stats
from tools.domain.config import Config
from tools.domain.objective import SLO_KINDS
from tools.domain.space import Flags, SearchSpace

SIDE = "duet-base"  # the baseline's server beside the campaign's, for a duet (brain.py)


def tool_exchanges(state: RunState) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(tool name, input, result block) for every answered tool call, in order; the block's
    `data` is the call's typed result (RunState.tool_data), {} where the tool gave none. A call
    whose input is not an object (the model's mistake) is left out: every tool refused it
    unrun."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in state.messages:
        for block in message["content"]:
            if block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
                calls[block["id"]] = (block["name"], block["input"])
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in calls:
                name, inp = calls.pop(block["tool_use_id"])
                data = state.tool_data.get(str(block["tool_use_id"]), {})
                yield name, inp, {**block, "data": data}


def busy_port(block: dict[str, Any]) -> bool:
    """start_server found the port held by a process not of this run: that says nothing about
    the configuration (the brain moves to another port)."""
    return bool(block["data"].get("port_busy"))


def interrupted(block: dict[str, Any]) -> bool:
    """A result that agent/recover.py wrote for a call a crash of the agent cut short."""
    return bool(block.get("is_error")) and bool(block["data"].get("interrupted"))


def start_failure(block: dict[str, Any]) -> str:
    """Why start_server did not start the server: its diagnosis (not the text's line, whose
    seconds differ from one launch to the next, so equal failures would read as different)."""
    diagnosis = str(block["data"].get("diagnosis") or "").strip()
    return diagnosis.splitlines()[0][:300] if diagnosis else first_line(block)


def first_line(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):  # API form: a list of text blocks
        content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content or "").strip().splitlines()[0][:300] if content else ""


def run_config(state: RunState, where: object = "the run") -> Config:
    """The configuration a run recorded when it started."""
    try:
        return Config.model_validate(state.config)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        why = f"{loc}: {first['msg']}"
        raise ValueError(f"{where}: the recorded config does not load: {why}") from None


def slo_of(config: Config) -> stats.Slo | None:
    """The SLO limits each level is judged against, when the objective reads them."""
    return config.objective if config.objective.kind in SLO_KINDS else None


def history_of_run(run_path: Path) -> History:
    """The History the autopilot reads from a run folder: its events, and its result files for
    the SLO - the measurements compare, recommend and the report read too. A run whose servers
    were not started by its own start_server calls (measured by hand, or written by a test) is
    read from its benchmark events alone (`history_of_benchmarks`)."""
    state = read_state(run_path)
    config = run_config(state, run_path)
    space, server, slo = space_of(config), config.server.name, slo_of(config)
    launched = any(
        name == "start_server" and inp.get("name", "server") == server
        for name, inp, _ in tool_exchanges(state)
    )
    if not launched:
        return history_of_benchmarks(state.results, space, run_path, slo)
    return observe(state, space, server, run_path, slo)


def history_of_benchmarks(
    events: list[dict[str, Any]],
    space: SearchSpace,
    run_path: Path | None = None,
    slo: stats.Slo | None = None,
) -> History:
    """A History from `benchmark` events alone: a launch per change of server or configuration,
    its events merged into sweeps as `observe` merges them (`_add`)."""
    h = History(space)
    last: tuple[str, str] | None = None
    for event in events:
        if event.get("duet"):
            continue  # a duet's round: two servers at once, not a launch of its own
        flags = space.complete(event.get("flags") or {})
        server = (str(event.get("server") or ""), space.key(flags))
        if server != last:
            h.launched(flags)
            last = server
        _add(h, len(h.launches) - 1, str(event.get("label") or ""), event, run_path, slo)
        h.floored(flags, floors_of(event))
    return h


def observe(
    state: RunState,
    space: SearchSpace,
    server: str,
    run_path: Path | None = None,
    slo: stats.Slo | None = None,
) -> History:
    h = History(space)
    by_id = {str(r.get("id")): r for r in state.results if not r.get("duet")}
    unmatched = [r for r in state.results if not r.get("duet")]
    duets = _duets(state.results)  # each duet's events, by its id
    failures: dict[int, int] = {}  # launch -> failed run_benchmark calls
    for name, inp, block in tool_exchanges(state):
        error = bool(block.get("is_error"))
        if error and interrupted(block):
            # cut by a crash of the agent (agent/recover.py): no verdict on the configuration
            if name == "start_server" and inp.get("name", "server") == server:
                h.serving_nothing()  # the launch never finished: launch it again
            continue
        if name == "start_server" and inp.get("name", "server") == server:
            if not isinstance(inp.get("flags", {}), dict):
                continue  # refused as invalid input: nothing was launched
            if error and busy_port(block):
                h.serving_nothing()
                continue
            flags = space.complete(inp.get("flags") or {})
            reason = start_failure(block) if error else ""
            h.launched(flags, ok=not error, reason=reason, serving=True)
        elif name == "start_server" and inp.get("name") == SIDE:
            flags = space.complete(inp.get("flags") or {})
            h.side_launched(flags, ok=not error, reason=start_failure(block) if error else "")
        elif name == "kill_server" and inp.get("name") == SIDE:
            h.side_gone()
        elif name == "kill_server" and inp.get("name") in (None, server):
            h.serving_nothing()
            h.side_gone()
        elif name == "duet":  # its rounds by the id its typed result names (a duet a crash cut
            # short has saved rounds too, under its own id: never read as a later call's)
            _duet(h, inp, duets.get(str(block["data"].get("duet")), []), server, block)
        elif name == "run_benchmark" and inp.get("warmup") is True:
            continue  # a warm-up is no sweep: it wrote no benchmark event to be read as one
        elif name == "run_benchmark" and h.running is not None:
            if error:  # twice on one launch: that server is no good, the next try relaunches
                failures[h.running] = failures.get(h.running, 0) + 1
                if failures[h.running] >= 2:
                    h.broke(h.running, first_line(block))
                    h.serving_nothing()
                continue
            event = _event_for(block, by_id, unmatched)
            if event is None:
                continue
            label = str(inp.get("label") or event.get("label") or "")
            _add(h, h.running, label, event, run_path, slo)
            h.floored(h.launches[h.running].config, floors_of(event))
    if server not in state.servers:  # it died, or was killed outside our calls
        h.serving_nothing()
    return h


def _duets(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The `benchmark` events of the duet tool's rounds (their typed `duet` part), by duet id."""
    found: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        part = e.get("duet")
        if isinstance(part, dict):
            found.setdefault(str(part.get("id")), []).append(e)
    return found


def _duet(
    h: History,
    inp: dict[str, Any],
    events: list[dict[str, Any]],
    server: str,
    block: dict[str, Any],
) -> None:
    """A duet call: its rounds (from the events' `duet` parts: round, side) recorded as a Duet;
    the autopilot's own (the baseline beside, its server measured) also as measurements of the
    two launches. A call that measured no round makes no duet: the comparison falls back."""
    if not events:
        h.no_duet(f"the duet measured nothing: {first_line(block)}")
        return
    rounds: dict[int, dict[str, dict[int, float]]] = {}
    flags: dict[str, Flags] = {}
    ours = inp.get("a") == SIDE and inp.get("b") == server
    for e in events:
        part = e["duet"]
        side = str(part.get("side"))
        per = per_level_of(e)
        rounds.setdefault(int(part.get("round", 0)), {})[side] = per
        flags[side] = h.space.complete(e.get("flags") or {})
        launch = h.side.launch if side == "a" else h.running
        if ours and launch is not None:
            label = str(e.get("label") or "duet")
            h.measured(h.launches[launch].config, launch, per, label, None, (str(e.get("id")),))
    whole = tuple((r["a"], r["b"]) for _, r in sorted(rounds.items()) if len(r) == 2)
    looks = int(events[0]["duet"].get("rounds", stats.MAX_PAIRS))
    if "a" in flags and "b" in flags:
        h.dueted(Duet(flags["a"], flags["b"], whole, looks))


def _add(
    h: History,
    launch: int,
    label: str,
    event: dict[str, Any],
    run_path: Path | None,
    slo: stats.Slo | None,
) -> None:
    """One benchmark of `launch`: a new measurement, or more of a sweep already measured
    (state.sweeps.continued, the one merge rule: the latest sweep of the launch, same label, none
    of its levels - a sweep split into calls by groups of levels)."""
    per = per_level_of(event)
    ok = slo_ok_of(event, run_path, slo) if slo is not None else None
    ids = (str(event.get("id")),)
    index = continued(h.measurements, launch, label, per)
    if index is not None:
        h.measured_more(index, per, ok, ids)
        return
    h.measured(h.launches[launch].config, launch, per, label, ok, ids)


def floors_of(event: dict[str, Any]) -> dict[int, tuple[float, str]]:
    """Per level the floor a `benchmark` event's points carry (tools.benchmark_outcome.COMPACT):
    (tok/s, bound); none in events written before they carried it."""
    out: dict[int, tuple[float, str]] = {}
    for level, point in (event.get("points") or {}).items():
        tok_s = point.get("floor_tok_s") if isinstance(point, dict) else None
        if isinstance(tok_s, int | float) and tok_s > 0 and str(level).isdigit():
            out[int(level)] = (float(tok_s), str(point.get("floor_bound") or "memory"))
    return out


def _event_for(
    block: dict[str, Any], by_id: dict[str, dict[str, Any]], unmatched: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The benchmark event of a run_benchmark result: the one its typed result names, else the
    next not yet taken (the events keep their order)."""
    event = by_id.get(str(block["data"].get("id")))
    if event is not None:
        if event in unmatched:
            unmatched.remove(event)
        return event
    return unmatched.pop(0) if unmatched else None


def slo_ok_of(
    event: dict[str, Any], run_path: Path | None, slo: stats.Slo
) -> dict[int, bool] | None:
    """Per level, whether the benchmark met the SLO (stats.slo_met: a latency the result does not
    carry is not met). With the run folder known, its result as tools.bench.results reads it (the
    file, else rebuilt from the event); without, the file at the path the tool wrote, or None."""
    try:
        if run_path is not None:
            result = of_event(event, run_path)
        else:
            result = load(str(event.get("path", "")))
    except ResultError:
        return None
    return {
        p.max_concurrency: stats.slo_met(p.model_dump(exclude_unset=True), slo)
        for p in result.points
    }
