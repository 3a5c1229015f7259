"""Text from outside, made safe to store and to show.

`utf8`: a non-UTF-8 byte in an argument or the environment reaches Python as a lone surrogate
(surrogateescape); encoding it raised, which killed the run and every resume after it. It is
stored as U+FFFD instead. `printable`: todo text and tool output come from the model and from
programs; OSC, CSI, DCS and C1 control sequences in them would retitle, move, recolour or query a
supervisor's terminal in `agent todos` and `watch`. They are stripped for display.
"""

from __future__ import annotations

import re

# ESC-introduced: CSI (ESC [ ... final), OSC/DCS/SOS/PM/APC strings up to BEL or ST, any other
# two-character escape; then the 8-bit (C1) forms of the same, then the lone C0/C1 controls
SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -~]?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x9c)?"
)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
CONTROL_OR_NEWLINE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def repair(text: str) -> str:
    """`text` with every lone surrogate turned into U+FFFD (the bytes they stood for, decoded)."""
    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that no byte stood for (from JSON, say)
        data = text.encode("utf-8", "surrogatepass")
    return data.decode("utf-8", "replace")


def utf8(text: str) -> bytes:
    """UTF-8 bytes of `text`, never an error: see the module doc."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return repair(text).encode()


def printable(text: str, one_line: bool = False) -> str:
    """`text` without escape sequences or control characters (tabs kept; newlines kept unless
    `one_line`, where each becomes a space: a todo must not forge the lines after it)."""
    text = SEQUENCE.sub("", repair(text))
    if one_line:
        return CONTROL_OR_NEWLINE.sub(lambda m: " " if m.group() in "\n\r" else "", text)
    return CONTROL.sub("", text.replace("\r\n", "\n"))
