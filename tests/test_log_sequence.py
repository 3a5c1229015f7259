"""Issue 23 item 8: the log's sequence is checked wherever the log is read. A seq repeated, out of
order or missing is corruption: every reader names it (the seq and the byte offset of the line)
and the command exits 2 with one line, as for a damaged line - never a silent fold of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import main
from state.events import parse_lines, read_events
from state.run import Run

GOOD = 6  # events in the intact log


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


@pytest.fixture
def intact(tmp_path: Path) -> Path:
    run = Run.create(tmp_path / "runs", "r")
    run.append("run_started", run_id="r", goal="beat baseline", brain="autopilot", model="x")
    for i in range(GOOD - 2):
        run.append("note", i=i)
    run.append("run_finished", status="finished", exit_code=0, reason="done")
    run.close()
    return run.path


def damage(run: Path, how: str) -> tuple[int, str]:
    """Break the sequence at the third line; returns (byte offset of the break, its words)."""
    lines = lines_of(run / "events.jsonl")
    at = sum(len(line) for line in lines[:2])  # the first two lines are intact
    if how == "duplicated":
        lines.insert(2, lines[1])
        at, words = sum(len(line) for line in lines[:2]), "seq 2 repeated"
    elif how == "swapped":
        lines[2], lines[3] = lines[3], lines[2]
        words = "seq 3 missing (seq 4 follows seq 2)"  # 4 where 3 was due
    else:
        del lines[2]
        words = "seq 3 missing (seq 4 follows seq 2)"
    (run / "events.jsonl").write_bytes(b"".join(lines))
    return at, words


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("how", ["duplicated", "swapped", "missing"])
@pytest.mark.parametrize(
    "command",
    [
        ["todos"],
        ["report"],
        ["resume"],
        ["replay", "--check"],
        ["watch", "--once"],
        ["watch", "--json", "--once"],
        ["say", "{run}", "hello"],
        ["budget", "{run}", "--steps", "9"],
    ],
)
def test_a_broken_sequence_is_named_and_exits_2(
    how: str, command: list[str], intact: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    at, words = damage(intact, how)
    before = (intact / "events.jsonl").read_bytes()
    args = [a.replace("{run}", str(intact)) for a in command]
    if "{run}" not in command:
        args.insert(1, str(intact))
    if command[0] == "replay":
        args += ["--runs-dir", str(intact.parent / "replays")]
    code, out, err = cli(args, capsys)
    assert code == 2, (code, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"broken sequence at byte {at}: {words}" in err and "events.jsonl" in err, err
    assert (intact / "events.jsonl").read_bytes() == before  # nothing "repaired"
    assert not list((intact / "inbox").glob("*.json"))  # nothing queued for a broken run
    if command[0] == "replay":
        assert not (intact.parent / "replays").exists()


def test_runs_lists_a_broken_log_as_unreadable(
    intact: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damage(intact, "duplicated")
    code, out, _ = cli(["runs", "--runs-dir", str(intact.parent)], capsys)
    row = next(line for line in out.splitlines() if line.startswith("r "))
    assert code == 0 and "unreadable" in row and "seq 2 repeated" in row, out


def test_every_break_is_told_apart() -> None:
    def err(seqs: list[int]) -> str:
        data = b"".join(b'{"seq":%d,"type":"note"}\n' % s for s in seqs)
        with pytest.raises(ValueError) as info:
            parse_lines(data, after_seq=0)
        return str(info.value)

    line = len(b'{"seq":1,"type":"note"}\n')
    assert err([2]).endswith("byte 0: seq 1 missing (seq 2 follows seq 0)")
    assert err([1, 2, 2]).endswith(f"byte {2 * line}: seq 2 repeated")
    assert err([1, 2, 3, 2]).endswith(f"byte {3 * line}: seq 2 out of order (after seq 3)")
    assert err([1, 2, 9]).endswith("seq 3..8 missing (seq 9 follows seq 2)")


def test_an_intact_log_and_a_torn_tail_still_read(intact: Path) -> None:
    path = intact / "events.jsonl"
    assert [e["seq"] for e in read_events(path).events] == list(range(1, GOOD + 1))
    with path.open("ab") as f:
        f.write(b'{"seq":7,"ty')  # a crash mid-write: dropped and said, not a break
    contents = read_events(path)
    assert len(contents.events) == GOOD and contents.torn_report
