"""Secrets from the environment or the config never reach a file of the run folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.session import Limits, start
from state.secrets import Scrubber, secret_values
from tests.conftest import ScriptedBrain, agent_for, tool_turn
from tools.domain.config import Config, ServerConfig

KEY = "sk-ant-api03-THIS-IS-A-FAKE-KEY-1234567890"
TOKEN = "hf_FAKEtokenFAKEtokenFAKE"
PASSWORD = "correct-horse-battery-staple"


def test_secret_values_come_from_secret_names_only() -> None:
    env = {
        "ANTHROPIC_API_KEY": KEY,
        "HF_TOKEN": TOKEN,
        "PATH": "/usr/bin:/bin:/sbin",
        "MY_SECRET": "short",
    }
    assert secret_values(env) == [KEY, TOKEN]
    scrub = Scrubber(secret_values(env))
    assert scrub(f"key={KEY} token={TOKEN}") == "key=[redacted] token=[redacted]"


async def test_a_run_with_secrets_set_writes_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    config = Config(server=ServerConfig(command="true"), search={"--db-password": [PASSWORD]})
    run = start("beat baseline", config, "autopilot", tmp_path, "r", Limits())
    leaky = f"env: ANTHROPIC_API_KEY={KEY} HF_TOKEN={TOKEN} pw={PASSWORD}"
    todo = {"id": "a", "content": f"remember {TOKEN}", "status": "pending", "priority": "low"}
    brain = ScriptedBrain([tool_turn(("todowrite", {"todos": [todo]}), text=leaky)])
    assert await agent_for(run, config, brain).run_loop() == 0
    run.write_text("outputs/x.txt", leaky)
    (run.path / "logs" / "server.log").write_text(leaky)  # a server writes its own log
    assert run.scrub.folder(run.path) == 1
    run.close()
    found: list[Any] = []
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [(path.name, s) for s in (KEY, TOKEN, PASSWORD) if s.encode() in data]
    assert found == []
    assert "[redacted]" in (run.path / "todos.json").read_text()


def test_redaction_spares_flags_that_only_mention_tokens() -> None:
    from tools.domain.config import lab_config, redact

    search = lab_config().model_dump(mode="json")["search"]
    assert redact(search) == search  # --speculative-num-draft-tokens is not a secret
    assert redact({"api_key": "abcdefgh12", "max_tokens": "512"}) == {
        "api_key": "[redacted]",
        "max_tokens": "512",
    }
