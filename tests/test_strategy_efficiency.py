"""benchmarks/efficiency.py: the built-in spaces, one JSON object per space, bad input."""

from __future__ import annotations

import json

import pytest

from benchmarks import efficiency


def test_list_names_the_built_in_spaces(capsys: pytest.CaptureFixture[str]) -> None:
    assert efficiency.main(["--list"]) == 0
    names = capsys.readouterr().out.split()
    assert {
        "reference",
        "interactions",
        "speculative",
        "llamacpp-cpu",
        "triple",
        "single-level",
    } <= set(names)


def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert efficiency.main(["--space", "no-such-space", "--seeds", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("efficiency: ") and "\n" not in err
    assert efficiency.main(["--seeds", "0"]) == 2


@pytest.mark.slow  # one seed of every method on the CPU box (~4 s)
def test_json_reports_every_method(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--space", "llamacpp-cpu", "--seeds", "1", "--noise", "0.02", "--json"]
    assert efficiency.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["space"] == "llamacpp-cpu"
    assert set(out["methods"]) == {"autopilot", "autopilot_without_floor", "tpe", "random", "grid"}
    common = {"launches_mean", "gain_mean", "gain_worst", "within_2pct", "seeds"}
    for name, stats in out["methods"].items():
        # the autopilot's also: its end stage, and how many campaigns proved their winner
        ours = name.startswith("autopilot")  # with and without the floor (the stop signal)
        ours_only = {"at_end_mean", "established"} if ours else set()
        assert set(stats) == common | ours_only
        assert stats["seeds"] == 1
    ours = out["methods"]["autopilot"]
    assert 1 <= ours["at_end_mean"] < ours["launches_mean"]  # a re-validation, at least
    assert ours["established"] in (0, 1)
    assert out["methods"]["tpe"]["launches_mean"] == out["methods"]["autopilot"]["launches_mean"]
    assert out["methods"]["grid"]["launches_mean"] == 72


def test_all_runs_every_built_in_space_and_refuses_a_profile(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[tuple[str, str]] = []
    monkeypatch.setattr(
        efficiency, "study", lambda lab, args: ran.append((lab.name, lab.objective.kind))
    )
    assert efficiency.main(["--space", "all", "--seeds", "1"]) == 0
    assert {name for name, _ in ran} == set(efficiency.lab_names())
    assert ("single-level", "level") in ran and ("triple", "geomean") in ran
    assert efficiency.main(["--space", "all", "--profile", "reference"]) == 2
    assert capsys.readouterr().err.startswith("efficiency: --space all")
