"""An HTML page measured in headless Chromium (Debian's `chromium` package): a copy of the page
with a small script appended that, once the page has loaded, lays it out at a given window width
and writes a JSON verdict into the DOM; `chromium --headless --dump-dom` prints that DOM and we
read the verdict back. No driver, no DevTools protocol: one subprocess with a deadline.

The verdict (see MEASURE):
- overflow: boxes whose content is wider than the box and that do not scroll it (text spilling
  out or cut off), and boxes that reach past the window's right edge (the page scrolls sideways);
- scrolled: boxes that do scroll sideways and need to (a wide table in a narrow window);
- commands: every <pre>, its rendered text, whether its box shows all of it (no sideways scroll),
  the flags (a flag with its value) that the browser broke across two lines, its line count, and
  whether every line starts at the same margin (no first line indented by inline padding);
- images: every <img> and <svg>, its rendered size and, for an image, whether it decoded.

docs/report.md ("Checked in a browser") says how to run it.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LAB = Path(__file__).parent / "sessions" / "autopilot" / "lab.jsonl"  # the newcomer's lab run
DEADLINE_S = 180.0  # a cold Chromium start on a loaded 2-core box takes seconds, not minutes

MEASURE = r"""
<script>
window.addEventListener("load", () => {
  const name = (el) => {
    const text = (el.innerText || el.textContent || "").trim().replace(/\s+/g, " ");
    return el.tagName.toLowerCase() + (el.className ? "." + el.className : "") +
      ": " + text.slice(0, 80);
  };
  const overflow = [], scrolled = [];
  const right = document.documentElement.clientWidth;
  const scrolls = (el) => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
  const inScroller = (el) => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (scrolls(p)) return true;
    }
    return false;
  };
  for (const el of document.body.querySelectorAll("*")) {
    if (el.closest("#browser-verdict")) continue;
    const s = getComputedStyle(el);
    if (s.display === "inline" || s.display === "none") continue;  // inline boxes have no width
    const wider = el.scrollWidth > el.clientWidth + 1;
    const why = "content " + el.scrollWidth + " px wide in a " + el.clientWidth + " px box";
    if (wider) (scrolls(el) ? scrolled : overflow).push({what: name(el), why: why});
    const r = el.getBoundingClientRect();
    // inside a box that scrolls sideways, a reader scrolls to it: that box is judged instead;
    // of nested boxes past the edge, the outermost is named
    const past = (e) => e.getBoundingClientRect().right > right + 1;
    if (r.width > 0 && past(el) && !past(el.parentElement) && !inScroller(el)) {
      overflow.push({what: name(el), why: "reaches " + Math.round(r.right) +
                     " px, the window is " + right + " px wide"});
    }
  }
  // a flag and its value, as the report's render.UNBROKEN keeps them: one line each
  const FLAG = /(?<![\w-])--?[A-Za-z][\w.-]*(?: (?!-)[^\s,;()<]+)?/g;
  const commands = [];
  for (const pre of document.querySelectorAll("pre")) {
    const nodes = [];
    let text = "";
    const walk = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      nodes.push([n, text.length]);
      text += n.data;
    }
    const at = (i) => {  // the text node and offset of character i
      let k = nodes.length - 1;
      while (k > 0 && nodes[k][1] > i) k--;
      return [nodes[k][0], i - nodes[k][1]];
    };
    const broken = [];
    for (const m of text.matchAll(FLAG)) {
      const range = document.createRange();
      range.setStart(...at(m.index));
      range.setEnd(...at(m.index + m[0].length));
      const tops = new Set([...range.getClientRects()].map((q) => Math.round(q.top)));
      if (tops.size > 1) broken.push(m[0]);
    }
    const starts = new Map();  // line top -> where its text starts: every line at one margin
    for (const [n] of nodes) {
      const r = document.createRange();
      r.selectNodeContents(n);  // the text's own boxes, not an inline element's padding
      for (const q of r.getClientRects()) {
        if (q.width === 0) continue;
        const top = Math.round(q.top);
        starts.set(top, Math.min(starts.get(top) ?? Infinity, q.left));
      }
    }
    const lefts = [...starts.values()];
    commands.push({text: pre.innerText, whole: pre.scrollWidth <= pre.clientWidth + 1,
                   broken: broken, lines: starts.size,
                   aligned: Math.max(...lefts) - Math.min(...lefts) <= 1});
  }
  const images = [];
  for (const el of document.querySelectorAll("img, svg")) {
    const r = el.getBoundingClientRect();
    images.push({what: el.getAttribute("alt") || el.tagName.toLowerCase(),
                 width: r.width, height: r.height,
                 decoded: el.tagName.toLowerCase() === "svg" ||
                          (el.complete && el.naturalWidth > 0)});
  }
  const out = document.createElement("pre");
  out.id = "browser-verdict";
  out.hidden = true;
  out.textContent = JSON.stringify({width: right, overflow, scrolled, commands, images});
  document.body.appendChild(out);
});
</script>
"""

VERDICT = re.compile(r'<pre id="browser-verdict" hidden="">(.*?)</pre>', re.S)


class BrowserError(RuntimeError):
    """Chromium is missing, did not finish within its deadline, or printed no verdict."""


@dataclass
class Verdict:
    width: int
    overflow: list[dict[str, str]]
    scrolled: list[dict[str, str]]
    commands: list[dict[str, Any]]
    images: list[dict[str, Any]]


def chromium() -> str:
    """The browser's path; Debian's package installs /usr/bin/chromium."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise BrowserError(
            "no chromium on PATH: apt-get install chromium (the browser stage of .ci/run does)"
        )
    return path


