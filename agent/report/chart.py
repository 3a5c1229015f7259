"""The report's chart: output throughput against concurrency (log x) for the baseline, the winner
and the notable contenders, with the crossover marked and the winner's share of the bandwidth
floor written at its points (docs/physics.md). Agg backend, no pyplot global state."""

from __future__ import annotations

import io
import itertools
import math
from typing import TYPE_CHECKING

from agent.report.measured import Configuration

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

WIDTH_IN, HEIGHT_IN, DPI = 9.0, 5.2, 110
OTHERS = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]  # no green, grey
BASELINE_COLOUR, WINNER_COLOUR = "#444444", "#1a9850"


def colours(roles: list[str]) -> list[str]:
    """One colour per configuration, in the order of the report's curves (outcome.chart_curves),
    the same in every chart of the report: the baseline grey, the winner green, the rest in turn."""
    others = iter(OTHERS * (len(roles) // len(OTHERS) + 1))
    named = {"baseline": BASELINE_COLOUR, "winner": WINNER_COLOUR}
    return [named.get(role) or next(others) for role in roles]


def crossing_pairs(ta: dict[int, float], tb: dict[int, float]) -> list[tuple[int, int]]:
    """The pairs of neighbouring levels both served between which `a` and `b` swap places."""
    ta = {c: v for c, v in ta.items() if v > 0}
    tb = {c: v for c, v in tb.items() if v > 0}
    common = sorted(set(ta) & set(tb))
    return [
        (lo, hi)
        for lo, hi in itertools.pairwise(common)
        if (ta[lo] - tb[lo]) * (ta[hi] - tb[hi]) < 0
    ]


def crossing_points(ta: dict[int, float], tb: dict[int, float]) -> list[float]:
    """Where `a` and `b` (output tok/s per level) swap places, drawn at the geometric midpoint
    of the two levels."""
    return [math.sqrt(lo * hi) for lo, hi in crossing_pairs(ta, tb)]


def draw(
    curves: list[tuple[str, Configuration, str]],
    crossover: list[float],
    title: str,
) -> bytes:
    """PNG bytes of `plot`."""
    buf = io.BytesIO()
    plot(curves, crossover, title).savefig(buf, format="png", bbox_inches="tight", pad_inches=0.15)
    return buf.getvalue()


def plot(
    curves: list[tuple[str, Configuration, str]],
    crossover: list[float],
    title: str,
) -> Figure:
    """`curves` is (legend label, configuration, role), role baseline | winner | other |
    screened (measured on a few levels only: points, so the eye does not read a curve into it)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    levels: set[int] = set()
    for (label, config, role), colour in zip(curves, colours([r for *_, r in curves]), strict=True):
        points = {c: v for c, v in config.sweep.items() if v > 0}
        if not points:
            continue
        xs = sorted(points)
        levels.update(xs)
        style = {
            "baseline": {"linestyle": "--", "linewidth": 2.0, "marker": "s"},
            "winner": {"linewidth": 2.8, "marker": "o", "zorder": 5},
            # measured at a few levels: points only, no line across the levels it skipped
            "screened": {"linestyle": "none", "marker": "D", "markersize": 6},
        }.get(role, {"linewidth": 1.4, "marker": ".", "alpha": 0.85})
        ax.plot(xs, [points[x] for x in xs], label=label, color=colour, **style)  # type: ignore[arg-type]
        if role == "winner":
            _shares(ax, config, points, colour)
    ax.set_xscale("log")
    if levels:
        ticks = sorted(levels)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(ScalarFormatter())
        pad = 1.25
        ax.set_xlim(ticks[0] / pad, ticks[-1] * pad)
    for i, x in enumerate(crossover):
        ax.axvline(
            x, color="#d73027", linestyle=":", linewidth=1.8,
            label="crossover" if i == 0 else None,
        )  # fmt: skip
        ax.annotate(
            f"crossover\nC≈{x:.0f}",
            xy=(x, 1.0), xycoords=("data", "axes fraction"),
            xytext=(4, -4), textcoords="offset points", va="top", color="#d73027", fontsize=8,
        )  # fmt: skip
    ax.set_xlabel("concurrency (requests in flight, log scale)")
    ax.set_ylabel("output throughput (tokens/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    # below the axes: a legend inside would hide the curves it names
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def _shares(ax: Axes, config: Configuration, points: dict[int, float], colour: str) -> None:
    """Each level's share of the bandwidth floor (docs/physics.md) written above the winner's
    point; nothing where the box was not known."""
    said = False
    for level, tok_s in sorted(points.items()):
        share = config.floor_share(level)
        if share is None:
            continue
        text = f"{share:.0%}" + ("\nof floor" if not said else "")
        ax.annotate(
            text, xy=(level, tok_s), xytext=(0, 7), textcoords="offset points",
            ha="center", va="bottom", fontsize=7, color=colour,
        )  # fmt: skip
        said = True
