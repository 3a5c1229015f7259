"""Bad input from the user, beyond tests/test_cli.py: each is one clear line on stderr and exit 2,
and nothing is written where it should not be."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import main
from state.run import Run


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(args)
    except SystemExit as exit_:  # argparse errors
        code = int(exit_.code or 0)
    return code, capsys.readouterr().err


def one_line(err: str) -> bool:
    return len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.fixture
def damaged_run(tmp_path: Path) -> Path:
    """A run whose log has a damaged line in the middle (not a torn tail: no crash does that)."""
    run = Run.create(tmp_path / "runs", "damaged")
    for i in range(5):
        run.append("note", i=i)
    run.close()
    lines = run.events_path.read_bytes().split(b"\n")
    lines[2] = lines[2][:15]
    run.events_path.write_bytes(b"\n".join(lines))
    return run.path


RUN = ["run", "--goal", "beat baseline", "--model", "autopilot"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--runs-dir", "{tmp}/file"], "runs folder {tmp}/file is not a folder"),
        (["--run-id", "../escape"], "bad run id '../escape'"),
        (["--run-id", "a b"], "bad run id 'a b'"),
        (["--config", "{tmp}"], "cannot read config file {tmp}: Is a directory"),
        (["--config", "{tmp}/binary.toml"], "is not a text file"),
        (["--config", "{tmp}/table.toml"], "server must be a table"),
        (["--max-steps", "-3"], "argument --max-steps: must be > 0, got -3"),
        (["--max-steps", "many"], "argument --max-steps: not a number: 'many'"),
        (["--max-cost", "-1"], "argument --max-cost: must be >= 0, got -1"),
        (["--max-minutes", "0"], "argument --max-minutes: must be > 0, got 0"),
    ],
)
def test_bad_run_arguments(
    args: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "binary.toml").write_bytes(b"\x7fELF\x02\x01\x01\x00\xd0\xff\xfe")
    (tmp_path / "table.toml").write_text('server = "vllm"\n')
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if "--runs-dir" not in args:
        args += ["--runs-dir", str(tmp_path / "runs")]
    code, err = cli([*RUN, *args], capsys)
    assert code == 2, err
    assert words.replace("{tmp}", str(tmp_path)) in err
    assert one_line(err), err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_bad_lab_time_scale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for value in ("abc", "-2", "0"):
        monkeypatch.setenv("AGENT_LAB_TIME_SCALE", value)
        code, err = cli([*RUN, "--runs-dir", str(tmp_path)], capsys)
        assert code == 2 and f"AGENT_LAB_TIME_SCALE must be a number > 0, got {value!r}" in err
        assert one_line(err), err


@pytest.mark.parametrize("command", ["resume", "todos", "report"])
def test_a_folder_that_is_not_a_run(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    code, err = cli([command, str(tmp_path / "empty")], capsys)
    assert code == 2 and "is not a run folder (no events.jsonl)" in err
    assert one_line(err), err


@pytest.mark.parametrize("command", ["resume", "todos"])
def test_a_damaged_log_is_named_not_a_traceback(
    command: str, damaged_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = damaged_run.joinpath("events.jsonl").read_bytes()
    code, err = cli([command, str(damaged_run)], capsys)
    assert code == 2 and "corrupt event at byte" in err and "events.jsonl" in err
    assert one_line(err), err
    assert damaged_run.joinpath("events.jsonl").read_bytes() == before  # nothing "repaired"


def test_runs_lists_the_others_past_a_damaged_log(
    damaged_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = Run.create(damaged_run.parent, "good")
    good.append("run_started", goal="beat baseline", brain="autopilot")
    good.close()
    code = main(["runs", "--runs-dir", str(damaged_run.parent)])
    out = capsys.readouterr().out
    assert code == 0
    assert "damaged  unreadable: corrupt event" in out and "good" in out
