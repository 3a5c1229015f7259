"""The autopilot's figures are tools.domain.stats' figures: its History, rebuilt from a run folder's
events (the recorded lab campaign), gives the noise floor and the geometric-mean ratio that stats
gives on the same sweeps, read here straight from the benchmark events - and the autopilot prints
those numbers. Where nothing was repeated it plans with a default but prints "unknown"."""

from __future__ import annotations

import itertools
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent.brains.autopilot.brain import reading_of_run
from agent.brains.autopilot.history import History, Launch, Measurement
from agent.brains.autopilot.narrate import floors_text
from agent.brains.autopilot.observe import history_of_run, slo_ok_of
from agent.brains.autopilot.planner import Planner, Settings
from agent.brains.autopilot.reading import NOISE_DEFAULT, Reading
from agent.session import Limits, start
from sim.space import default_space
from tests.autopilot_world import lab
from tests.report_session import BASE, bench_in_run
from tools.bench.results import build_result, save
from tools.bench.schema import ClientInfo, ServerRef, Workload
from tools.domain import stats
from tools.domain.config import ObjectiveConfig
from tools.domain.space import SearchSpace

SESSION = Path(__file__).parent / "sessions" / "autopilot" / "lab.jsonl"
EVENTS = [json.loads(line) for line in SESSION.read_text().splitlines()]
LEVELS = tuple(EVENTS[0]["config"]["bench"]["concurrency"])


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded lab campaign as a run folder (its events are the run's events)."""
    folder = tmp_path_factory.mktemp("runs") / "autopilot-lab"
    folder.mkdir()
    shutil.copy(SESSION, folder / "events.jsonl")
    return folder


def sweeps_from_events() -> dict[str, list[dict[int, float]]]:
    """Per configuration (its flags), its sweeps over every level in order, read from the
    benchmark events alone: the calls of one sweep share a label."""
    by_label: dict[str, tuple[str, dict[int, float]]] = {}
    for e in EVENTS:
        if e["type"] == "benchmark":
            key = json.dumps(e["flags"], sort_keys=True)
            _, per = by_label.setdefault(e["label"], (key, {}))
            per.update({int(c): float(v) for c, v in e["summary"].items()})
    out: dict[str, list[dict[int, float]]] = {}
    for key, per in by_label.values():
        if set(LEVELS) <= set(per):
            out.setdefault(key, []).append(dict(sorted(per.items())))
    return out


def means_from_events(flags: dict[str, Any]) -> dict[int, float]:
    """Per level, the mean over every benchmark of one configuration (screens included)."""
    values: dict[int, list[float]] = {}
    for e in EVENTS:
        if e["type"] == "benchmark" and e["flags"] == flags:
            for c, v in e["summary"].items():
                values.setdefault(int(c), []).append(float(v))
    return {c: sum(v) / len(v) for c, v in sorted(values.items())}


def assistant_text() -> str:
    return "\n".join(
        b["text"]
        for e in EVENTS
        if e["type"] == "message" and e["role"] == "assistant"
        for b in e["content"]
        if b.get("type") == "text"
    )


def test_the_history_of_a_run_folder_holds_the_sweeps_of_its_events(run_folder: Path) -> None:
    h = history_of_run(run_folder)
    sweeps = sweeps_from_events()
    assert h.repeats(LEVELS) == [s for s in sweeps.values() if len(s) >= 2]
    base = json.dumps(h.space.baseline, sort_keys=True)
    pairs = {
        e["label"]
        for e in EVENTS
        if e["type"] == "benchmark"
        and e["label"].startswith("pair-")
        and json.dumps(e["flags"], sort_keys=True) == base
    }
    assert pairs, "the winner was measured against the baseline in launch pairs"
    assert len(sweeps[base]) == 2 + len(pairs), "the A/A pair, and one sweep per launch pair"
    # launches that did not start: as many as the events' server_failed (the recorded path decides
    # whether one is tried; tests/test_strategy_failures.py covers learning from them)
    failed = sum(1 for e in EVENTS if e["type"] == "server_failed")
    assert sum(1 for launch in h.launches if not launch.ok) == failed


def test_the_noise_floor_is_stats_floor_and_the_formula_of_its_doc(run_folder: Path) -> None:
    r = reading_of_run(run_folder)
    repeats = list(sweeps_from_events().values())
    level_floor = stats.objective_floor(repeats, LEVELS, kind="level")
    objective_floor = stats.objective_floor(repeats, LEVELS, kind="geomean")
    assert r.floors == (level_floor, objective_floor)
    # the formula spelled out (no level failed here, so nothing is skipped): twice the RMS of the
    # relative differences of consecutive repeats at the levels both measured, pooled over levels;
    # / sqrt(n) for the geomean
    d = [
        abs(a[c] - b[c]) / ((a[c] + b[c]) / 2)
        for sweeps in repeats
        for a, b in itertools.pairwise(sweeps)
        for c in sorted(set(a) & set(b))
    ]
    rms = math.sqrt(sum(x * x for x in d) / len(d))
    assert r.floors == (pytest.approx(2 * rms), pytest.approx(2 * rms / math.sqrt(len(LEVELS))))
    assert r.level_noise == level_floor and r.objective_noise == objective_floor


def test_the_ratio_to_the_baseline_is_stats_geomean_ratio(run_folder: Path) -> None:
    r = reading_of_run(run_folder)
    best, base = r.incumbent, r.space.baseline
    expected = stats.geomean_ratio(means_from_events(best), means_from_events(base))
    ratio, _ = r.compare(best, base, LEVELS)
    assert expected is not None and ratio == pytest.approx(expected, rel=1e-12)
    assert stats.beats(ratio, r.floors[1])
    finish = Planner(r.space, r.settings).finish(r.h)
    assert finish.value / finish.baseline_value == pytest.approx(expected, rel=1e-12)


def test_the_autopilot_printed_those_figures(run_folder: Path) -> None:
    r = reading_of_run(run_folder)
    level_floor, objective_floor = r.floors
    ratio, _ = r.compare(r.incumbent, r.space.baseline, LEVELS)
    assert ratio is not None and level_floor is not None and objective_floor is not None
    text = assistant_text()
    assert floors_text(level_floor, objective_floor) in text
    # the sweeps' means give the ratio; the claim is the launch pairs' (tests/test_paired.py)
    assert f"({ratio - 1:+.1%}); the best beats the baseline by" in text
    assert "paired (95 % interval" in text and f"noise floor {objective_floor:.1%})" in text
    recommend = next(e for e in EVENTS if e["type"] == "tool_call" and e["name"] == "recommend")
    assert f"noise floor {objective_floor:.1%})" in recommend["input"]["reason"]


def test_a_run_measured_without_the_autopilots_launches_reads_the_same(tmp_path: Path) -> None:
    """Benchmark events and result files only (as the cross-consumer test writes them): the
    History comes from the events, and its figures are stats' on those sweeps."""
    cg256 = {**BASE, "--cuda-graph-max-bs": 256}
    sweeps = {
        "b001-base": (BASE, {1: 90.0, 10: 360.0, 100: 520.0}),
        "b002-base": (BASE, {1: 92.0, 10: 366.0, 100: 531.0}),
        "b003-cg256": (cg256, {1: 95.0, 10: 380.0, 100: 560.0}),
        "b004-cg256": (cg256, {1: 96.0, 10: 377.0, 100: 566.0}),
    }
    run = start("beat baseline", lab(), "autopilot", tmp_path, None, Limits())
    for rid, (flags, per) in sweeps.items():
        bench_in_run(run, rid, flags, per)
    h = history_of_run(run.path)
    assert [m.ids for m in h.measurements] == [(rid,) for rid in sweeps]
    levels = (1, 10, 100)
    r = Reading(h.space, Settings(levels), h)
    base, cand = [[per for f, per in sweeps.values() if f == c] for c in (BASE, cg256)]
    assert r.floors[1] == pytest.approx(stats.objective_floor([base, cand], levels))
    ratio, _ = r.compare(h.space.complete(cg256), h.space.baseline, levels)
    assert ratio == pytest.approx(
        stats.geomean_ratio(stats.mean_sweep(cand), stats.mean_sweep(base)), rel=1e-12
    )
    assert r.incumbent == h.space.complete(cg256), "the same winner"


def test_with_nothing_repeated_the_floor_is_unknown_and_said_so() -> None:
    space = SearchSpace.parse(default_space())
    base, other = space.baseline, space.repair({**space.baseline, "--cuda-graph-max-bs": 256})
    measured = [
        Measurement(base, 0, dict.fromkeys(LEVELS, 100.0)),
        Measurement(base, 0, dict.fromkeys(LEVELS, 0.0)),  # every level failed: no difference
        Measurement(other, 1, dict.fromkeys(LEVELS, 200.0)),
    ]
    h = History(space, [Launch(base), Launch(other)], measured)
    planner = Planner(space, Settings(LEVELS))
    r = planner.read(h)
    assert r.floors == (None, None) and r.objective_noise == NOISE_DEFAULT
    finish = planner.finish(h)
    assert finish.best == other and finish.why.endswith("(noise floor unknown)")
    assert "unknown" in floors_text(*r.floors)


def test_slo_met_is_read_from_the_result_file_through_the_typed_loader(tmp_path: Path) -> None:
    points: list[dict[str, Any]] = [
        {"max_concurrency": 1, "output_throughput": 90.0, "p99_ttft_ms": 100, "p99_tpot_ms": 10},
        {"max_concurrency": 10, "output_throughput": 400.0, "p99_ttft_ms": 900, "p99_tpot_ms": 5},
        {"max_concurrency": 100, "output_throughput": 700.0, "p99_ttft_ms": 5000, "p99_tpot_ms": 9},
        {"max_concurrency": 250, "level_failed": True, "p99_ttft_ms": 1, "p99_tpot_ms": 1},
    ]
    result = build_result(
        result_id="b001-x",
        server=ServerRef(url="http://x"),
        workload=Workload(),
        client=ClientInfo(),
        levels=[1, 10, 100, 250],
        points=points,
    )
    path = save(result, tmp_path / "results")
    stored = json.loads(path.read_text())
    del stored["points"][1]["p99_tpot_ms"]  # a file that lacks a latency (another writer's)
    path.write_text(json.dumps(stored))
    slo = ObjectiveConfig(kind="slo", ttft_p99_ms=1000, tpot_p99_ms=20)
    expected = {1: True, 10: False, 100: False, 250: False}  # a missing latency is not met
    assert slo_ok_of({"id": "b001-x"}, tmp_path, slo) == expected, "by id in the run folder"
    assert slo_ok_of({"path": str(path)}, None, slo) == expected, "at the path the tool wrote"
    assert slo_ok_of({"path": str(tmp_path / "gone.json")}, None, slo) is None
