"""Rewrites the few bash forms bashlex cannot parse into equivalents it can, before the parse.

bashlex (0.18) reads `$'\\x2f'` as a variable, stops at `$((...))`, `[[ ]]`, the `time` keyword
and quoted here-document delimiters. Each rewrite keeps what the guard judges: `$'\\x2f'` becomes
`'/'`, `$((1+2))` becomes `0` (one holding a command substitution is refused), `[[`/`]]` become
`[`/`]`, `time cmd` becomes `\\time cmd` (a command word) and `<<'EOF'` becomes `<<EOF` with EOF
remembered as literal. A quote-aware scan: text in quotes and here-document bodies stays as is.
"""

from __future__ import annotations

import re

from tools.guard.command import Refused

BREAK = set(" \t\n;&|(){}!")
ESCAPES = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
HEREDOC = re.compile(r"<<(-?)([ \t]*)(?:'([^'\n]*)'|\"([^\"\n]*)\"|\\?([^\s;&|()<>]+))")
ANSI_NUMBER = re.compile(r"x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}")


def prepare(text: str) -> tuple[str, set[str]]:
    """The rewritten text and the delimiters of here-documents whose body is literal."""
    out: list[str] = []
    literal: set[str] = set()
    pending: list[tuple[str, bool]] = []  # here-documents whose body starts at the next newline
    i, n, quote = 0, len(text), ""
    while i < n:
        c = text[i]
        at_word = i == 0 or text[i - 1] in BREAK
        if quote == "'":
            j = text.find("'", i)
            j = n - 1 if j < 0 else j
            out.append(text[i : j + 1])
            i, quote = j + 1, ""
        elif c == "\\":
            out.append(text[i : i + 2])
            i += 2
        elif quote == '"' and c == '"':
            out.append(c)
            i, quote = i + 1, ""
        elif text.startswith("$((", i) or text.startswith("$[", i):
            i = _arithmetic(text, i, out)
        elif quote:
            out.append(c)
            i += 1
        elif c in "'\"":
            out.append(c)
            i, quote = i + 1, c
        elif text.startswith("$'", i):
            i = _ansi_c(text, i + 2, out)
        elif text.startswith("<<<", i):
            out.append("<<<")
            i += 3
        elif text.startswith("<<", i):
            i = _heredoc_operator(text, i, out, literal, pending)
        elif c == "\n" and pending:
            out.append(c)
            i = _heredoc_bodies(text, i + 1, out, pending)
        elif at_word and _word_at(text, i, "time"):
            out.append("\\time")
            i += 4
        elif at_word and (_word_at(text, i, "[[") or _word_at(text, i, "]]")):
            out.append(c)
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out), literal


def _word_at(text: str, i: int, word: str) -> bool:
    end = i + len(word)
    return text.startswith(word, i) and (end == len(text) or text[end] in " \t\n;&|)")


def _arithmetic(text: str, i: int, out: list[str]) -> int:
    """`$((...))` or `$[...]` -> `0`; one that runs a command inside is refused."""
    opening, closing = ("(", ")") if text[i + 1] == "(" else ("[", "]")
    depth, j = 0, i + 1
    while j < len(text):
        depth += {opening: 1, closing: -1}.get(text[j], 0)
        j += 1
        if depth == 0:
            break
    inner = text[i:j]
    if "$(" in inner[2:] or "`" in inner:
        raise Refused("a command substitution inside $((...)) is not judged; compute it apart")
    out.append("0")
    return j


def _ansi_c(text: str, i: int, out: list[str]) -> int:
    """`$'...'` decoded and written back single-quoted."""
    chars: list[str] = []
    while i < len(text) and text[i] != "'":
        if text[i] == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            m = ANSI_NUMBER.match(text, i + 1)
            if nxt == "c" and i + 2 < len(text):
                chars.append(chr(ord(text[i + 2]) & 0x1F))
                i += 3
            elif m:
                digits = m.group(0)
                base = 8 if digits[0].isdigit() else 16
                chars.append(chr(int(digits if base == 8 else digits[1:], base) % 0x110000))
                i = m.end()
            else:
                chars.append(ESCAPES.get(nxt, "\\" + nxt))
                i += 2
        else:
            chars.append(text[i])
            i += 1
    out.append("'" + "".join(chars).replace("'", "'\\''") + "'")
    return i + 1


def _heredoc_operator(
    text: str, i: int, out: list[str], literal: set[str], pending: list[tuple[str, bool]]
) -> int:
    m = HEREDOC.match(text, i)
    if not m:
        out.append("<<")
        return i + 2
    if m.group(5) is None:
        word, quoted = m.group(3) if m.group(3) is not None else m.group(4), True
    else:
        word, quoted = m.group(5), text[m.start(5) - 1] == "\\"
    if quoted:
        literal.add(word)
    pending.append((word, m.group(1) == "-"))
    out.append("<<" + m.group(1) + m.group(2) + word)
    return m.end()


def _heredoc_bodies(text: str, i: int, out: list[str], pending: list[tuple[str, bool]]) -> int:
    """Copy the pending here-document bodies verbatim, each up to its delimiter line."""
    for word, strip_tabs in pending:
        while i < len(text):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end + 1
            line = text[i:end]
            out.append(line)
            i = end
            if (line.lstrip("\t") if strip_tabs else line).rstrip("\n") == word:
                break
    pending.clear()
    return i
