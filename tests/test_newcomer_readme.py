"""The README's commands, as a newcomer types them: each names a real subcommand and options that
the real argparse parsers accept, and `agent` is on the PATH before it is called bare."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from agent.cli import lab, report, watch
from agent.cli.main import build_parser

README = Path(__file__).resolve().parents[1] / "README.md"
ACTIVATE = ". .venv/bin/activate"
# the subcommands that parse their own arguments, by their real parsers
DELEGATE_PARSERS = {"watch": watch.parser, "report": report.parser, "lab": lab.parser}


def commands(text: str) -> list[str]:
    """Every shell command of the README in order: indented code-block lines and `inline` spans
    that start a command (a span may wrap onto the next line in prose)."""
    found: list[tuple[int, str]] = []
    for match in re.finditer(r"^    (\S.*)$", text, re.M):
        found.append((match.start(), match.group(1)))
    for match in re.finditer(r"`([^`]+)`", text):
        span = " ".join(match.group(1).split())
        if re.match(r"(\.venv/bin/)?agent |python3 |\. ", span):
            found.append((match.start(), span))
    return [cmd for _, cmd in sorted(found)]


def agent_calls(line: str) -> list[tuple[str, list[str]]]:
    """(how agent was called, its argv) for each `agent` in a `&&` chain, comments dropped."""
    words = shlex.split(line, comments=True)
    calls, chain = [], [[]]  # type: ignore[var-annotated]
    for word in words:
        if word == "&&":
            chain.append([])
        else:
            chain[-1].append(word)
    for part in chain:
        if part and part[0] in ("agent", ".venv/bin/agent"):
            calls.append((part[0], part[1:]))
    return calls


def check_parses(argv: list[str]) -> None:
    if argv and argv[0] in DELEGATE_PARSERS:
        DELEGATE_PARSERS[argv[0]]().parse_args(argv[1:])
    else:
        assert not argv or argv[0] not in ("bench", "sim"), f"teach this test {argv[0]}'s parser"
        args = build_parser().parse_args(argv)
        assert not hasattr(args, "rest"), argv


def test_readme_commands_use_real_subcommands_and_options() -> None:
    calls = [call for line in commands(README.read_text()) for call in agent_calls(line)]
    assert len(calls) >= 12  # the quick start and the supervising commands at least
    for _, argv in calls:
        try:
            check_parses(argv)
        except SystemExit as exit_:  # argparse: an unknown subcommand or option, a bad value
            pytest.fail(f"README command `agent {shlex.join(argv)}` does not parse ({exit_})")


def test_a_bare_agent_comes_after_the_venv_is_activated() -> None:
    lines = commands(README.read_text())
    quick = [line for line in lines if line.startswith("python3 -m venv")]
    assert len(quick) == 2, "the quick start stays two commands"
    activated = False
    for line in lines:
        activated = activated or line.startswith(ACTIVATE)
        for how, _ in agent_calls(line):
            assert how != "agent" or activated, f"`{line}` runs before `{ACTIVATE}`"


def test_the_check_catches_drift() -> None:
    """The parsers reject what a drifted README would say."""
    for argv in (["wach", "demo"], ["run", "--goal", "g", "--max-stepz", "4"], ["watch", "--x"]):
        with pytest.raises(SystemExit):
            check_parses(argv)
    text = "    agent watch demo   # live view\n\n`agent lab setup llama.cpp\n--dir lab`\n"
    assert [argv for line in commands(text) for _, argv in agent_calls(line)] == [
        ["watch", "demo"],
        ["lab", "setup", "llama.cpp", "--dir", "lab"],
    ]
    assert isinstance(build_parser(), argparse.ArgumentParser)
