"""The autopilot's small parts: request sizing, directives, labels, the noise floor."""

from __future__ import annotations

import pytest

from agent.brains.autopilot.directives import read
from agent.brains.autopilot.engine_limits import engine_check, sim_base_argv
from agent.brains.autopilot.history import History, Launch, Objective
from agent.brains.autopilot.narrate import short, tag
from agent.brains.autopilot.reading import NOISE_DEFAULT, Reading
from agent.brains.autopilot.steps import Settings, groups
from sim.space import DEFAULT_BASE_FLAGS, default_space
from tools.domain.space import SearchSpace
from tools.servers.profiles import ENGINES
from tools.servers.speculation import speculative_flags

LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)
SPACE = SearchSpace.parse(default_space(), check=engine_check("sim"))


def test_levels_are_grouped_so_each_runs_a_few_waves() -> None:
    assert groups(LEVELS, 2, 30, None) == [
        ((1, 2), 30),
        ((5, 10), 30),
        ((30, 70, 100), 200),
        ((250,), 500),
    ]
    assert groups((1, 10, 250), 1, 10, None) == [((1,), 10), ((10,), 10), ((250,), 250)]
    assert groups(LEVELS, 2, 30, 64) == [(LEVELS, 64)], "a configured count is used as given"


@pytest.mark.parametrize(
    ("text", "skip", "focus", "wrap"),
    [
        ("skip speculation please", True, None, False),
        ("No EAGLE on this box.", True, None, False),
        ("focus on C=8", False, 10, False),
        ("Focus on concurrency 100 and wrap up", False, 100, True),
        ("ok, finish now", False, None, True),
        ("nice work", False, None, False),
    ],
)
def test_directives(text: str, skip: bool, focus: int | None, wrap: bool) -> None:
    speculative = speculative_flags(ENGINES["sim"], SPACE.flags, SPACE.requires)
    directives, replies = read([{"seq": 7, "text": text}], speculative, LEVELS)
    assert bool(directives.skip) == skip and directives.focus == focus
    assert directives.wrap_up == wrap
    assert set(replies) == {7} and replies[7]
    if skip:
        assert "--speculative-algorithm" in directives.skip
    if focus == 10:
        assert "nearest sweep level to C=8" in replies[7]
    if not (skip or focus or wrap):
        assert replies[7].startswith("noted; the autopilot acts on")


def test_skip_speculation_takes_the_engines_speculative_flags() -> None:
    """llama.cpp's speculation is --model-draft and --draft-max, not flags named 'specul...':
    the engine profile says which flags 'skip speculation' holds at the baseline."""
    space = SearchSpace.parse(
        {
            "--parallel": [1, 4],
            "--model-draft": [False, "draft.gguf"],
            "--draft-max": [4, 8],
            "requires": {"--draft-max": {"--model-draft": "draft.gguf"}},
        }
    )
    speculative = speculative_flags(ENGINES["llama.cpp"], space.flags, space.requires)
    assert speculative == ("--model-draft", "--draft-max")
    directives, _ = read([{"seq": 1, "text": "skip speculation"}], speculative, LEVELS)
    assert directives.skip == ("--model-draft", "--draft-max")


def test_words_for_a_configuration() -> None:
    base = SPACE.baseline
    spec = SPACE.repair({**base, "--speculative-algorithm": "EAGLE3"})
    assert short(SPACE, base) == "the baseline" and tag(SPACE, base) == "baseline"
    off = {**base, "--enable-flashinfer-allreduce-fusion": False}
    assert short(SPACE, off) == "no --enable-flashinfer-allreduce-fusion"
    assert tag(SPACE, off) == "nofusion"
    assert tag(SPACE, spec) == "EAGLE3-1-1-2"
    assert short(SPACE, spec).startswith("--speculative-algorithm EAGLE3")


def test_a_json_value_is_labelled_by_its_values() -> None:
    """vLLM's --speculative-config is a JSON object: its label (and so its result file's name)
    carries the values, not braces and quotes (seen on the real vLLM lab)."""
    ngram = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'
    space = SearchSpace.parse({"--speculative-config": [False, ngram], "--max-num-seqs": [8, 64]})
    config = {"--speculative-config": ngram, "--max-num-seqs": 64}
    assert tag(space, config) == "ngram-4-4-64"
    not_json = {"--speculative-config": "{not json", "--max-num-seqs": 64}
    assert tag(space, not_json) == "{not json-64"  # kept as written


def test_the_noise_floor_comes_from_repeated_sweeps() -> None:
    h = History(SPACE, [Launch(SPACE.baseline)], running=0)
    h.measured(SPACE.baseline, 0, dict.fromkeys(LEVELS, 100.0))
    unknown = Reading(SPACE, Settings(LEVELS), h)
    assert unknown.floors == (None, None), "nothing repeated: the floor is unknown"
    assert unknown.level_noise == unknown.objective_noise == NOISE_DEFAULT  # planned with
    again = {**dict.fromkeys(LEVELS, 102.0), 10: 110.0}  # C=10 differs more than the others
    h.measured(SPACE.baseline, 0, again)
    per_level, objective = Reading(SPACE, Settings(LEVELS), h).floors
    d = [2 / 101] * (len(LEVELS) - 1) + [10 / 105]
    pooled = 2 * (sum(x * x for x in d) / len(d)) ** 0.5
    assert per_level == pytest.approx(pooled), "one level's floor pools every level"
    assert objective == pytest.approx(pooled / len(LEVELS) ** 0.5), "the geomean averages it"
    level = Reading(SPACE, Settings(LEVELS, Objective("level", 10)), h)
    assert level.floors == (pytest.approx(pooled), pytest.approx(pooled)), "pooled: one d is few"


def test_the_simulators_own_flags_are_found_in_the_command() -> None:
    assert sim_base_argv("python -m sim --time-scale 20 --tp 8") == [
        "--time-scale",
        "20",
        "--tp",
        "8",
    ]
    assert sim_base_argv("agent sim serve --tp 4") == ["--tp", "4"]
    assert sim_base_argv("vllm serve m") == list(DEFAULT_BASE_FLAGS)
    check = engine_check("sim")
    assert check is not None and engine_check("vllm") is None
    bad = SPACE.repair(
        {**SPACE.baseline, "--speculative-algorithm": "EAGLE3"},
        {"--speculative-num-steps": 3, "--speculative-num-draft-tokens": 2},
    )
    assert "must equal" in (check(bad) or "")
