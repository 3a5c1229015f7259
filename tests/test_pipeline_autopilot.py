"""The autopilot's pipeline (agent/brains/autopilot/pipeline.py) as a function of the events, the
lab that `agent lab setup eagle3-pipeline` writes, and [pipeline] in agent.toml."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent.brains.autopilot import pipeline
from state.fold import RunState, fold
from tools import jobs
from tools.domain.config import Config, ConfigError, load_config
from tools.servers.pipeline_lab import setup


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return load_config(setup(tmp_path / "lab", defect=True).config)


class Events:
    """A run's events, written the way the loop and the job tools write them."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, type_: str, **data: Any) -> None:
        ts = f"2026-01-01T00:00:{len(self.events):02d}.000Z"
        self.events.append({"seq": len(self.events) + 1, "ts": ts, "type": type_, **data})

    def job(self, name: str, exit_code: int | None = 0, ended: bool = True, log: str = "") -> None:
        self.add("job_started", name=name, host="local", pid=1, pgid=1, command="x", log="l")
        call_id = f"t{len(self.events)}"
        use = {"type": "tool_use", "id": call_id, "name": "job_status", "input": {"name": name}}
        self.add("message", role="assistant", content=[use])
        tail = [line for line in log.splitlines() if line.strip()]  # typed, as job_status gives it
        text = log or f"job {name}: ..."
        self.add("tool_result", id=call_id, name="job_status", text=text, data={"tail": tail})
        if ended:
            self.add("job_ended", name=name, exit_code=exit_code)

    @property
    def state(self) -> RunState:
        return fold(self.events)


def test_the_stages_run_in_order_and_a_running_job_is_polled_not_started(config: Config) -> None:
    assert config.pipeline is not None
    names = [s.name for s in config.pipeline.stages]
    assert names == ["datagen", "check", "extract", "vocab", "train", "convert"]
    e = Events()
    assert pipeline.where(e.state, config.pipeline).action == "start"
    for name in ("datagen", "check", "extract", "vocab"):
        e.job(name)
    e.job("train", ended=False)  # what a resume after kill -9 finds: started, not ended
    at = pipeline.where(e.state, config.pipeline)
    assert (at.action, at.attempt and at.attempt.name) == ("poll", "train")
    turn = pipeline.turn(e.state, config)
    assert turn is not None
    calls = [b for b in turn.content if b["type"] == "tool_use"]
    assert [c["name"] for c in calls][-1] == "bash" and "start_job" not in str(calls)
    e.add("job_ended", name="train", exit_code=0)
    e.job("convert")
    assert pipeline.turn(e.state, config) is None  # done: the campaign goes on


def test_a_refused_check_copies_the_fix_reruns_the_stage_then_checks_again(
    config: Config,
) -> None:
    assert config.pipeline is not None
    e = Events()
    e.job("datagen")
    e.job("check", exit_code=1, log="ERROR: 1219/10000 samples malformed: reasoning not closed")
    turn = pipeline.turn(e.state, config)
    assert turn is not None
    names = [b["name"] for b in turn.content if b["type"] == "tool_use"]
    assert names[-1] == "put_file" and "start_job" not in names  # the fix alone first
    put = next(b for b in turn.content if b.get("name") == "put_file")
    assert put["input"]["remote_path"] == "scripts/datagen.sh"
    e.add("message", role="assistant", content=[{**put, "id": "p1"}])
    e.add("tool_result", id="p1", name="put_file", text="copied")
    turn = pipeline.turn(e.state, config)
    assert turn is not None
    start = next(b for b in turn.content if b.get("name") == "start_job")
    assert start["input"]["name"] == "datagen-2"
    e.job("datagen-2")
    at = pipeline.where(e.state, config.pipeline)  # the old check ran on the old data
    assert (at.action, config.pipeline.stages[at.index].name, at.tries) == ("start", "check", 1)
    e.job("check-2", exit_code=1, log="ERROR: 5/10000 samples malformed")
    assert pipeline.where(e.state, config.pipeline).action == "failed"  # one fix, not a loop
    turn = pipeline.turn(e.state, config)
    assert turn is not None and turn.stop_reason == "end_turn"
    assert "pipeline failed at check" in turn.content[-1]["text"]


