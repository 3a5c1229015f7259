"""What reaches a supervisor's terminal (issue 16, items 13 and 15): no escape sequence of the
model's or a program's making, and no traceback when the reader of a pipe leaves early."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from state.run import Run
from state.text import printable
from state.todos import Todo, render

HOSTILE = [
    "\x1b]0;pwned\x07",  # OSC: set the window title
    "\x1b]52;c;ZXZpbA==\x1b\\",  # OSC 52: write the clipboard
    "\x1b[2J\x1b[H",  # CSI: clear the screen, cursor home
    "\x1b[31;1m",  # CSI: colour
    "\x9b6n",  # C1 CSI: ask the terminal to report (answers are typed into the shell)
    "\x9d0;title\x9c",  # C1 OSC
    "\x1bP+q544e\x1b\\",  # DCS: request termcap
    "\x1bc",  # reset the terminal
    "\x07\x08\x7f\x85",  # BEL, backspace, DEL, NEL
]


@pytest.mark.parametrize("seq", HOSTILE)
def test_printable_strips_every_sequence(seq: str) -> None:
    shown = printable(f"before{seq}after")
    assert shown == "beforeafter", repr(shown)


def test_printable_keeps_text_tabs_and_newlines_and_repairs_bad_bytes() -> None:
    assert printable("a\tb\nc — é 中") == "a\tb\nc — é 中"
    assert printable("x\r\ny") == "x\ny"
    assert printable("bad \udcff") == "bad \ufffd"
    assert printable("one\ntwo\rthree", one_line=True) == "one two three"


def test_todos_render_has_no_escape_and_no_forged_line() -> None:
    content = "".join(HOSTILE) + "do it\n[x] 2: a forged item (high)"
    text = render([Todo(id="1", content=content, status="pending").model_dump()])
    assert text.count("\n") == 0
    assert not any(0x80 <= ord(c) <= 0x9F or (ord(c) < 0x20 and c != "\t") for c in text)
    assert "\x1b" not in text and text.startswith("[ ] 1: ")


def test_agent_todos_through_a_closed_pipe_prints_no_traceback(tmp_path: Path) -> None:
    """`agent todos RUN | head -1`: the reader goes after one line, and the rest of the list meets
    a closed pipe. The list's bounds (50 items of 500 characters, state/todos.py) keep it under a
    default pipe's 64 KiB, so the pipe is cut to one page to make the write meet it."""
    import fcntl

    run = Run.create(tmp_path, "r")
    todos = [Todo(id=str(i), content="x" * 400, status="pending") for i in range(50)]
    run.write_todos(todos)  # 20 KB of output: five times what the pipe holds
    run.close()
    agent = Path(sys.executable).parent / "agent"
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    with (tmp_path / "err").open("wb") as err:
        proc = subprocess.Popen(
            [str(agent), "todos", str(run.path)],
            stdout=write_end,
            stderr=err,
            env={**os.environ, "PYTHONUNBUFFERED": "0"},
        )
        os.close(write_end)
        with os.fdopen(read_end) as out:
            first = out.readline()  # closed here, as head closes it
        assert proc.wait(timeout=120) is not None
    assert first.startswith("[ ] 0: xxx")
    assert (tmp_path / "err").read_text() == ""
