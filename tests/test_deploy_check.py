"""benchmarks/deploy_check.py: each server of a run's deploy files is started from its launch
script and benchmarked with `agent bench` at the levels it serves (a policy's server at its
range's), then stopped. The figures it compares depend on the machine's load, so they are not
asserted here (docs/report.md has them); what is asserted is what it measures and that nothing it
started is left."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from agent.report import gather
from agent.report.figures import Figures
from benchmarks import deploy_check
from state.events import read_events
from tests.report_session import LEVELS, write_session
from tests.test_deploy_artifacts import render, single
from tools.servers.profiles import ENGINES


def figures(folder: Path) -> Figures:
    return gather(folder, read_events(folder / "events.jsonl").events)


def test_a_policys_servers_are_measured_each_at_its_ranges_levels(tmp_path: Path) -> None:
    folder = write_session(tmp_path / "run")  # C=1 -> eagle, C>=2 -> cg256
    render(folder)
    servers = deploy_check.servers_of(figures(folder))
    assert [(c.name, levels) for _, c, levels in servers] == [("eagle", [1]), ("cg256", LEVELS[1:])]
    assert all((folder / "deploy" / script).is_file() for script, _, _ in servers)
    assert len({script for script, _, _ in servers}) == 2


def test_a_run_without_its_deploy_files_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = single(tmp_path / "run")  # its report (and deploy/) not written
    assert deploy_check.main([str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "deploy is missing: `agent report" in err


def test_the_winner_is_started_from_its_script_benchmarked_and_stopped(tmp_path: Path) -> None:
    folder = single(tmp_path / "run")
    render(folder)
    ((script, c, levels),) = deploy_check.servers_of(figures(folder))
    assert script == "launch.sh" and c.name == "cg256" and levels == LEVELS
    ports: list[int] = []
    real_free_port = deploy_check.free_port

    def port() -> int:
        ports.append(real_free_port())
        return ports[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(deploy_check, "free_port", port)
        mp.setenv("SIM_GPU_DIR", str(tmp_path / "gpus"))
        bin_dir = Path(sys.executable).parent  # the session's command runs `python -m sim`
        mp.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        now = deploy_check.measure(folder / "deploy" / script, ENGINES["sim"], c, [1], ready_s=90)
    assert set(now) == {1} and now[1] > 0  # the level measured, on the server the script started
    with socket.socket() as s:  # stopped: its port is free again
        s.bind(("127.0.0.1", ports[0]))


def test_a_script_whose_server_does_not_start_is_a_one_line_error(tmp_path: Path) -> None:
    folder = single(tmp_path / "run")
    render(folder)
    ((script, c, _),) = deploy_check.servers_of(figures(folder))
    broken = folder / "deploy" / script
    broken.write_text(broken.read_text().replace("exec ", "echo 'no such model' >&2; exit 3 #"))
    with pytest.raises(deploy_check.CheckError, match="the server did not start") as err:
        deploy_check.measure(broken, ENGINES["sim"], c, [1], ready_s=90)
    assert "\n" not in str(err.value)