def test_a_killed_job_is_started_once_more_an_oom_is_not(config: Config) -> None:
    assert config.pipeline is not None
    e = Events()
    e.job("datagen", exit_code=137)
    assert pipeline.where(e.state, config.pipeline).action == "retry"
    e.job("datagen-2", exit_code=1, log="torch.OutOfMemoryError: CUDA out of memory")
    assert pipeline.where(e.state, config.pipeline).action == "failed"


def test_polls_are_spaced_by_the_jobs_own_eta() -> None:
    # the log's ETA is in the stage's clock: 1 h 33 min at 2000x is 2.8 s real; half of it
    own = {"eta_s": 5580.0, "eta_clock": "job"}
    assert pipeline.wait_s(own, 2000) == pytest.approx(1.4)
    assert pipeline.wait_s(own, 1) == pipeline.MAX_WAIT_S  # a real box
    assert pipeline.wait_s({"eta_s": 1.0, "eta_clock": "job"}, 1) == pipeline.MIN_WAIT_S
    estimated = {"eta_s": 120.0, "eta_clock": "real"}  # job_status's own: real time
    assert pipeline.wait_s(estimated, 2000) == 60
    assert pipeline.wait_s({"running": True}, 2000) == pipeline.FIRST_WAIT_S


def test_job_status_gives_the_time_left_typed(tmp_path: Path) -> None:
    """job_status's result carries what the poller reads (its `eta_s` and whose clock, the log's
    last lines): the autopilot never parses the text written for the model."""
    began = (datetime.now(UTC) - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    started = {"name": "train", "ts": began, "host": "local", "pid": 1, "log": "train.log"}
    tqdm = "Training: 40%| 3000/7500 [1:02:00<1:33:00, 0.80 it/s]"
    result = jobs.status_result(started, None, f"loading\n{tqdm}\n")
    assert result.data["eta_s"] == 5580.0 and result.data["eta_clock"] == "job"
    assert result.data["tail"] == ["loading", tqdm] and "ETA 1:33:00" in result.text
    bare = jobs.status_result(
        started, None, "step 40/100\n"
    )  # no ETA: estimated from the elapsed time
    assert bare.data["eta_clock"] == "real" and bare.data["eta_s"] > 0
    assert "(estimated from the elapsed time)" in bare.text


def test_the_lab_config_names_the_drafter_ngram_and_the_fix(config: Config) -> None:
    assert config.pipeline is not None
    spec = config.search["--speculative-algorithm"]
    assert spec == [False, "EAGLE3", "NGRAM"]
    assert config.search["--speculative-draft-model-path"] == [config.pipeline.drafter]
    fix = config.pipeline.stages[1].fix
    assert fix is not None and Path(fix.source).is_file()
    assert str(Path(fix.source).parent) in config.files.allow_local
    work = Path(config.hosts[0].workdir)
    assert "--defect" in (work / "scripts" / "datagen.sh").read_text()
    assert "--defect" not in Path(fix.source).read_text()


def test_a_fix_must_rerun_an_earlier_stage(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(
        '[server]\nengine = "sim"\n[pipeline]\n[[pipeline.stages]]\nname = "check"\n'
        'command = "true"\nfix = { source = "/x", dest = "y", rerun = "datagen" }\n'
    )
    with pytest.raises(ConfigError, match=r"fix\.rerun 'datagen' must name a stage before it"):
        load_config(path)


def test_lab_setup_cli(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent.cli",
            "lab",
            "setup",
            "eagle3-pipeline",
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "train an EAGLE-3 drafter" in out.stdout and (tmp_path / "agent.toml").is_file()
    bad = subprocess.run(
        [sys.executable, "-m", "agent.cli", "lab", "setup", "llama.cpp", "--defect"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "eagle3-pipeline" in bad.stderr


def test_claude_is_briefed_on_the_stages_and_the_fix(config: Config) -> None:
    from agent.briefing import briefing

    text = briefing("train an EAGLE-3 drafter", config)
    assert "Pipeline, before the campaign" in text and "divide its ETAs" in text
    assert "- train: `bash scripts/train.sh`" in text
    assert "put_file" in text and "rerun datagen, then this check again" in text
