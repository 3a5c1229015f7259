"""A configuration whose every level failed was not measured: a campaign where nothing could be
measured (a server that answers readiness, then fails every benchmark request) names no winner
in report.md, the standing line or the final screen, and says why; a failed configuration beside
a measured one is never the winner either. The failures are real: run_benchmark against the
imitation server of tests/foreign_server.py that answers every completion HTTP 500."""

from __future__ import annotations

import io
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.report import gather, outcome, write_report
from agent.report.render import to_markdown
from agent.view.console import PlainPrinter
from agent.view.standing import final_lines, standing
from state.events import read_events
from state.run import Run
from tests.foreign_server import ForeignServer
from tests.test_bench_foreign_servers import context
from tools.base import ToolBox
from tools.domain.config_toml import to_toml
from tools.run_benchmark import RunBenchmark

REASON = "requests failed with http_500: the model is broken"  # run_benchmark's words


@pytest.fixture
async def urls() -> AsyncIterator[dict[str, str]]:
    """An imitation server that fails every request, and one that serves (llama-server's ways)."""
    servers = {mode: ForeignServer(mode) for mode in ("broken", "llama")}
    yield {mode: await server.start() for mode, server in servers.items()}
    for server in servers.values():
        await server.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def sweep(run: Run, url: str, label: str, levels: tuple[int, ...] = (1, 2)) -> None:
    """One real sweep; its result file and its event are the run's."""
    inp: dict[str, Any] = {"url": url, "concurrency": list(levels), "max_tokens": 4, "label": label}
    res, _ = await ToolBox([RunBenchmark()]).call(context(run), "run_benchmark", inp)
    assert res.is_error == res.text.startswith("benchmark failed at every level"), res.text


def conclusion(run: Run) -> str:
    md = (run.path / "report.md").read_text()
    return md[md.index("## Conclusion") : md.index("\n## ", md.index("## Conclusion") + 1)]


async def test_nothing_measured_names_no_winner_and_says_why(
    tmp_path: Path, urls: dict[str, str]
) -> None:
    run = Run.create(tmp_path / "runs", "r1")
    await sweep(run, urls["broken"], "baseline-L01")
    await sweep(run, urls["broken"], "noise-L01")  # the A/A repeat fails the same way
    write_report(run, "finished")
    md = (run.path / "report.md").read_text()
    said = conclusion(run)
    assert "**No recommendation.** No configuration could be measured: every benchmark failed" in (
        said
    )
    assert re.search(rf"\(baseline: \d+ of \d+ {REASON}\)\.", said), said
    assert "Keep the baseline" not in md and "(winner)" not in md
    assert "Launch the winner" not in md and "## Throughput by concurrency" not in md
    assert "| baseline | (baseline flags) | every request failed at C=1,2 |" in md

    events = read_events(run.events_path).events
    f = gather(run.path, events)
    assert f.baseline is not None and f.winner is None and f.measured == []
    line = standing(f)
    assert line.startswith("no configuration could be measured") and REASON in line
    assert "winner" not in line
    assert final_lines(run.path, f)[-1] == (
        "nothing to deploy: no configuration could be measured: every benchmark failed at every "
        "level"
    )
    run.append("run_finished", status="finished", exit_code=0, reason="no recommendation")
    out = io.StringIO()  # `agent run` off a terminal: its last lines
    PlainPrinter(out, run.path)(read_events(run.events_path).events[-1])
    printed = out.getvalue()
    assert "] standing: no configuration could be measured" in printed
    assert "winner" not in printed and "keep the baseline" not in printed


async def test_a_configuration_that_failed_everywhere_is_never_the_winner(
    tmp_path: Path, urls: dict[str, str]
) -> None:
    """Beside a measured baseline it is not a second configuration measured; with the baseline
    failed, the measured one has nothing to be compared with, and there is no winner."""
    run = Run.create(tmp_path / "runs", "ok-base")
    await sweep(run, urls["llama"], "baseline-L01", (1,))
    await sweep(run, urls["broken"], "screen-L02-fa3", (1,))
    f = gather(run.path, read_events(run.events_path).events)
    said = to_markdown(outcome.conclusion(f))  # the section alone: no chart to draw
    assert "**Keep the baseline**: it is the only configuration measured." in said
    assert f.winner is f.baseline and standing(f).endswith("winner baseline")

    run = Run.create(tmp_path / "runs", "failed-base")
    await sweep(run, urls["broken"], "baseline-L01", (1,))
    await sweep(run, urls["llama"], "validate-L02-fa3", (1,))
    f = gather(run.path, read_events(run.events_path).events)
    said = to_markdown(outcome.conclusion(f))
    assert "**No recommendation.** The baseline could not be measured (baseline: " in said
    assert "so nothing can be compared with it." in said
    assert f.winner is None and [c.name for c in f.measured] == ["candidate: fa3"]
    assert "winner" not in standing(f)
    assert not any(line.startswith(("deploy", "keep")) for line in final_lines(run.path, f))


@pytest.mark.slow  # a whole `agent run`: a few launches of a server process, ~10 s
def test_agent_run_against_a_server_that_fails_every_benchmark(tmp_path: Path) -> None:
    """The real command end to end: the server answers the readiness check's short completion and
    refuses every benchmark prompt (too long for its context), as llama-cpp-python's server does
    with --n_ctx 32 (tests/test_real_llama_cpp_python.py): no recommendation, exit 0, and last
    lines that name no winner."""
    root = Path(__file__).resolve().parent.parent
    argv = [sys.executable, "-m", "tests.foreign_server", "tinyctx", str(free_port())]
    port = int(argv[-1])
    body = {
        "server": {
            "engine": "openai",
            "command": f"PYTHONPATH={shlex.quote(str(root))} {shlex.join(argv)}",
            "port": port,
            "ready_timeout_s": 30.0,
            "kill_timeout_s": 5.0,
        },
        "bench": {"concurrency": [1, 2], "input_len": 64, "max_tokens": 8, "warmup_requests": 1},
        "budget": {"max_minutes": 3.0},
        "search": {"--threads": [1, 2], "baseline": {"--threads": 1}},
    }
    config = tmp_path / "agent.toml"
    config.write_text(to_toml(body))
    runs = tmp_path / "runs"
    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", "run", "--config", str(config), "--goal",
         "beat baseline", "--model", "autopilot", "--runs-dir", str(runs), "--run-id", "r"],
        capture_output=True, text=True, timeout=300, cwd=root,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "no recommendation - the baseline does not start or cannot be measured" in out
    assert not (runs / "r" / "recommendation.json").exists()
    last = out[out.index("] finished: ") :]
    assert "standing: no configuration could be measured: every benchmark failed" in last, last
    assert "Requested tokens exceed context window" in last
    assert "nothing to deploy: no configuration could be measured" in last
    assert "winner" not in last and "keep the baseline" not in last
    md = (runs / "r" / "report.md").read_text()
    assert "**No recommendation.** No configuration could be measured" in md
    assert "Keep the baseline" not in md
