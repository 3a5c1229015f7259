"""`agent run --fleet ray --boxes N`: bad usage is one line and exit 2, before a run folder or a
cluster exists (the fleet itself: tests/test_fleet_ray.py, marker ray)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import main


@pytest.mark.parametrize(
    "args, words",
    [
        (["--boxes", "0"], "--boxes: must be a number > 0"),
        (["--fleet", "slurm"], "--fleet: invalid choice"),
    ],
)
def test_bad_fleet_usage(
    args: list[str],
    words: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # so that a Claude model is chosen
    runs = tmp_path / "runs"
    with pytest.raises(SystemExit) as exit_:
        code = main(["run", "--goal", "beat baseline", "--runs-dir", str(runs), *args])
        raise SystemExit(code)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1
    assert not runs.exists()  # nothing was started
