"""Progress read from a log: model-load fractions, tqdm bars, "step 120/500", rates and ETAs."""

from __future__ import annotations

import re
from dataclasses import dataclass

PERCENT = re.compile(r"(\d{1,3}(?:\.\d+)?)\s?%")
FRACTION = re.compile(r"(?<![\d./])(\d+)\s?/\s?(\d+)(?![\d./]|\s?(?:it|s)\b)")
RATE = re.compile(
    r"(\d+(?:\.\d+)?)\s?((?:it|s|samples|tok|tokens|steps|items|B|[KMG]i?B)/s|s/it)\b"
)
ETA = re.compile(r"(?:ETA|eta|remaining)[:=\s]+([\dhms:. ]+\d[hms]?)|<(\d+:\d+(?::\d+)?)")


@dataclass
class Progress:
    line: str
    fraction: float | None = None
    rate: str | None = None
    eta: str | None = None


def parse_line(line: str) -> Progress | None:
    """The progress a line shows, or None when it shows none."""
    text = line.strip()
    fraction = None
    m = FRACTION.search(text)
    if m and int(m.group(2)) > 0 and int(m.group(1)) <= int(m.group(2)):
        fraction = int(m.group(1)) / int(m.group(2))
    p = PERCENT.search(text)
    if p and float(p.group(1)) <= 100:
        fraction = float(p.group(1)) / 100
    rate = RATE.search(text)
    eta = ETA.search(text)
    if fraction is None and eta is None:
        return None
    return Progress(
        line=text[:300],
        fraction=fraction,
        rate=f"{rate.group(1)} {rate.group(2)}" if rate else None,
        eta=(eta.group(1) or eta.group(2)).strip() if eta else None,
    )


def last_progress(text: str) -> Progress | None:
    """The latest progress line of a log excerpt (tqdm's carriage returns count as lines)."""
    for line in reversed(re.split(r"[\r\n]+", text)):
        found = parse_line(line)
        if found is not None:
            return found
    return None


def seconds(eta: str) -> float:
    """An ETA as a log writes it, in seconds: '1:13:09', '15:51', '1m05s', '2h10m'."""
    if ":" in eta:
        total = 0.0
        for part in eta.split(":"):
            total = total * 60 + float(part or 0)
        return total
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([hms])", eta))
