"""benchmarks/eta_accuracy.py takes a run folder or its events file (a recorded session such as
tests/sessions/autopilot/lab.jsonl is one), with the same figures either way."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks.eta_accuracy import main

LAB = Path(__file__).parent / "sessions" / "autopilot" / "lab.jsonl"


def test_a_recorded_events_file_is_measured_as_its_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main([str(LAB)])
    from_file = capsys.readouterr().out.splitlines()[-1]
    shutil.copy(LAB, tmp_path / "events.jsonl")
    main([str(tmp_path)])
    from_folder = capsys.readouterr().out.splitlines()[-1]
    assert from_file.startswith("1 run: median error once a quarter was done ")
    assert from_file == from_folder


def test_a_path_that_is_no_run_is_named_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(f"{tmp_path}: neither an events file nor a run folder with events.jsonl")
