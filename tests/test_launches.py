"""The run's launches, folded once from its events (state/launches.py): each launch's server name,
flags, purpose, outcome (ok, or why not), host or box, and its sweeps - on constructed events (a
start that failed, one refused before launch, a fleet's trials on box 2, a resumed run) and on
the recorded lab session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from state.fold import fold
from state.launches import launches
from state.sweeps import sweeps

LAB = Path(__file__).parent / "sessions" / "autopilot" / "lab.jsonl"
FA3 = {"--attention-backend": "fa3"}
OOM = "out of GPU memory while loading the weights\nlower --mem-fraction-static"


def events(*kinds: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"seq": i, "ts": f"2026-12-07T10:00:{i:02d}Z", "type": t, **fields}
        for i, (t, fields) in enumerate(kinds, 1)
    ]


def start(call: str, flags: dict[str, Any], purpose: str, name: str = "server") -> list[Any]:
    """The autopilot's launch: its `planned` event, then the start_server call."""
    return [
        ("planned", {"call": call, "flags": flags, "purpose": purpose, "why": f"{purpose} it"}),
        (
            "tool_call",
            {"id": call, "name": "start_server", "input": {"name": name, "flags": flags}},
        ),
    ]


def started(flags: dict[str, Any], name: str = "server") -> tuple[str, dict[str, Any]]:
    return ("server_started", {"name": name, "host": "gpu1", "flags": flags, "command": "sim"})


def answered(call: str) -> tuple[str, dict[str, Any]]:
    return ("tool_result", {"id": call, "name": "start_server", "text": "..."})


def bench(server: str, label: str, summary: dict[str, float], rid: str) -> Any:
    return ("benchmark", {"server": server, "label": label, "summary": summary, "id": rid})


def test_one_box_launches_a_failed_start_a_refusal_and_a_resumed_run() -> None:
    log = events(
        ("run_started", {"goal": "g"}),
        *start("c1", {}, "baseline"),
        started({}),
        ("server_ready", {"name": "server", "seconds": 2.0}),
        answered("c1"),
        bench("server", "baseline-L01", {"1": 90.0, "2": 170.0}, "r1"),
        bench("server", "baseline-L01", {"10": 600.0}, "r2"),  # the same sweep, more levels
        *start("c2", FA3, "screen"),
        started(FA3),
        ("server_failed", {"name": "server", "diagnosis": OOM, "log_excerpt": "CUDA OOM"}),
        answered("c2"),
        *start("c3", {"--bad": True}, "screen"),  # the engine's flag check: nothing launched
        ("server_failed", {"name": "server", "diagnosis": "refused", "flags": {"--bad": True}}),
        answered("c3"),
        *start("c4", {}, "confirm"),
        started({}),
        ("run_resumed", {}),  # the agent died meanwhile; its resume found the server serving
        ("server_adopted", {"name": "server"}),
        answered("c4"),  # the recovery's answer to the call the crash cut short
        bench("server", "confirm-L03", {"1": 91.0}, "r3"),
        started({}),  # a start after its call was answered is not the call's: no purpose
        started({}, name="side"),  # nor one of a name no call asked for
    )
    record = launches(log)
    assert fold(log).launches.record().launches == record.launches  # the fold reads the same
    first, oom, refused, resumed, uncalled, side = record.launches
    assert (first.key, first.purpose, first.why, first.call) == (
        ("server", 1),
        "baseline",
        "baseline it",
        "c1",
    )
    assert (first.ok, first.verdict, first.host, first.box, first.flags) == (
        True,
        "ok",
        "gpu1",
        None,
        {},
    )
    assert [(s.label, s.per_level, s.ids) for s in first.sweeps] == [
        ("baseline-L01", {1: 90.0, 2: 170.0, 10: 600.0}, ["r1", "r2"])
    ]
    assert (oom.key, oom.purpose, oom.flags, oom.ok) == (("server", 2), "screen", FA3, False)
    assert oom.verdict == "out of GPU memory while loading the weights" and oom.diagnosis == OOM
    assert oom.failed is not None and oom.failed.log_excerpt == "CUDA OOM" and not oom.sweeps
    # refused before launch: no server_started of its own, its flags its refusal's
    assert refused.started is None and refused.flags == {"--bad": True}
    assert (refused.purpose, refused.ok, refused.verdict) == ("screen", False, "refused")
    assert (resumed.key, resumed.purpose, resumed.ok) == (("server", 3), "confirm", True)
    assert [s.ids for s in resumed.sweeps] == [["r3"]]
    assert (uncalled.key, uncalled.call, uncalled.plan) == (("server", 4), "", None)
    assert (side.key, side.purpose, side.plan, side.ok, side.verdict) == (
        ("side", 1),
        "",
        None,
        None,
        "starting",
    )
    assert record.failed == [oom, refused]
    assert [x.name for x in record.of("side")] == ["side"]


def test_a_fleet_s_trials_are_launches_on_their_boxes() -> None:
    log = events(
        ("fleet_started", {"nodes": {"n1": "box 1", "n2": "box 2"}, "slots": 2}),
        ("trial_started", {"trial": "base-L01", "purpose": "baseline", "why": "w", "flags": {}}),
        ("trial_started", {"trial": "screen-L02-fa3", "purpose": "screen", "flags": FA3}),
        ("trial_placed", {"trial": "screen-L02-fa3", "node": "n2", "box": "box 2"}),
        bench("screen-L02-fa3", "screen-L02-fa3", {"1": 95.0}, "t1"),
        ("trial_ended", {"trial": "screen-L02-fa3", "node": "n2", "box": "box 2", "ok": True}),
        ("trial_ended", {"trial": "base-L01", "box": "box 1", "ok": False, "reason": "lost\nx"}),
        ("trial_retried", {"trial": "base-L01", "reason": "lost"}),
        ("trial_started", {"trial": "base-L01-try2", "purpose": "baseline", "flags": {}}),
    )
    base, fa3, retry = launches(log).launches
    assert (fa3.name, fa3.trial, fa3.purpose, fa3.flags, fa3.box, fa3.host) == (
        "screen-L02-fa3",
        True,
        "screen",
        FA3,
        "box 2",
        None,
    )
    assert fa3.ok and [s.ids for s in fa3.sweeps] == [["t1"]] and fa3.key == ("screen-L02-fa3", 0)
    assert (base.box, base.ok, base.verdict, base.why) == ("box 1", False, "lost", "w")
    assert (retry.name, retry.ok, retry.box) == ("base-L01-try2", None, None)
    assert launches(log).failed == [base]


def test_the_lab_session_s_launches_carry_every_sweep_and_every_purpose() -> None:
    log = [json.loads(line) for line in LAB.read_text().splitlines()]
    record = launches(log)
    starts = [e for e in log if e["type"] == "server_started"]
    assert len(record.launches) == len(starts) + sum(
        e["type"] == "server_failed" and "flags" in e for e in log
    )
    assert [s for x in record.launches for s in x.sweeps] == sweeps(log)
    assert all(x.purpose and x.plan is not None for x in record.launches)
    assert [x.flags for x in record.launches if x.started] == [e["flags"] for e in starts]
