"""The servers' own view over time (the `server_metrics` series the benchmark sampled from each
level's /metrics, tools/bench/server_metrics.py): for the baseline, the winner and the policy's
configurations, requests running and waiting, KV-cache use and the acceptance length across
their levels, one after the other; and a table per level. What a person reads to see why a level
saturates: running stops rising with the concurrency while waiting grows, or the KV cache fills.
Drawn like chart.py (Agg, no pyplot), each configuration in its colour of the other charts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.report.chart import DPI, colours
from agent.report.figures import Figures
from agent.report.measured import Configuration
from agent.report.outcome import chart_curves, in_policy, num, short_text
from agent.report.pareto import png
from agent.report.render import Block, Heading, Image, Para, Table
from tools.bench.schema import open_rate

OVER_TIME_FILE = "report-server-metrics.png"


@dataclass
class Level:
    """One level's series: its name ('C=8') and the columns sampled (t, running, ...)."""

    name: str
    series: dict[str, Any]

    def values(self, key: str) -> list[float]:
        return [v for v in self.series.get(key) or [] if isinstance(v, int | float)]


def levels(c: Configuration) -> list[Level]:
    """Each level the configuration measured with a series, the latest measurement of it, in
    level order (a sweep cut into several results, or measured again, is one line per level)."""
    latest: dict[str, tuple[tuple[int, float], dict[str, Any]]] = {}
    for r, from_file in zip(c.runs, c.from_file, strict=True):
        for p in r.points if from_file else []:
            point = p.model_dump()
            series = point.get("server_metrics")
            if isinstance(series, dict) and series.get("t"):
                order = (p.max_concurrency, open_rate(point) or 0.0)
                latest[p.name] = (order, series)
    return [Level(name, s) for name, (_, s) in sorted(latest.items(), key=lambda kv: kv[1][0])]


def chosen(f: Figures) -> list[tuple[str, Configuration, str, list[Level]]]:
    """The configurations the throughput chart shows that are the baseline, the winner or in
    the policy, with their sampled levels, in that chart's colours."""
    curves = chart_curves(f)
    out = []
    for (label, c, role), colour in zip(curves, colours([r for *_, r in curves]), strict=True):
        if role in ("baseline", "winner") or in_policy(f, c):
            found = levels(c)
            if found:
                out.append((label, c, colour, found))
    return out


PANELS = (
    ("requests", "requests on the server"),
    ("kv_cache", "KV-cache use (%)"),
    ("spec_acceptance", "acceptance length (tokens/step)"),
)


def figure(rows: list[tuple[str, Configuration, str, list[Level]]]) -> Any:
    """One row per configuration, a panel per quantity; the levels one after the other on the
    time axis (each from its own start), their boundaries dotted and named."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    panels = [
        (key, title)
        for key, title in PANELS
        if key == "requests" or any(lv.values(key) for *_, found in rows for lv in found)
    ]
    fig = Figure(figsize=(4.4 * len(panels) + 0.6, 2.9 * len(rows) + 0.6), dpi=DPI)
    FigureCanvasAgg(fig)
    for i, (label, _, colour, found) in enumerate(rows):
        axes = [fig.add_subplot(len(rows), len(panels), i * len(panels) + j + 1)
                for j in range(len(panels))]  # fmt: skip
        offset = 0.0
        for k, lv in enumerate(found):
            t = [offset + float(x) for x in lv.series["t"]]
            for ax, (key, _) in zip(axes, panels, strict=True):
                if key == "requests":
                    _line(ax, t, lv.series.get("running"), colour, "-", "running")
                    _line(ax, t, lv.series.get("waiting"), colour, ":", "waiting")
                elif key == "kv_cache":
                    kv = [None if v is None else 100 * v for v in lv.series.get(key) or []]
                    _line(ax, t, kv or None, colour, "-", None)
                else:
                    _line(ax, t, lv.series.get(key), colour, "-", None)
            for ax in axes:
                ax.axvline(offset, color="#999999", linestyle=":", linewidth=0.8, label="_boundary")
            axes[0].annotate(lv.name, xy=(offset, 1.0), xycoords=("data", "axes fraction"),
                             xytext=(2, -2 - 9 * (k % 2)), textcoords="offset points", va="top",
                             fontsize=7, color="#555555")  # fmt: skip
            offset = (t[-1] if t else offset) + float(lv.series.get("every_s") or 1.0)
        for ax, (key, title) in zip(axes, panels, strict=True):
            ax.set_title(f"{short_text(label, 48)}: {title}" if key == "requests" else title,
                         fontsize=9)  # fmt: skip
            if not [ln for ln in ax.lines if ln.get_label() != "_boundary"]:
                ax.text(0.5, 0.5, "not served", transform=ax.transAxes, ha="center",
                        color="#777777", fontsize=8)  # fmt: skip
            ax.set_ylim(bottom=0)
            top = ax.get_ylim()[1]  # room above for the level names (staggered) and the legend
            ax.set_ylim(0, top * 1.3 if top > 0 else 1)
            ax.grid(True, alpha=0.3)
            ax.tick_params(labelsize=7)
            if i == len(rows) - 1:
                ax.set_xlabel("seconds, the levels one after the other", fontsize=8)
        axes[0].legend(fontsize=7, frameon=False, loc="upper right")
    fig.suptitle("The servers' /metrics over each level", fontsize=11)
    fig.tight_layout()
    return fig


def _line(ax: Any, t: list[float], ys: Any, colour: str, style: str, label: str | None) -> None:
    if not ys or all(y is None for y in ys):
        return
    xs, vs = zip(*[(x, y) for x, y in zip(t, ys, strict=False) if y is not None], strict=True)
    named = label if label and not any(line.get_label() == label for line in ax.lines) else None
    ax.plot(xs, vs, color=colour, linestyle=style, linewidth=1.3, label=named)


def table(rows: list[tuple[str, Configuration, str, list[Level]]]) -> Table:
    out = []
    for _, c, _, found in rows:
        for lv in found:
            running, waiting = lv.values("running"), lv.values("waiting")
            kv, accept = lv.values("kv_cache"), lv.values("spec_acceptance")
            out.append([
                c.name,
                lv.name,
                str(len(lv.series["t"])),
                num(sum(running) / len(running)) if running else "-",
                f"{max(running):.0f}" if running else "-",  # counts of requests
                f"{max(waiting):.0f}" if waiting else "-",
                f"{100 * max(kv):.0f} %" if kv else "-",
                f"{sum(accept) / len(accept):.2f}" if accept else "-",
            ])  # fmt: skip
    headers = ["configuration", "level", "samples", "running mean", "running max"]
    headers += ["waiting max", "KV cache peak", "acceptance length"]
    return Table(headers, out, right={2, 3, 4, 5, 6, 7})


def section(f: Figures) -> list[Block]:
    """Nothing where no level of these configurations was sampled (a server without /metrics,
    results from before the sampling)."""
    rows = chosen(f)
    if not rows:
        return []
    text = (
        "What each server reported on its /metrics while the benchmark ran (sampled about "
        "twice a second): requests running (solid) and waiting (dotted), KV-cache use and, "
        "with speculation, the acceptance length. A level saturates where the running count "
        "stops rising with the concurrency and requests wait, or where the KV cache is full."
    )
    return [
        Heading(2, "Server metrics over time"),
        Para(text),
        Image(OVER_TIME_FILE, png(figure(rows)), "server metrics over each level"),
        table(rows),
    ]
