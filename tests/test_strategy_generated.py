"""Spaces nobody shaped the planner on (issue 50): the generator of benchmarks/space_generator.py
plants what it says it plants, and the autopilot, offline on the simulator's truth, deploys the
planted combination of issue 50's two shapes - a deceptive pair (each part below the baseline
beyond the noise alone, +20 % together) and a sparse triple - among decoys that win a little
alone and block them: the contrary bundle (agent/brains/autopilot/contrary.py) launches the
changes that did not win alone together on the baseline."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.brains.autopilot.history import Objective
from agent.brains.autopilot.offline import Noise, sim_truth, simulate
from agent.brains.autopilot.planner import Planner, Settings
from benchmarks import space_generator as gen
from benchmarks.efficiency import Lab
from sim.space import load_lab
from tools.domain.space import SearchSpace

NOISE = Noise(level=0.02, screen=0.03, launch=0.005)  # the efficiency study's at 2 %


def test_a_draw_is_the_same_every_time_and_another_seed_is_another_draw() -> None:
    first = [gen.to_toml(s.profile) for s in gen.draw(20)]
    assert first == [gen.to_toml(s.profile) for s in gen.draw(20)]
    assert first != [gen.to_toml(s.profile) for s in gen.draw(20, seed=1)]


@pytest.mark.parametrize("index", range(20))
def test_generated_spaces_plant_what_they_say(index: int, tmp_path: Path) -> None:
    space = gen.generate(index)
    lab = Lab(128, 0.02, str(space.write(tmp_path)))
    assert 3 <= len(lab.space.flags) <= 8
    assert all(2 <= len(v) <= 5 for v in lab.space.flags.values())
    assert len(lab.configs) <= gen.MAX_GRID
    assert lab.f0 > 0 and lab.fstar > 1.05 * lab.f0  # the baseline starts; there is a gain
    base = lab.space.baseline
    assert space.interactions
    for planted in space.interactions:
        assert 2 <= len(planted.changes) <= 4
        for flag, value in planted.changes:  # each part loses beyond the noise, or is flat
            alone = lab.true_value(lab.space.complete({**base, flag: value})) / lab.f0
            assert alone < 0.97 or abs(alone - 1) < 0.006
        together = lab.true_value(lab.space.complete({**base, **dict(planted.changes)}))
        assert together > 1.09 * lab.f0
    for planted in space.planted:
        if planted.kind == "decoy":
            ((flag, value),) = planted.changes
            alone = lab.true_value(lab.space.complete({**base, flag: value})) / lab.f0
            assert 1.015 < alone < 1.045
        if planted.kind == "crash":
            crashed = [c for c in lab.configs if all(c[f] == v for f, v in planted.changes)]
            assert crashed and all(lab.true_value(c) == 0.0 for c in crashed)


def _deploys(space: gen.Space, folder: Path, seeds: range) -> list[bool]:
    lab = load_lab(str(space.write(folder)))
    searched = SearchSpace.parse(lab.space)
    truth = sim_truth(max_tokens=128, base=lab.base)
    want = dict(space.interactions[0].changes)
    out = []
    for seed in seeds:
        planner = Planner(searched, Settings(levels=tuple(lab.levels), objective=Objective()))
        _, finish = simulate(planner, truth, seed=seed, noise=NOISE)
        out.append(finish.best is not None and all(finish.best[f] == v for f, v in want.items()))
    return out


@pytest.mark.parametrize(
    "space",
    [gen.deceptive_pair(), gen.sparse_triple()],
    ids=["deceptive-pair", "sparse-triple"],
)
def test_deploys_a_combination_that_pays_only_together(space: gen.Space, tmp_path: Path) -> None:
    lab = Lab(128, 0.02, str(space.write(tmp_path)))
    base, parts = lab.space.baseline, space.interactions[0].changes
    for flag, value in parts:  # the shape: each part alone at or below the baseline
        assert lab.true_value(lab.space.complete({**base, flag: value})) <= 1.001 * lab.f0
    best = max(lab.configs, key=lambda c: lab.value[lab.space.key(c)])
    assert all(best[f] == v for f, v in parts)  # the optimum holds the combination
    hits = _deploys(space, tmp_path, range(10))
    assert sum(hits) >= 8, f"deployed the combination in {sum(hits)} of 10 seeds"


def test_efficiency_runs_a_draw_and_refuses_bad_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import efficiency

    for bad in ("generated:x", "generated:0", "generated:2:1:3"):
        assert efficiency.main(["--space", bad, "--seeds", "1"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("efficiency: --space generated:") and "\n" not in err

    def at_baseline(lab: Lab, seed: int, budget: int = 0) -> efficiency.Outcome:
        return efficiency.Outcome(3, lab.space.baseline)

    for method in ("autopilot", "random_search", "tpe"):
        monkeypatch.setattr(efficiency, method, at_baseline)
    assert efficiency.main(["--space", "generated:2:7", "--seeds", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("| gen7-00 |") == 3 and out.count("| gen7-01 |") == 3
    assert "mean over the 2 spaces of draw 7:" in out
    assert "| autopilot | 3.0 | 0.000 | 0.000 | 0.000 | 0/4 | 2/2 |" in out
