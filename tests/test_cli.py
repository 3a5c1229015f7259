"""User mistakes: one clear line on stderr and exit 2. And the commands that read a run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import main
from state.run import Run

ROOT = Path(__file__).parent.parent


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(args)
    except SystemExit as exit_:  # argparse errors
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "agent.toml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "--goal", "  "], "the goal is empty"),
        (["run", "--goal", "x", "--model", "gpt-5"], "unknown model 'gpt-5'"),
        (["run", "--goal", "x", "--model", "claude-sonnet-4-6"], "needs ANTHROPIC_API_KEY"),
        (["run", "--goal", "x", "--config", "/nonexistent/agent.toml"], "not found"),
        (["run"], "the following arguments are required: --goal"),
        (["todos", "nope"], "no run 'nope'"),
        (["resume", "nope"], "no run 'nope'"),
        (["say", "nope", "hi"], "no run 'nope'"),
        (["replay", "nope.jsonl"], "no run 'nope.jsonl'"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(
    args: list[str],
    words: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("AGENT_RUNS_DIR", str(tmp_path))
    code, _, err = run_cli(args, capsys)
    assert code == 2
    assert words in err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        ("[server\n", "malformed TOML"),
        ('[server]\ncomand = "x"\n', "unknown key 'server.comand' (did you mean 'command'?)"),
        ('[bench]\nmax_tokens = "lots"\n', "bench.max_tokens: Input should be a valid integer"),
        ('[[hosts]]\nname = "gpu"\nadress = "local"\n', "did you mean 'address'?"),
        ('[server]\nhost = "gpu"\n', "server.host 'gpu' is not one of the hosts"),
        ("budgett = 3\n", "unknown key 'budgett' (did you mean 'budget'?)"),
    ],
)
def test_bad_config_names_the_key(
    toml: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(
        [
            "run",
            "--goal",
            "x",
            "--config",
            write(tmp_path, toml),
            "--model",
            "autopilot",
            "--runs-dir",
            str(tmp_path),
        ],
        capsys,
    )
    assert code == 2
    assert words in err
    assert len(err.strip().splitlines()) == 1, err


def test_runs_dir_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x")
    code, _, err = run_cli(["runs", "--runs-dir", str(tmp_path / "file")], capsys)
    assert code == 2 and "does not exist" in err


def test_todos_and_runs_read_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = Run.create(tmp_path, "r1")
    run.append("run_started", goal="beat baseline", brain="autopilot")
    from state.todos import Todo

    run.write_todos([Todo(id="a", content="sweep", status="in_progress")])
    run.close()
    code, out, _ = run_cli(["todos", "r1", "--runs-dir", str(tmp_path), "--json"], capsys)
    assert code == 0 and out == (run.path / "todos.json").read_text()
    code, out, _ = run_cli(["todos", "r1", "--runs-dir", str(tmp_path)], capsys)
    assert out.strip() == "[>] a: sweep (medium)"
    code, out, _ = run_cli(["runs", "--runs-dir", str(tmp_path)], capsys)
    assert "r1" in out and "beat baseline" in out


def test_say_stop_budget_queue_messages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Run.create(tmp_path, "r1").append("run_started", goal="g")
    for args in (
        ["say", "r1", "skip speculation"],
        ["stop", "r1"],
        ["budget", "r1", "--steps", "9"],
    ):
        code, out, _ = run_cli([*args, "--runs-dir", str(tmp_path), "--json"], capsys)
        assert code == 0 and json.loads(out)["queued"] == args[0]
    bodies = [json.loads(p.read_text()) for p in sorted((tmp_path / "r1" / "inbox").glob("*.json"))]
    assert [b["kind"] for b in bodies] == ["say", "stop", "budget"]
    code, _, err = run_cli(["budget", "r1", "--runs-dir", str(tmp_path)], capsys)
    assert code == 2 and "say which limit" in err


def test_replay_check_from_the_command_line(tmp_path: Path) -> None:
    session = ROOT / "tests" / "sessions" / "todos.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent.cli",
            "replay",
            str(session),
            "--check",
            "--runs-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "check: no drift" in proc.stdout


def test_the_resolved_config_toml_reads_back_as_written() -> None:
    import tomllib

    from tools.domain.config import Config, lab_config, redact
    from tools.domain.config_toml import to_toml

    resolved = redact(lab_config().model_dump(mode="json"))
    back = tomllib.loads(to_toml(resolved))  # TOML has no null: None values are left out
    assert Config.model_validate(back) == Config.model_validate(resolved)
