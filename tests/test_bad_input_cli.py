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
        (["--max-steps", "-3"], "argument --max-steps: must be a number > 0, got -3"),
        (["--max-steps", "many"], "argument --max-steps: not a number: 'many'"),
        (["--max-cost", "-1"], "argument --max-cost: must be a number > 0, got -1"),
        (["--max-minutes", "0"], "argument --max-minutes: must be a number > 0, got 0"),
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
    damaged = next(line for line in out.splitlines() if line.startswith("damaged "))
    assert damaged.split()[1:4] == ["?", "?", "unreadable:"] and "corrupt event" in damaged
    assert "good" in out


# --- issue 16, items 10, 14 and 15 -----------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--steps", "-1"], "must be a number > 0, got -1"),
        (["--steps", "0"], "cannot be switched off"),
        (["--usd", "0"], "must be a number > 0, got 0"),
        (["--minutes", "nan"], "must be a number > 0, got nan"),
        (["--usd", "inf"], "must be a number > 0, got inf"),
    ],
)
def test_budget_refuses_values_that_switch_a_limit_off(
    args: list[str], words: str, damaged_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = cli(["budget", str(damaged_run), *args], capsys)
    assert code == 2 and one_line(err) and words in err, err
    assert not list((damaged_run / "inbox").glob("*.json"))


@pytest.mark.parametrize("value", ["0", "-5", "inf"])
def test_run_refuses_a_cost_budget_that_is_off(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = cli([*RUN, "--max-cost", value, "--runs-dir", str(tmp_path)], capsys)
    assert code == 2 and one_line(err) and "--max-cost" in err and "leave the option out" in err


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('[guard]\nallow = ["("]', "guard.allow"),
        ("[bench]\nconcurrency = [-4]", "bench.concurrency.0"),
        ("[bench]\nconcurrency = [0]", "bench.concurrency.0"),
        ("[bench]\nconcurrency = []", "bench.concurrency"),
        ("[bench]\nrequests_per_level = 0", "bench.requests_per_level"),
        ("[bench]\nrequests_per_level = -5", "bench.requests_per_level"),
        ("[bench]\nwarmup_requests = -1", "bench.warmup_requests"),
        ("[server]\nport = 70000", "server.port"),
        ('[[hosts]]\nname = "gpu"\naddress = "ssh://gpu:99999"', "hosts.0.address"),
        ("[budget]\nmax_usd = 0", "budget.max_usd"),
    ],
)
def test_config_values_that_break_later_are_one_line_naming_the_key(
    toml: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = "" if "[server]" in toml else '[server]\ncommand = "true"\n'
    config = tmp_path / "agent.toml"
    config.write_text(server + toml + ('\ncommand = "true"' if "[server]" in toml else "") + "\n")
    code, err = cli([*RUN, "--config", str(config), "--runs-dir", str(tmp_path / "r")], capsys)
    assert code == 2 and one_line(err) and key in err, err


def test_a_run_id_with_a_trailing_newline_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = cli([*RUN, "--run-id", "r1\n", "--runs-dir", str(tmp_path)], capsys)
    assert code == 2 and "bad run id" in err
    assert not (tmp_path / "r1\n").exists()


@pytest.mark.parametrize("line", ["5", "[1, 2]", '"text"', "null", '{"no": "seq"}'])
@pytest.mark.parametrize("command", ["todos", "resume", "report"])
def test_a_log_line_that_is_json_but_not_an_event_is_named_not_a_traceback(
    line: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "r"
    run.mkdir()
    good = '{"seq":1,"ts":"t","type":"run_started","goal":"g","brain":"autopilot"}'
    (run / "events.jsonl").write_text(f"{good}\n{line}\n{good.replace(':1,', ':2,')}\n")
    code, err = cli([command, str(run)], capsys)
    assert code == 2 and one_line(err) and "corrupt event" in err, err
