"""The model is told its budget (issue 26.5): the briefing of a Claude run states its steps,
minutes and dollars, when the wrap-up warning comes, and what must fit after it; the autopilot's
briefing is unchanged (it plans from the config, and its recorded session replays as it was)."""

from __future__ import annotations

from pathlib import Path

from agent.briefing import briefing
from agent.recover import restore_briefing
from agent.session import Limits, make_context, start
from state.run import Run
from tools.domain.config import Config, ServerConfig


def config() -> Config:
    return Config(server=ServerConfig(engine="sim", command="true", port=30000))


def first_message(run: Run) -> str:
    return str(run.state.messages[0]["content"][0]["text"])


def test_a_claude_run_is_told_its_budget_and_when_the_warning_comes(tmp_path: Path) -> None:
    limits = Limits(max_steps=120, max_usd=7.5, max_minutes=90)
    run = start("beat baseline", config(), "claude-sonnet-4-6", tmp_path, "c", limits)
    text = first_message(run)
    assert "Budget: 120 model turns, 90 minutes, $7.50 of model spend" in text
    assert "at 80 % of any of them" in text  # the supervision's WARN_AT, one figure
    assert "18 minutes, 24 turns" in text  # what is left after the warning, computed
    run.close()


def test_the_autopilots_briefing_has_no_budget(tmp_path: Path) -> None:
    run = start("beat baseline", config(), "autopilot", tmp_path, "a", Limits(max_steps=50))
    assert "Budget:" not in first_message(run)
    assert first_message(run) == briefing("beat baseline", config())
    run.close()


def test_a_briefing_a_crash_cut_off_is_written_again_with_the_budget(tmp_path: Path) -> None:
    limits = Limits(max_steps=60, max_usd=3.0, max_minutes=30)
    run = start("beat baseline", config(), "claude-sonnet-4-6", tmp_path, "r", limits)
    kept = first_message(run)
    run.close()
    lines = (tmp_path / "r" / "events.jsonl").read_text().splitlines()
    (tmp_path / "r" / "events.jsonl").write_text("\n".join(lines[:1]) + "\n")  # no briefing
    run = Run.open(tmp_path / "r")
    assert restore_briefing(make_context(run, config()))
    assert first_message(run) == kept
    run.close()
