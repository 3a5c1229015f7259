"""`agent run` says where a default came from when it is not the lab's (issue 49, item 13): a
file with a server.command of its own describes a box and takes a real box's defaults where it
says nothing (512-token answers, an 1800 s ready timeout) - about 2.5x the lab's time per sweep,
so the run says so, naming each key and both values, before it starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agent.cli.runner
from agent.cli import main
from tools.domain.config import defaults_note, load_config

BOX = '[server]\nengine = "vllm"\ncommand = "vllm serve Qwen/Qwen3-0.6B"\n'


def config_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent.toml"
    path.write_text(text)
    return path


def test_agent_run_names_a_box_default_that_is_not_the_labs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[Any] = []

    def run_campaign(*args: Any) -> int:  # the campaign itself is not what is tested
        started.append(args)
        return 0

    monkeypatch.setattr(agent.cli.runner, "run_campaign", run_campaign)
    path = config_file(tmp_path, BOX)
    code = main(["run", "--goal", "beat baseline", "--model", "autopilot", "--config", str(path)])
    err = capsys.readouterr().err
    assert code == 0 and len(started) == 1  # said, and the run went on
    line = f"{path}: a box's defaults where it says nothing, not the lab's: "
    assert line in err, err
    assert "server.ready_timeout_s = 1800 (the lab's 120)" in err, err
    assert "bench.max_tokens = 512 (the lab's 128)" in err, err
    assert (
        "server.command" not in err and "server.port" not in err
    )  # what the box is, not a default


@pytest.mark.parametrize(
    "text",
    [
        "",  # no file at all: the lab
        "[cost]\nusd_per_gpu_hour = 2.5\n",  # the lab, priced: its own values
        BOX + "ready_timeout_s = 120\n[bench]\nmax_tokens = 128\n",  # the box says both
    ],
    ids=["lab", "lab-priced", "box-says-both"],
)
def test_nothing_is_said_where_every_default_is_the_labs_or_set(text: str, tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path, text) if text else None)
    assert defaults_note(config) is None


def test_a_key_the_box_sets_is_not_named(tmp_path: Path) -> None:
    note = defaults_note(load_config(config_file(tmp_path, BOX + "[bench]\nmax_tokens = 256\n")))
    assert note is not None and "server.ready_timeout_s = 1800" in note
    assert "max_tokens" not in note
