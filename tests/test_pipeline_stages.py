"""The drafter pipeline's stages (sim/pipeline) as a person would run them, and the simulator
serving what they made (sim/drafter.py): quality follows from the training, the wrong layout does
not load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim import drafter
from sim.flags import parse_server_args
from sim.model import Model
from sim.pipeline.__main__ import main
from tools.servers.log_progress import last_progress

FAST = ["--time-scale", "1000000"]
SERVE = ["--tp", "8", "--disable-custom-all-reduce", "--speculative-algorithm", "EAGLE3"]


def stage(work: Path, *args: str) -> int:
    return main([*args, "--workdir", str(work), *FAST])


def build(work: Path, samples: int = 400, epochs: int = 3, defect: bool = False) -> Path:
    """datagen, extract, vocab, train, convert (no check: what a careless run would do)."""
    gen = ["datagen", "--samples", str(samples)] + (["--defect"] if defect else [])
    for args in (gen, ["extract"], ["vocab"], ["train", "--epochs", str(epochs)], ["convert"]):
        assert stage(work, *args) == 0, args
    return work / "drafter"


def test_the_check_catches_the_defect_and_passes_the_fixed_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert stage(tmp_path, "datagen", "--samples", "300", "--defect") == 0
    assert stage(tmp_path, "check", "--samples", "300") == 1
    out = capsys.readouterr().out
    assert "malformed: reasoning not closed by </think>" in out
    assert stage(tmp_path, "datagen", "--samples", "300") == 0  # the fixed script
    assert stage(tmp_path, "check", "--samples", "300") == 0
    assert "data check passed" in capsys.readouterr().out


def test_progress_lines_give_fraction_rate_and_eta(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert stage(tmp_path, "datagen", "--samples", "200") == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "Generating" in line]
    middle = last_progress("\n".join(lines[: len(lines) // 2]))
    assert middle is not None and middle.fraction is not None and 0 < middle.fraction < 1
    assert middle.rate is not None and middle.rate.endswith("samples/s")
    assert middle.eta is not None and ":" in middle.eta


def test_quality_follows_samples_defects_and_epochs(tmp_path: Path) -> None:
    good = drafter.load(str(build(tmp_path / "good", samples=2000, epochs=3)))
    short = drafter.load(str(build(tmp_path / "short", samples=2000, epochs=1)))
    few = drafter.load(str(build(tmp_path / "few", samples=300, epochs=3)))
    dirty = drafter.load(str(build(tmp_path / "dirty", samples=2000, epochs=3, defect=True)))
    assert good.malformed == 0 and dirty.malformed > 0
    assert good.alpha > max(short.alpha, few.alpha, dirty.alpha)
    # the simulator serves it: its acceptance length is the drafter's
    args = [*SERVE, "--speculative-draft-model-path"]
    tau = {
        d: Model(parse_server_args([*args, str(tmp_path / d / "drafter")])).tau()
        for d in ("good", "dirty")
    }
    assert tau["good"] > tau["dirty"]
    assert tau["good"] == pytest.approx(drafter.acceptance_length(good.alpha, 3))


def test_a_checkpoint_in_the_wrong_layout_fails_to_load(tmp_path: Path) -> None:
    build(tmp_path)
    assert stage(tmp_path, "convert", "--keep-layout", "--out", "raw") == 0
    failure = Model(
        parse_server_args([*SERVE, "--speculative-draft-model-path", str(tmp_path / "raw")])
    ).failure
    assert failure is not None and failure.message.startswith("KeyError: 'midlayer.")
    missing = Model(
        parse_server_args([*SERVE, "--speculative-draft-model-path", str(tmp_path / "no")])
    ).failure
    assert missing is not None and "config.json" in missing.message
    ok = Model(
        parse_server_args([*SERVE, "--speculative-draft-model-path", str(tmp_path / "drafter")])
    )
    assert ok.failure is None


def test_failures_leave_the_lines_a_person_would_see(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert stage(tmp_path, "train") == 1  # nothing extracted yet
    assert "No such file or directory" in capsys.readouterr().out
    assert stage(tmp_path, "datagen", "--samples", "200", "--fail", "disk") == 1
    assert "No space left on device" in capsys.readouterr().out
    assert not (tmp_path / "data" / "samples.jsonl").exists()  # never half a file
    build(tmp_path, samples=200)
    assert stage(tmp_path, "train", "--fail", "oom", "--fail-at", "0.3") == 1
    assert "torch.OutOfMemoryError: CUDA out of memory" in capsys.readouterr().out
    killed = subprocess.run(
        [sys.executable, "-m", "sim.pipeline", "extract", "--fail", "killed", *FAST],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert killed.returncode == -9 and "Extracting" in killed.stdout


def test_ngram_accepts_less_than_a_trained_drafter(tmp_path: Path) -> None:
    path = build(tmp_path, samples=10000)
    eagle = Model(parse_server_args([*SERVE, "--speculative-draft-model-path", str(path)]))
    ngram = Model(parse_server_args([*SERVE[:-1], "NGRAM"]))
    assert ngram.tau() < eagle.tau()
    meta = json.loads((path / drafter.META).read_text())
    assert meta["samples"] == 10000 and meta["epochs"] == 3
