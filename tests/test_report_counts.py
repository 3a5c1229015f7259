"""What a person reads first and counts: a run that did not finish says so before anything else;
every count of measurements is of one unit, the sweep (state/sweeps.py), named, and the same
number in the autopilot's closing words, the report's cost, its configurations and its caveats;
a concurrency policy is deployed as one server per range, each with its command, and the rule."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent.report import build, gather, render_files
from agent.report.render import Para
from state.events import read_events
from state.sweeps import count, sweeps
from tests.report_session import write_session
from tests.test_report import rows, section

LAB = Path(__file__).parent / "sessions" / "autopilot" / "lab.jsonl"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The recorded lab campaign (its events only: a session replayed elsewhere)."""
    folder = tmp_path_factory.mktemp("lab") / "lab"
    folder.mkdir()
    shutil.copy(LAB, folder / "events.jsonl")
    render_files(gather(folder, read_events(folder / "events.jsonl").events), folder)
    return folder, (folder / "report.md").read_text()


def test_a_stopped_run_says_so_before_anything_else(tmp_path: Path) -> None:
    folder = write_session(tmp_path / "stopped")
    f = gather(folder, read_events(folder / "events.jsonl").events, "stopped")
    blocks = build(f)
    first = blocks[2]  # after the title and the run's line
    assert isinstance(first, Para) and first.text.startswith("**Warning:** The campaign ended")
    assert "may be incomplete" in first.text
    render_files(f, folder)
    md = (folder / "report.md").read_text()
    assert md.index("may be incomplete") < md.index("## Conclusion") < md.index("Deploy")
    assert md.count("may be incomplete") == 1  # not said again at the bottom


def test_a_finished_run_has_no_warning(tmp_path: Path) -> None:
    folder = write_session(tmp_path / "done")
    blocks = build(gather(folder, read_events(folder / "events.jsonl").events))
    assert not any(isinstance(b, Para) and "**Warning:**" in b.text for b in blocks)


def test_the_sweeps_are_the_autopilots_and_the_reports(lab: tuple[Path, str]) -> None:
    folder, md = lab
    events = read_events(folder / "events.jsonl").events
    closing = next(
        b["text"]
        for e in reversed(events)
        if e["type"] == "message" and e["role"] == "assistant"
        for b in e["content"]
        if b.get("type") == "text" and "Cost:" in b["text"]
    )
    said = re.search(r"(\d+) sweeps;", closing)
    assert said, closing
    n, calls = int(said.group(1)), sum(e["type"] == "benchmark" for e in events)
    assert n == len(sweeps(events)) and calls > n  # the autopilot cut its sweeps into calls
    cost = dict(r[:2] for r in rows(md, "sweeps", "## Cost"))
    assert cost["sweeps"].startswith(f"{n} ({calls} benchmark calls, ")
    table = section(md, "## All configurations measured")
    header = next(line for line in table.splitlines() if line.startswith("| configuration"))
    column = [c.strip() for c in header.strip("|").split("|")].index("sweeps")
    body = [
        ln for ln in table.splitlines() if ln.startswith("| ") and ln != header and "---" not in ln
    ]
    assert sum(int(ln.strip("|").split("|")[column]) for ln in body) == n


def test_the_caveats_count_sweeps_not_calls(lab: tuple[Path, str]) -> None:
    folder, md = lab
    f = gather(folder, read_events(folder / "events.jsonl").events)
    once = [c for c in f.m.configs if len(c.sweeps) == 1]
    assert once and all(len(c.runs) > 1 for c in once if len(c.levels) == 8)
    assert f"{len(once)} of {len(f.m.configs)} configurations were measured by one sweep" in md
    assert not any(len(c.sweeps) > 1 and c.launches == 1 and len(c.levels) < 3 for c in f.m.configs)


def recorded_policy() -> list[dict[str, Any]]:
    """The policy of the lab session's recommendation, each range with the command recommend
    wrote for it."""
    for line in reversed(LAB.read_text().splitlines()):
        e = json.loads(line)
        if e["type"] == "tool_result" and e.get("name") == "recommend":
            return list(e["data"]["recommendation"].get("policy") or [])
    raise AssertionError("the lab session has no recommendation")


def no_port(command: str) -> list[str]:
    """A command's words without its port (the launches' port is not the deploy's)."""
    words = shlex.split(command)
    at = words.index("--port")
    return words[:at] + words[at + 2 :]


def test_a_policy_recorded_without_commands_gets_one_per_server(tmp_path: Path) -> None:
    """A recommendation recorded before recommend wrote a command per range: the report takes
    each range's command from the launches of its configuration - the command recommend would
    have written, but for the port."""
    policy = recorded_policy()
    assert len(policy) == 2 and all(p.get("command") for p in policy)
    folder = tmp_path / "lab"
    folder.mkdir()
    lines = []
    for line in LAB.read_text().splitlines():
        e = json.loads(line)
        if e["type"] == "tool_result" and e.get("name") == "recommend":
            for p in e["data"]["recommendation"].get("policy") or []:
                del p["command"]
        lines.append(json.dumps(e))
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n")
    render_files(gather(folder, read_events(folder / "events.jsonl").events), folder)
    conclusion = section((folder / "report.md").read_text(), "## Conclusion")
    at = policy[1]["from_concurrency"]
    assert f"**Deploy two servers and route by concurrency** (crossover at C={at})" in conclusion
    assert conclusion.count("```\n") == 4  # two commands, fenced
    for p in policy:
        lo, hi = p["from_concurrency"], p["to_concurrency"]
        span = f"C>={lo}" if not hi else f"C={lo}" if hi == lo else f"C={lo}-{hi}"
        after = conclusion.split(f"Server for **{span}**: **", 1)
        assert len(after) == 2, (span, conclusion)
        fenced = after[1].split("```\n")[1]
        assert no_port(fenced) == no_port(p["command"]), span
    assert "**Routing:** one server per range; a router" in conclusion


def test_counts_name_their_unit_in_the_singular_too() -> None:
    assert count(1, "sweep") == "1 sweep" and count(22, "sweep") == "22 sweeps"
    assert count(1, "benchmark call") == "1 benchmark call"
