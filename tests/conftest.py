"""Shared fixtures: a run folder and a scripted brain that plays turns against the real loop."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.brains.base import Turn, TurnRequest
from agent.loop import Agent
from agent.session import Limits, make_agent, start
from state.run import Run
from tools.domain.config import Config, ServerConfig


class ScriptedBrain:
    """Plays a fixed list of turns (mini-swe-agent's DeterministicModel)."""

    name = "scripted"

    def __init__(self, turns: list[Turn]) -> None:
        self.turns = list(turns)
        self.requests: list[TurnRequest] = []

    async def next_turn(self, request: TurnRequest) -> Turn:
        # the request's messages are the live fold: keep a snapshot of what was sent
        self.requests.append(dataclasses.replace(request, messages=copy.deepcopy(request.messages)))
        if not self.turns:
            return Turn(content=[{"type": "text", "text": "done"}], stop_reason="end_turn")
        return self.turns.pop(0)


def tool_turn(*calls: tuple[str, dict[str, Any]], text: str = "", step: int = 0) -> Turn:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for i, (name, inp) in enumerate(calls):
        content.append(
            {"type": "tool_use", "id": f"toolu_{step}_{i}_{name}", "name": name, "input": inp}
        )
    return Turn(
        content=content, stop_reason="tool_use", usage={"input_tokens": 100, "output_tokens": 20}
    )


def plain_config(**overrides: Any) -> Config:
    server = ServerConfig(engine="sim", command="true", port=1)
    return Config(server=server, search={}, **overrides)


@pytest.fixture(autouse=True)
def inbox_keys(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs' inbox keys (state/inbox.py) in this test session's folder, not the user's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.getbasetemp() / "xdg-state"))


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"


@pytest.fixture
def make_run(runs_dir: Path) -> Iterator[Any]:
    created: list[Run] = []

    def factory(
        config: Config | None = None, goal: str = "beat baseline", limits: Limits | None = None
    ) -> tuple[Run, Config]:
        config = config or plain_config()
        run = start(goal, config, "autopilot", runs_dir, None, limits or Limits())
        created.append(run)
        return run, config

    yield factory
    for run in created:
        run.close()


def agent_for(run: Run, config: Config, brain: ScriptedBrain) -> Agent:
    return make_agent(run, brain, config)  # type: ignore[arg-type]


def alive(pid: int) -> bool:
    """Running, that is: a zombie waiting for a parent (or init) to reap it has ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def group_members(pgid: int) -> set[int]:
    """The running processes of a group (zombies are not running)."""
    members = set()
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.add(int(entry.name))
    return members


def group_alive(pgid: int) -> bool:
    """Any process of the group running (its leader may have ended before the rest)."""
    return bool(group_members(pgid))
