"""The search space: parsing, rules, enumeration (the same as the simulator's), objectives."""

from __future__ import annotations

import pytest

from sim import truth
from sim.space import default_space
from tools.domain.objective import objective_value
from tools.domain.space import SearchError, SearchSpace, render_flags

SPEC = "--speculative-algorithm"
STEPS = "--speculative-num-steps"


def lab_space() -> SearchSpace:
    from agent.brains.autopilot.engine_limits import engine_check

    return SearchSpace.parse(default_space(), check=engine_check("sim"))


def test_enumeration_matches_the_simulators_truth() -> None:
    space = lab_space()
    mine = {space.key(c) for c in space.enumerate()}
    theirs = {space.key(c) for c in truth.enumerate_space(default_space())}
    assert mine == theirs
    assert len(mine) >= 48


def test_without_the_engine_check_refused_lines_stay_in_the_space() -> None:
    space = SearchSpace.parse(default_space())
    assert len(space.enumerate()) > len(lab_space().enumerate())


def test_baseline_is_complete_and_valid() -> None:
    space = lab_space()
    assert set(space.baseline) == set(space.flags)
    assert space.is_valid(space.baseline)
    assert space.baseline[SPEC] is False and space.baseline[STEPS] is False


def test_rules_gate_flags() -> None:
    space = lab_space()
    on = {**space.baseline, SPEC: "EAGLE3"}
    assert any("must be given" in p for p in space.problems(on))
    off_with_param = {**space.baseline, STEPS: 3}
    assert space.problems(off_with_param) == [
        '--speculative-num-steps only applies with --speculative-algorithm = "EAGLE3"'
    ]
    repaired = space.repair(on, prefer={STEPS: 3})
    assert repaired[STEPS] == 3 and space.is_valid(repaired)
    assert space.repair({**repaired, SPEC: False})[STEPS] is False


def test_neighbours_change_one_factor_and_stay_admissible() -> None:
    space = lab_space()
    found = space.neighbours(space.baseline)
    assert found
    for flag, value, config in found:
        assert space.admissible(config)
        roots = space.diff(space.baseline, config)
        assert flag in roots and roots[flag] == value
        assert all(f == flag or f in space.requires for f in roots)


def test_true_and_one_are_different_values() -> None:
    space = SearchSpace.parse({"--x": [1, True]})
    assert space.flags["--x"] == (1, True)
    assert space.key({"--x": 1}) != space.key({"--x": True})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"attention": ["a"]}, "search.attention: a flag must be written as on the command line"),
        ({"--x": []}, "search.--x: expected a non-empty list"),
        ({"--x": [{"a": 1}]}, "search.--x: candidate"),
        ({"--x": [1], "requires": {"--y": {"--x": 1}}}, "search.requires.--y: not a flag"),
        ({"--x": [1], "requires": {"--x": {"--z": 1}}}, "--z is not a flag of the space"),
        ({"--x": [1], "baseline": {"--y": 1}}, "search.baseline.--y: not a flag"),
        (
            {
                "--x": [False, 1],
                "--y": [2],
                "requires": {"--y": {"--x": 1}},
                "baseline": {"--y": 2},
            },
            "search.baseline breaks a rule",
        ),
        ("nope", "search must be a table"),
    ],
)
def test_bad_spaces_get_one_clear_line(raw: object, message: str) -> None:
    with pytest.raises(SearchError) as err:
        SearchSpace.parse(raw)  # type: ignore[arg-type]
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_baseline_value_outside_the_candidates_joins_them() -> None:
    space = SearchSpace.parse({"--bs": [64, 128], "baseline": {"--bs": 32}})
    assert space.flags["--bs"] == (64, 128, 32)
    assert space.baseline == {"--bs": 32}


def test_objectives() -> None:
    per = {1: 100.0, 10: 400.0, 100: 800.0}
    assert objective_value(per) == pytest.approx((100 * 400 * 800) ** (1 / 3))
    assert objective_value(per, "level", level=10) == 400.0
    assert objective_value(per, "peak") == 800.0
    assert objective_value(per, "slo", slo_ok={1: True, 10: True, 100: False}) == 400.0
    assert objective_value({1: 0.0, 2: 5.0}) == 0.0
    with pytest.raises(SearchError):
        objective_value(per, "level")
    with pytest.raises(SearchError):
        objective_value(per, "median")


def test_render_flags() -> None:
    argv = render_flags({"--a": True, "--b": False, "--c": 128, "--d": "fa3"})
    assert argv == ["--a", "--c", "128", "--d", "fa3"]
