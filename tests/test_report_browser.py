"""report.html in a real browser (headless Chromium, Debian's `chromium` package; tests/browser.py):
no text overflows its box, every deploy command is there whole with no flag broken across two
lines, and every chart loads. On the newcomer's recorded lab run (tests/sessions/autopilot, a
two-configuration concurrency policy: two deploy commands) and on the report tests' recorded
campaign (three charts, a policy too), at a desktop, a half-screen and a narrow width.

Marked `browser`: left out of the README's run, run by .ci/run's browser stage, which installs
Chromium. Without Chromium these tests fail (tests/browser.BrowserError), they never skip."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from agent.report import build, deploy, gather, render_files
from agent.report.figures import Figures
from agent.report.render import Code, Image, Table, to_html
from state.events import read_events
from tests.browser import LAB, BrowserError, measure
from tests.report_session import write_session

pytestmark = pytest.mark.browser

DESKTOP, HALF, NARROW = 1280, 800, 500  # 500: the narrowest window headless Chromium opens


def rendered(folder: Path) -> Figures:
    f = gather(folder, read_events(folder / "events.jsonl").events)
    render_files(f, folder)
    return f


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Figures]:
    """The newcomer's lab run, its events only (a session replayed elsewhere)."""
    folder = tmp_path_factory.mktemp("lab") / "lab"
    folder.mkdir()
    shutil.copy(LAB, folder / "events.jsonl")
    return folder, rendered(folder)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Figures]:
    """The report tests' recorded campaign, with its result files: every chart is drawn."""
    folder = write_session(tmp_path_factory.mktemp("campaign") / "campaign")
    return folder, rendered(folder)


@pytest.fixture(params=["lab", "campaign"])
def report(request: pytest.FixtureRequest) -> tuple[Path, Figures]:
    folder_and_figures: tuple[Path, Figures] = request.getfixturevalue(request.param)
    return folder_and_figures


@pytest.mark.parametrize("width", [DESKTOP, HALF, NARROW])
def test_no_text_overflows_its_box(report: tuple[Path, Figures], width: int) -> None:
    folder, _ = report
    v = measure(folder / "report.html", folder / "browser", width)
    assert v.width == width
    assert v.overflow == [], "\n".join(f"{o['what']} - {o['why']}" for o in v.overflow)
    if width == DESKTOP:  # a desktop window shows every table whole, nothing to scroll to
        assert v.scrolled == [], v.scrolled


@pytest.mark.parametrize("width", [DESKTOP, HALF, NARROW])
def test_the_deploy_commands_are_whole(report: tuple[Path, Figures], width: int) -> None:
    folder, f = report
    p = deploy.plan(f)
    assert p is not None and len(p.servers) == 2, "a two-configuration policy: two commands"
    v = measure(folder / "report.html", folder / "browser", width)
    for s in p.servers:
        shown = [c for c in v.commands if _words(c["text"]) == s.argv]
        assert shown, f"{s.label}'s command is not in the page whole: {shlex.join(s.argv)}"
        for c in shown:
            assert c["whole"], f"{s.label}'s command scrolls out of its box at {width} px"
            assert c["broken"] == [], f"flags broken across lines at {width} px: {c['broken']}"
            assert c["aligned"], f"{s.label}'s command: its lines start at different margins"
    if width < DESKTOP:  # the check is not empty: at this width the commands do wrap
        assert all(c["lines"] > 1 for c in v.commands if _words(c["text"]) == p.servers[0].argv)


def test_the_charts_load(report: tuple[Path, Figures]) -> None:
    folder, f = report
    charts = [b.alt for b in build(f) if isinstance(b, Image)]
    assert charts
    v = measure(folder / "report.html", folder / "browser", DESKTOP)
    assert [i["what"] for i in v.images] == charts
    for i in v.images:
        assert i["decoded"], f"{i['what']} did not load"
        assert i["width"] > 300 and i["height"] > 200, i  # drawn at a readable size


# --- the check can fail -------------------------------------------------------------------------
def page(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "page.html"
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head><body>{body}</body>")
    return path


def test_it_finds_text_that_overflows_a_narrow_box(tmp_path: Path) -> None:
    v = measure(page(tmp_path, '<div style="width: 120px">' + "x" * 200 + "</div>"), tmp_path)
    assert [o["what"] for o in v.overflow] == ["div: " + "x" * 80]
    assert v.overflow[0]["why"].endswith("px wide in a 120 px box")


def test_it_finds_a_table_wider_than_the_window(tmp_path: Path) -> None:
    row = "<tr>" + "".join(f"<td>column-{i}-{'w' * 20}</td>" for i in range(12)) + "</tr>"
    v = measure(page(tmp_path, f"<table>{row}</table>"), tmp_path, HALF)
    assert any(
        o["what"].startswith("table:") and "window is 800 px" in o["why"] for o in v.overflow
    )


def test_it_finds_a_flag_broken_across_two_lines(tmp_path: Path) -> None:
    # a browser breaks at the hyphens inside a flag: without the report's spans, it does here
    command = "python -m sim " + " ".join(f"--some-long-flag-name-{i} {i}" for i in range(8))
    pre = f'<pre style="width: 150px; white-space: pre-wrap">{command}</pre>'
    v = measure(page(tmp_path, pre), tmp_path)
    assert v.commands[0]["lines"] > 2 and v.commands[0]["broken"], v.commands
    # the report's own rendering of the same command keeps each flag on one line
    ours = tmp_path / "ours"
    ours.mkdir()
    (ours / "page.html").write_text(to_html([Code(command)], "t"))
    v = measure(ours / "page.html", ours, 500)
    assert v.commands[0]["lines"] > 2 and v.commands[0]["broken"] == []


def test_it_finds_a_command_cut_off_and_an_image_that_did_not_load(tmp_path: Path) -> None:
    body = (
        '<pre style="width: 60px; white-space: pre; overflow: hidden">agent run --goal x</pre>'
        '<img alt="chart" src="data:image/png;base64,bm90IGEgcG5n">'
    )
    v = measure(page(tmp_path, body), tmp_path)
    assert v.commands[0]["whole"] is False
    assert [o["what"] for o in v.overflow] == ["pre: agent run --goal x"]  # cut off, no scroll
    assert v.images == [{"what": "chart", "width": v.images[0]["width"],
                         "height": v.images[0]["height"], "decoded": False}]  # fmt: skip


def test_a_wide_table_scrolls_in_its_own_box_not_the_page(tmp_path: Path) -> None:
    row = ["column-" + "w" * 20] * 12
    (tmp_path / "page.html").write_text(to_html([Table(row, [row])], "t"))
    v = measure(tmp_path / "page.html", tmp_path, HALF)
    assert v.overflow == [] and v.scrolled  # the reader scrolls the table, the page stays put


def test_no_chromium_is_a_failure_that_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrowserError, match="apt-get install chromium"):
        measure(page(tmp_path, "hi"), tmp_path)


def _words(text: str) -> list[str]:
    return shlex.split(text)
