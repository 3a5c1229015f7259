"""The words a person reads: no "baseline baseline" nor "server server", the ablation's other values
without the winner's own, a deploy command that wraps between flags only, plain output in words
(no raw JSON, no line cut), "agent:" not "agent agent:", an unknown option named before a missing
one, the speculation todo cancelled once the supervisor dropped it, and failed levels with their
error."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent.brains.autopilot import AutopilotBrain
from agent.cli import main
from agent.report import gather, render_files
from agent.report.render import Code, to_html
from agent.session import make_agent
from agent.view.console import PlainPrinter, describe
from agent.view.standing import standing
from state.events import read_events
from tests.autopilot_world import lab, world
from tests.report_session import bench_in_run, command_of, write_session
from tests.test_autopilot_brain import new_run
from tests.test_report import rows

LAB = Path(__file__).parent / "sessions" / "autopilot" / "lab.jsonl"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = write_session(tmp_path_factory.mktemp("w") / "campaign")
    render_files(gather(folder, read_events(folder / "events.jsonl").events), folder)
    return folder


def test_the_standing_line_says_baseline_once(tmp_path: Path) -> None:
    folder = write_session(tmp_path / "s")
    line = standing(gather(folder, read_events(folder / "events.jsonl").events))
    assert line.startswith("baseline · ") and "baseline baseline" not in line


def test_the_ablation_does_not_list_the_winners_value_as_another(session: Path) -> None:
    md = (session / "report.md").read_text()
    row = rows(md, "`--cuda-graph-max-bs`")[0]
    assert row[1:3] == ["128", "256"]
    assert "256:" not in row[5]  # the winner's own value has its column
    assert "other values (not the baseline's or the winner's)" in md


def test_a_command_wraps_between_flags_never_inside_one() -> None:
    command = command_of({"--cuda-graph-max-bs": 256, "--attention-backend": "fa3"})
    page = to_html([Code(command)], "t")
    pre = page[page.index("<pre>") : page.index("</pre>")]
    assert '<span class="nw">--cuda-graph-max-bs 256</span>' in pre
    assert '<span class="nw">--attention-backend fa3</span>' in pre
    assert '<span class="nw">--port 30000</span>' in pre
    # what is outside the spans is where a line may break: spaces between flags only
    outside = re.sub(r'<span class="nw">[^<]*</span>', "", pre)
    assert "--" not in outside


def test_plain_output_is_words_not_json_and_nothing_is_cut(tmp_path: Path) -> None:
    events = read_events(LAB).events
    lines = [line for e in events if (line := describe(e)) is not None]
    assert not [line for line in lines if "{" in line or line.endswith("...")], "no JSON, no cut"
    assert "-> run_benchmark on server at C=1,2 (baseline-L01)" in lines
    assert any(line.startswith("-> start_server: --attention-backend") for line in lines)
    assert any(re.fullmatch(r"server ready after \d+\.\d s", line) for line in lines)
    assert not any("server server" in line for line in lines)
    closing = next(line for line in reversed(lines) if line.startswith("agent: Done."))
    assert closing.endswith("recommendation.json and the report say more.")  # whole
    out = io.StringIO()
    PlainPrinter(out)(events[-1])
    assert out.getvalue().count("\n") == 1


def test_the_command_line_names_the_unknown_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = ["--runs-dir", str(tmp_path)]
    with pytest.raises(SystemExit) as ended:
        main(["run", "--gaol", "beat baseline", *runs])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err == "agent run: unrecognized option: --gaol (see --help)\n"
    with pytest.raises(SystemExit):
        main(["runz"])
    err = capsys.readouterr().err
    assert err.startswith("agent: argument command: invalid choice: 'runz'"), err
    with pytest.raises(SystemExit):  # a value that looks like an option is not one
        main(["run", *runs])
    assert "required: --goal" in capsys.readouterr().err


async def test_the_speculation_todo_is_cancelled_once_the_supervisor_drops_it(
    tmp_path: Path,
) -> None:
    config = lab()
    run = new_run(tmp_path, config)
    agent = make_agent(run, AutopilotBrain(config), config, tools=world(4))
    for _ in range(4):
        await agent.step()
    family = next(t for t in run.state.todos if t["id"] == "family")
    assert family["status"] == "pending"
    run.append("supervisor_message", text="skip speculation")
    await agent.step()
    await agent.step()
    await agent.ctx.hosts.close()
    family = next(t for t in run.state.todos if t["id"] == "family")
    assert family["status"] == "cancelled", family
    assert family["content"].endswith("skipped: the supervisor said so (agent say)")
    run.close()


def test_failed_levels_say_what_the_requests_failed_with(make_run: Any) -> None:
    run, _ = make_run()
    base = {"--attention-backend": "flashinfer"}
    bench_in_run(run, "baseline", base, {1: 90.0, 10: 360.0})
    summary = {1: 95.0, 10: 0.0}
    bench_in_run(run, "triton", {"--attention-backend": "triton"}, summary)
    result = run.path / "results" / "triton.json"
    data = json.loads(result.read_text())
    sample = {"http_500": "CUDA error: an illegal memory access"}
    for p in data["points"]:
        if p["max_concurrency"] == 10:
            p.update(level_failed=True, output_throughput=0.0, num_prompts=50, completed=0,
                     failed=50, errors={"http_500": 50}, error_samples=sample)  # fmt: skip
    result.write_text(json.dumps(data))
    render_files(gather(run.path, read_events(run.events_path).events), run.path)
    md = (run.path / "report.md").read_text()
    row = rows(md, "triton", "## Failed and crashed configurations")[0]
    assert row[2] == "every request failed at C=10"
    assert row[3] == "50 of 50 requests failed with http_500: CUDA error: an illegal memory access"
