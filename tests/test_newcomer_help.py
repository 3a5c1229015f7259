"""The help a newcomer reads: `agent --help` with examples, the exit codes and where the docs
are; `agent run --help` with the budget and model defaults; every flag of `agent sim serve`."""

from __future__ import annotations

import pytest

from agent.cli.main import main
from sim.cli import main as sim_main
from sim.cli import serve_parser
from tools.domain.config import BudgetConfig, ModelConfig


def help_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_agent_help_has_examples_exit_codes_and_docs(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(["--help"], capsys)
    assert 'agent run --goal "beat baseline"' in text and "agent watch demo" in text
    for code in ("0 finished", "2 bad usage or config", "3 budget exhausted", "130 stopped"):
        assert code in text
    assert "docs/cli.md" in text


def test_run_help_states_the_defaults(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # argparse wraps at the terminal's width
    text = " ".join(help_of(["run", "--help"], capsys).split())
    budget = BudgetConfig()
    assert f"max_steps, {budget.max_steps})" in text
    assert f"max_usd, {budget.max_usd:g})" in text
    assert f"max_minutes, {budget.max_minutes:g})" in text
    assert f"({ModelConfig().name}) with ANTHROPIC_API_KEY set, else autopilot" in text


def test_sim_serve_help_explains_every_flag(capsys: pytest.CaptureFixture[str]) -> None:
    parser = serve_parser([])
    flags = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    assert len(flags) > 20
    assert all(a.help for a in flags), [a.option_strings[0] for a in flags if not a.help]
    assert sim_main(["serve", "--help"]) == 0
    text = capsys.readouterr().out
    assert "usage: agent sim serve" in text
    assert "the largest batch replayed as a CUDA graph" in " ".join(text.split())