def base_args(profile: Path, width: int, height: int) -> list[str]:
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start; the pages are
    # our own files. A profile of its own: two runs at once do not share a lock.
    return [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ]


def run_chromium(args: list[str], what: str) -> str:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=DEADLINE_S)
    except subprocess.TimeoutExpired as e:
        raise BrowserError(f"chromium did not {what} within {DEADLINE_S:.0f} s") from e
    if done.returncode != 0:
        raise BrowserError(f"chromium exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def measure(page: Path, work: Path, width: int = 1280, height: int = 2000) -> Verdict:
    """Lay out a copy of `page` in headless Chromium at `width` px and read the verdict."""
    work.mkdir(parents=True, exist_ok=True)
    copy = work / f"measured-{width}.html"
    text = page.read_text()
    copy.write_text(text.replace("</body>", MEASURE + "</body>", 1))
    # virtual time: the page's load (and its data: images' decoding) completes before the dump
    args = base_args(work / f"profile-{width}", width, height)
    dom = run_chromium(
        [*args, "--virtual-time-budget=10000", "--dump-dom", copy.as_uri()], "lay the page out"
    )
    m = VERDICT.search(dom)
    if m is None:
        raise BrowserError(f"no verdict in the page chromium printed ({len(dom)} characters)")
    return Verdict(**json.loads(html.unescape(m.group(1))))


def screenshot(page: Path, png: Path, profile: Path, width: int = 1280, height: int = 2000) -> None:
    """A PNG of the page's first `height` px at `width` px (the command docs/report.md shows)."""
    args = base_args(profile, width, height)
    run_chromium([*args, f"--screenshot={png}", page.as_uri()], "take the screenshot")
    if not png.exists():
        raise BrowserError(f"chromium wrote no screenshot at {png}")


def newcomer_report(folder: Path) -> Path:
    """Render the newcomer's recorded lab run (its events only) into folder; its report.html."""
    from agent.report import gather, render_files  # the report layer: only when rendering
    from state.events import read_events

    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(
        Path(__file__).parent / "sessions" / "autopilot" / "lab.jsonl", folder / "events.jsonl"
    )
    render_files(gather(folder, read_events(folder / "events.jsonl").events), folder)
    return folder / "report.html"


if __name__ == "__main__":
    # docs/images/report.png: python -m tests.browser docs/images/report.png
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        page = newcomer_report(Path(tmp) / "autopilot-lab")
        screenshot(page, Path(sys.argv[1]).resolve(), Path(tmp) / "profile")
