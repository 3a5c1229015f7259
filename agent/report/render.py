"""The report as a list of blocks, and its two renderings: Markdown (report.md, the chart beside
it) and one self-contained HTML file (report.html, the chart embedded as base64)."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field


@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Para:
    text: str  # inline markup: **bold** and `code`


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    right: set[int] = field(default_factory=set)  # numeric columns, right-aligned


@dataclass
class Links:
    items: list[tuple[str, str]]  # (relative path, what it is), a bulleted list of links


@dataclass
class Code:
    text: str


@dataclass
class Image:
    file: str  # beside report.md
    png: bytes
    alt: str


Block = Heading | Para | Bullets | Links | Table | Code | Image


def to_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append("#" * b.level + " " + b.text)
        elif isinstance(b, Para):
            out.append(b.text)
        elif isinstance(b, Bullets):
            out.append("\n".join(f"- {i}" for i in b.items))
        elif isinstance(b, Links):
            out.append("\n".join(f"- [`{href}`]({href}): {text}" for href, text in b.items))
        elif isinstance(b, Table):
            cells = [[_md_cell(c) for c in row] for row in [b.headers, *b.rows]]
            rule = ["---:" if i in b.right else "---" for i in range(len(b.headers))]
            lines = [cells[0], rule, *cells[1:]]
            out.append("\n".join("| " + " | ".join(r) + " |" for r in lines))
        elif isinstance(b, Code):
            fence = "````" if "```" in b.text else "```"
            out.append(f"{fence}\n{b.text.rstrip()}\n{fence}")
        elif isinstance(b, Image):
            out.append(f"![{b.alt}]({b.file})")
    return "\n\n".join(out).rstrip() + "\n"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


INLINE = re.compile(r"`([^`]+)`|\*\*(.+?)\*\*")


# what a browser must not break inside (it breaks at hyphens and spaces): a flag with its value
# ("--cuda-graph-max-bs 256"), a ratio range ("0.98-0.99x"), a level bound ("C &lt;= 10")
UNBROKEN = re.compile(
    r"(?<![\w-])--?[A-Za-z][\w.-]*(?: (?!--)[^\s,;()&<]+)?"
    r"|\d[\d.,]*-\d[\d.,]*x"
    r"|C (?:&[lg]t;)?= ?\d+"
)


def _text(text: str) -> str:
    """Escaped text whose units stay on one line: flags, ranges, and a number and its %."""
    return _unbroken(html.escape(text, quote=False).replace(" %", "\u00a0%"))


def _unbroken(escaped: str) -> str:
    return UNBROKEN.sub(lambda m: f'<span class="nw">{m.group(0)}</span>', escaped)


def _inline(text: str) -> str:
    out, pos = [], 0
    for m in INLINE.finditer(text):
        out.append(_text(text[pos : m.start()]))
        if m.group(1) is not None:
            out.append(f"<code>{html.escape(m.group(1))}</code>")
        else:
            out.append(f"<strong>{_text(m.group(2))}</strong>")
        pos = m.end()
    out.append(_text(text[pos:]))
    return "".join(out)


STYLE = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f;
       max-width: 60rem; margin: 2rem auto; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2rem; border-bottom: 1px solid
#ddd; padding-bottom: .2rem; } code, pre { font: 13px/1.4 ui-monospace, Menlo, Consolas,
monospace; background: #f4f4f6; border-radius: 4px; } code { padding: 0 .25rem; }
pre { padding: .7rem; overflow-x: auto; white-space: pre-wrap; }
pre code { padding: 0; }  /* inline code's padding would indent a command's first line only */
table { border-collapse: collapse; margin: .6rem 0; font-size: 14px; }
th, td { border: 1px solid #ddd; padding: .25rem .55rem; } th { background: #f4f4f6; }
td.r { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
img { max-width: 100%; } .nw { white-space: nowrap; } .wide { overflow-x: auto; }
"""


def to_html(blocks: list[Block], title: str) -> str:
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
    ]
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            out.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Links):
            items = (
                f'<li><a href="{html.escape(href)}"><code>{html.escape(href)}</code></a>: '
                f"{_inline(text)}</li>"
                for href, text in b.items
            )
            out.append("<ul>" + "".join(items) + "</ul>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{_inline(h)}</th>" for h in b.headers)
            rows = "".join(
                "<tr>"
                + "".join(
                    f'<td class="r">{_inline(c)}</td>' if i in b.right else f"<td>{_inline(c)}</td>"
                    for i, c in enumerate(row)
                )
                + "</tr>"
                for row in b.rows
            )
            # wider than a narrow window: the table scrolls in its own box, the page stays put
            table = f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
            out.append(f'<div class="wide">{table}</div>')
        elif isinstance(b, Code):  # a long command wraps between flags, never inside one
            out.append(f"<pre><code>{_unbroken(html.escape(b.text.rstrip()))}</code></pre>")
        elif isinstance(b, Image):
            data = base64.b64encode(b.png).decode()
            alt = html.escape(b.alt)
            out.append(f'<p><img alt="{alt}" src="data:image/png;base64,{data}"></p>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"
