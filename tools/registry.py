"""The tools every run gets, in a fixed order (the API tool list must be byte-identical); a run
on a fleet gets run_trial too, last."""

from __future__ import annotations

from tools.base import Tool
from tools.bash import Bash
from tools.compare import Compare
from tools.duet import Duet
from tools.files import GetFile, PutFile
from tools.jobs import JobStatus, StartJob, StopJob
from tools.kill_server import KillServer
from tools.read_log import ReadLog
from tools.recommend import Recommend
from tools.run_benchmark import RunBenchmark
from tools.run_trial import RunTrial
from tools.start_server import StartServer
from tools.todo import TodoRead, TodoWrite


def all_tools(fleet: bool = False) -> list[Tool]:
    tools: list[Tool] = [
        TodoWrite(),
        TodoRead(),
        Bash(),
        ReadLog(),
        StartServer(),
        KillServer(),
        RunBenchmark(),
        Compare(),
        Recommend(),
        Duet(),
        PutFile(),
        GetFile(),
        StartJob(),
        JobStatus(),
        StopJob(),
    ]
    return [*tools, RunTrial()] if fleet else tools
