"""What the system prompt and the tool descriptions teach (issue 26.5), read as an expert would:
each fix is asserted here on the text the model is sent, and shown in a recorded session where a
behaviour follows from it (tests/test_plan_tool.py: the budget in the briefing, the key figures in
the todo list, the baseline measured again at re-validation)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agent.brains.autopilot import AutopilotBrain
from agent.session import Limits, make_agent, start, system_prompt
from state.events import read_events
from tools.base import description
from tools.bench import results
from tools.domain.config import Config, ServerConfig
from tools.run_benchmark import RunBenchmarkInput

SESSIONS = Path(__file__).parent / "sessions"


def words(text: str) -> str:
    return " ".join(text.split())  # the prompt's line breaks are not part of what it says


def test_the_pipeline_section_goes_only_to_campaigns_with_a_pipeline(tmp_path: Path) -> None:
    assert "Long jobs" not in system_prompt() and "start_job" not in system_prompt()
    assert "Long jobs" in system_prompt(pipeline=True)
    assert system_prompt(fleet=True, pipeline=True).startswith(system_prompt(pipeline=True))
    config = Config(server=ServerConfig(engine="sim", command="true", port=30000))
    run = start("beat baseline", config, "autopilot", tmp_path, "x", Limits())
    assert "Long jobs" not in make_agent(run, AutopilotBrain(config), config).system
    run.close()

    # the recorded sessions: the pipeline's has the section, a plain campaign's has not
    def system_of(name: str) -> str:
        first = next(e for e in read_events(SESSIONS / name).events if e["type"] == "api_exchange")
        return json.dumps(first["request"]["system"])

    assert "Long jobs" in system_of("pipeline.jsonl")
    assert "Long jobs" not in system_of("todos.jsonl")


def test_the_noise_floor_is_a_lower_bound_and_launch_variance_is_named() -> None:
    text = words(system_prompt())
    assert "does not see launch-to-launch variance" in text
    assert "a gain barely above it is not a win until it holds on a fresh launch" in text


def test_screens_have_enough_requests_for_their_levels() -> None:
    """Every example call in run_benchmark's description holds its top level in flight: more
    requests than its highest concurrency (the old one reached C=20 when asked for C=100)."""
    text = description("run_benchmark")
    examples = re.findall(r'`(\{"concurrency": \[[^`]*\})`', text)
    assert len(examples) >= 2
    for raw in examples:
        call = json.loads(raw)
        assert call["requests_per_level"] >= 2 * max(call["concurrency"]), raw
    prompt = words(system_prompt())
    assert "one wave per level" not in prompt and "at C=1 one wave is one request" in text
    assert "C=1 needs 10 or more requests" in prompt


def test_the_budget_and_what_must_fit_after_the_warning() -> None:
    text = words(system_prompt())
    assert "The briefing states your budget" in text
    assert "must fit in the 20 % left" in text


def test_interactions_are_allowed_and_the_stopping_rule_is_stated() -> None:
    text = words(system_prompt())
    assert "A change that lost clearly at every level from another base is not worth" not in text
    assert "Changes interact: a change that lost alone may win together with another" in text
    assert "Stop exploring when one of these holds, and not before" in text
    assert "Having found one win is no reason to stop" in text


def test_changes_that_lost_alone_are_combined_when_and_how_the_planner_does() -> None:
    """Issue 50: every other stage builds on what won alone; the prompt says when to launch the
    changes that lost alone together (the planner's contrary bundle), where, and how to read it."""
    text = words(system_prompt())
    assert "A change that lost beyond the noise is not ruled out of combinations" in text
    assert "once a third of the budget is spent, launch the changes that lost alone" in text
    assert "together on the baseline" in text and "the product of their ratios alone" in text
    assert "launch it without each part in turn" in text and "`plan` proposes these" in text


def test_revalidation_measures_the_baseline_again_and_todos_keep_the_figures() -> None:
    text = words(system_prompt())
    assert "and the baseline too - kill, start again, sweep every level" in text
    assert "Keep one item holding the key figures" in text
    assert "key figures" in words(description("todowrite"))


def test_the_final_comparison_is_a_duet_or_launch_pairs_that_recommend_reads() -> None:
    """Issue 46: side by side, a duet; else launch pairs; the statistics decide what is proven."""
    text = words(system_prompt())
    assert "Then prove the winner against the baseline" in text
    assert "call duet (a: the baseline, b: the winner)" in text
    assert "Where they do not fit, launch pairs" in text
    assert "the statistics, not you, decide what is proven" in text
    assert "labelled `pair-...`" in text and "no win is established" in text
    label = RunBenchmarkInput.model_json_schema()["properties"]["label"]["description"]
    assert f"'{results.PAIR}...'" in label  # the prefix recommend's results.pairs reads


def test_objectives_at_one_level_and_slos_get_their_own_guidance() -> None:
    text = words(system_prompt())
    assert "One level (C=N): the only number that counts is at C=N" in text
    assert "a p99 is the mean's noise many times over" in text


def test_on_a_fleet_every_comparison_is_across_boxes() -> None:
    text = words(system_prompt(fleet=True))
    assert "On a fleet every comparison is across boxes" in text
    assert "the baseline's A/A pair as two trials in one turn, on two boxes" in text


def test_the_planner_tool_is_introduced() -> None:
    assert "`plan` gives the autopilot's next experiment" in words(system_prompt())


def test_physics_stops_flag_tuning_as_the_autopilot_does() -> None:
    """Issue 48: the reading of the floor the autopilot's stop signal uses (physics_stop.py) -
    flags reach about 80 % of a memory-bound floor, so at a share near it only speculation is
    left; far below, flags can still pay; another bound has no ceiling."""
    text = words(system_prompt())
    assert "physics says flags are spent" in text
    assert "0.80 / share - 1" in text and "under the noise floor at every level" in text
    assert "try speculation only" in text and "can pass 100 %" in text
    assert "bound by compute or the interconnect has no such ceiling" in text
