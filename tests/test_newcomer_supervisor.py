"""What a supervisor reads: the todo list says why a stage was skipped, and `agent say`/`stop`
answer in a sentence (JSON with --json); `stop` on a run that has ended queues nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.history import History
from agent.brains.autopilot.narrate import conclusion
from agent.brains.autopilot.planner import Planner, Settings
from agent.brains.autopilot.todo_plan import todos
from agent.cli.main import main
from sim.space import DEFAULT_LEVELS, default_space
from state.run import Run
from tools.domain.space import Flags, SearchSpace

SPACE = SearchSpace.parse(default_space(), check=engine_check("sim"))
SPECULATIVE = tuple(f for f in SPACE.flags if "speculative" in f)


def family_item(**settings: object) -> str:
    planner = Planner(SPACE, Settings(levels=tuple(DEFAULT_LEVELS), **settings))  # type: ignore[arg-type]
    items = todos(planner, History(SPACE), "validate")
    return next(t["content"] for t in items if t["id"] == "family")


def test_a_family_skipped_on_the_supervisors_word_says_so() -> None:
    assert family_item().endswith("no family came close")
    assert family_item(excluded=SPECULATIVE).endswith("skipped: the supervisor said so (agent say)")
    assert family_item(wrap_up=True).endswith("skipped: wrapping up")


def cli(args: list[str], runs: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main([*args, "--runs-dir", str(runs)])
    return code, capsys.readouterr().out


def test_say_and_stop_answer_in_a_sentence_or_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Run.create(tmp_path, "r1").append("run_started", goal="g")
    code, out = cli(["say", "r1", "skip speculation"], tmp_path, capsys)
    assert (
        code == 0 and out == "message queued for run r1: the agent reads it before its next step\n"
    )
    code, out = cli(["stop", "r1"], tmp_path, capsys)
    assert code == 0 and out.startswith("stop request queued for run r1: the run stops shortly")
    code, out = cli(["stop", "r1", "--json"], tmp_path, capsys)
    assert json.loads(out) == {"queued": "stop", "run": "r1"}
    assert len(list((tmp_path / "r1" / "inbox").glob("*.json"))) == 3


def test_stop_on_an_ended_run_queues_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Run.create(tmp_path, "r1")
    run.append("run_started", goal="g")
    run.append("run_finished", status="budget", exit_code=3, reason="steps")
    code, out = cli(["stop", "r1"], tmp_path, capsys)
    assert (code, out) == (0, "run r1 has already ended (budget); nothing to stop\n")
    code, out = cli(["stop", "r1", "--json"], tmp_path, capsys)
    assert json.loads(out) == {"queued": None, "run": "r1", "ended": "budget"}
    assert not list((tmp_path / "r1").glob("inbox/*.json"))
    code, out = cli(["say", "r1", "hello", "--json"], tmp_path, capsys)  # waits for a resume
    assert json.loads(out) == {"queued": "say", "run": "r1", "ended": "budget"}


def test_runs_are_listed_in_aligned_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, brain, steps in (("a", "autopilot", 7), ("a-much-longer-run-id", "replay", 123)):
        run = Run.create(tmp_path, name)
        run.append("run_started", goal=f"goal of {name}", brain=brain)
        for _ in range(steps):
            run.append("model_response", content=[], stop_reason="end_turn")
        run.close()
    code, out = cli(["runs"], tmp_path, capsys)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["RUN", "BRAIN", "STEPS", "STATUS", "GOAL"]
    # every column starts at the same place on every line
    for word in ("BRAIN", "STATUS", "GOAL"):
        at = lines[0].index(word)
        assert all(line[at - 2 : at] == "  " and line[at] != " " for line in lines[1:]), out
    assert lines[1].endswith("goal of a") and lines[2].endswith("goal of a-much-longer-run-id")


def test_keeping_a_baseline_of_no_flags_is_said_without_empty_parentheses() -> None:
    """A baseline of switches all off renders as no flags at all: the conclusion keeps it in
    words, never "deploy the baseline ()"."""
    space = SearchSpace.parse({"--enable-x": [False, True]})
    planner = Planner(space, Settings(levels=(1, 2, 4)))
    h = History(space)
    other: Flags = {"--enable-x": True}
    for config, value in ((space.baseline, 10.0), (other, 8.0)):
        h.launched(config)
        per = {c: value for c in (1, 2, 4)}
        h.measured(config, len(h.launches) - 1, per, "confirm")
    finish = planner.finish(h)
    assert finish.best == space.baseline
    text = conclusion(space, finish, h, planner)
    assert text.startswith("Conclusion: keep the baseline: 10.0 vs baseline 10.0 (+0.0%); ")
    assert "()" not in text
