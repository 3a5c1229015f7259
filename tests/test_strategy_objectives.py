"""Objectives beyond the geometric mean, each driving a whole campaign: throughput at one level,
peak, goodput under p99 TTFT/TPOT SLOs, and the highest load that meets the SLO; ties go to fewer
GPUs and simpler configurations."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.history import History, Objective
from agent.brains.autopilot.offline import sim_slo, sim_truth, simulate
from agent.brains.autopilot.planner import Planner, Settings
from agent.brains.autopilot.reading import Reading
from sim.space import load_lab
from sim.truth import baseline_of
from tools.domain import lab_truth
from tools.domain.objective import describe_objective, objective_value
from tools.domain.space import SearchError, SearchSpace

TTFT, TPOT = 20000.0, 200.0  # ms, for the CPU box (128-token answers)


def test_objective_values() -> None:
    per = {1: 90.0, 10: 400.0, 70: 700.0, 250: 650.0}
    ok = {1: True, 10: True, 70: False, 250: False}
    assert objective_value(per, "level", level=10) == 400.0
    assert objective_value(per, "peak") == 700.0
    assert objective_value(per, "slo", slo_ok=ok) == 400.0  # goodput under the SLO
    assert objective_value(per, "max_load", slo_ok=ok) == 10.0  # the highest load meeting it
    # an SLO at one level: the throughput there while that level meets it, else nothing
    assert objective_value(per, "slo", level=10, slo_ok=ok) == 400.0
    assert objective_value(per, "slo", level=70, slo_ok=ok) == 0.0  # the best level, missed
    assert objective_value(per, "slo", level=1, slo_ok=ok) == 90.0
    assert (
        describe_objective("slo", 10, 3000) == "output throughput at C=10 with p99 TTFT <= 3000 ms"
    )
    assert objective_value(per, "max_load", slo_ok={c: False for c in per}) == 0.0
    assert objective_value({1: 0.0, 10: 5.0}, "max_load", slo_ok={1: True, 10: False}) == 0.0
    with pytest.raises(SearchError):
        objective_value(per, "level")
    assert describe_objective("max_load", None, 3000, 16) == (
        "the highest concurrency that meets p99 TTFT <= 3000 ms and p99 TPOT <= 16 ms"
    )


@pytest.mark.slow  # six whole campaigns and six optima of a space (~18 s)
@pytest.mark.parametrize(
    ("space", "kind", "level"),
    [
        ("reference", "level", 1),
        ("reference", "level", 100),
        ("reference", "peak", None),
        ("llamacpp-cpu", "slo", None),
        ("llamacpp-cpu", "slo", 2),  # an SLO at one level
        ("llamacpp-cpu", "max_load", None),
    ],
)
def test_a_campaign_reaches_the_optimum_of_each_objective(
    space: str, kind: str, level: int | None
) -> None:
    """On the CPU box the SLO (p99 TTFT <= 20 s, TPOT <= 200 ms) is met by the baseline up to
    C=2 (11.4 tok/s of goodput) and by the optimum up to C=4 (21.2 tok/s)."""
    lab = load_lab(space)
    levels = tuple(lab.levels)
    check = engine_check("sim", "python -m sim " + " ".join(lab.base))
    parsed = SearchSpace.parse(lab.space, check=check)
    slo = sim_slo(TTFT, TPOT, 128, base=lab.base) if kind in ("slo", "max_load") else None
    planner = Planner(parsed, Settings(levels=levels, objective=Objective(kind, level)))
    _, finish = simulate(planner, sim_truth(max_tokens=128, base=lab.base), seed=0, slo=slo)
    extra: dict[str, Any] = {"ttft_ms": TTFT, "tpot_ms": TPOT} if slo else {}
    extra |= {"level": level} if level else {}
    value = functools.partial(
        lab_truth.config_value, levels=levels, objective=kind, max_tokens=128, base=lab.base
    )
    _, best = lab_truth.optimum(lab.space, levels, kind, max_tokens=128, base=lab.base, **extra)
    assert best > value(baseline_of(lab.space), **extra), "the objective has something to find"
    assert finish.best is not None
    assert value(finish.best, **extra) >= 0.97 * best, kind


def test_ties_go_to_fewer_gpus_then_fewer_changes() -> None:
    space = SearchSpace.parse(
        {
            "--tp": [4, 8],
            "--attention-backend": ["flashinfer", "fa3"],
            "--cuda-graph-max-bs": [128, 256],
            "baseline": {
                "--tp": 8,
                "--attention-backend": "flashinfer",
                "--cuda-graph-max-bs": 128,
            },
        }
    )
    levels = (1, 10)
    base = space.baseline
    tp4 = {**base, "--tp": 4}
    two = {**base, "--attention-backend": "fa3", "--cuda-graph-max-bs": 256}
    one = {**base, "--attention-backend": "fa3"}
    h = History(space)
    rows = [(base, 100.0), (base, 100.0), (two, 130.0), (one, 130.0), (tp4, 130.0)]
    for i, (config, value) in enumerate(rows):
        h.launched(config)
        h.measured(config, i, {c: value for c in levels}, "confirm")
    r = Reading(space, Settings(levels=levels), h)
    assert r.incumbent == tp4, "same value: fewer GPUs"
    h = History(space, h.launches, [m for m in h.measurements if m.config != tp4])
    r = Reading(space, Settings(levels=levels), h)
    assert r.incumbent == one, "same value, same GPUs: fewer changes"


def test_an_slo_at_one_level_is_measured_at_that_level_alone() -> None:
    """kind 'slo' with a level reads one level, as kind 'level' does: the planner screens there,
    and its precision stages measure there (Settings.one_level)."""
    levels = (1, 2, 4, 8)
    for objective in (Objective("slo", 2), Objective("level", 2)):
        settings = Settings(levels=levels, objective=objective)
        assert settings.one_level() == 2 and settings.screens() == (2,)
        assert objective.depends_on(levels) == (2,)
    assert Settings(levels=levels, objective=Objective("slo")).one_level() is None
    assert Objective("slo", 2).value({1: 50.0, 2: 80.0}, {1: True, 2: False}) == 0.0
    assert Objective("slo", 2).value({1: 50.0, 2: 80.0}, {1: True, 2: True}) == 80.0
