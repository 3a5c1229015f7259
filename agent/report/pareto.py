"""What people look at beside throughput vs concurrency: latency against throughput per
configuration, the Pareto chart of tokens/s per user against tokens/s per GPU (vLLM's
plot_pareto), and goodput per level when an SLO was set. Drawn like chart.py (Agg, no pyplot);
used by `agent bench --json` (PNG files beside the JSON) and the report (its own section).

Per point: tokens/s per GPU = output_throughput / GPUs (the server command's --tp x --dp, 1 when
unknown); tokens/s per user = output_throughput / achieved_concurrency (what one stream of the
requests in flight received). The Pareto front joins the points no other point beats on both.
With a [cost] price, a third chart: $ per million output tokens (tools/domain/cost.py) against
median TPOT, its front the points no other beats on both (cheaper and quicker).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from agent.report.chart import DPI, OTHERS, colours
from agent.report.figures import Figures
from agent.report.outcome import chart_curves
from agent.report.render import Block, Heading, Image, Para
from tools.bench.level_traffic import level_name
from tools.bench.results import gpus_used
from tools.bench.schema import BenchResult
from tools.domain.cost import CostConfig, usd_per_mtok

LATENCY_FILE, PARETO_FILE = "report-latency.png", "report-pareto.png"  # in the report
COST_FILE = "report-cost.png"  # with a [cost] price only


def served(result: BenchResult) -> list[dict[str, Any]]:
    """The points that measured something, as dicts (extra keys such as request_rate kept)."""
    return [p.model_dump() for p in result.points if not p.level_failed and p.output_throughput]


@dataclass
class Curve:
    """One configuration in the latency and Pareto charts: a point per level it served."""

    label: str
    points: list[dict[str, Any]]
    gpus: int
    colour: str


def result_curves(series: list[tuple[str, BenchResult]]) -> list[Curve]:
    """`agent bench --json`: each result its own curve."""
    return [
        Curve(label, served(r), gpus_used(r), OTHERS[i % len(OTHERS)])
        for i, (label, r) in enumerate(series)
    ]


def report_curves(f: Figures) -> list[Curve]:
    """The report's: the configurations of its throughput chart, in its colours, each with every
    level it served over all of its results (Configuration.served_points)."""
    chosen = chart_curves(f)
    return [
        Curve(label, c.served_points(), f.gpus(c), colour)
        for (label, c, _), colour in zip(chosen, colours([r for *_, r in chosen]), strict=True)
    ]


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other beats on both axes (higher is better on both), by x."""
    front: list[tuple[float, float]] = []
    for x, y in sorted(points, key=lambda p: (-p[0], -p[1])):
        if not front or y > front[-1][1]:
            front.append((x, y))
    return sorted(front)


def per_user(p: dict[str, Any]) -> float:
    c = float(p.get("achieved_concurrency") or 0.0)
    return float(p["output_throughput"]) / c if c > 0 else 0.0


def latency_figure(curves: list[Curve], title: str = "Latency vs throughput") -> Any:
    """Median TTFT and TPOT against output throughput, one line per configuration, each point
    named by its level; a third panel of goodput per level when any point has an SLO's goodput."""
    goodput = any(p.get("request_goodput") is not None for cv in curves for p in cv.points)
    fig, axes = _figure(3 if goodput else 2)
    for cv in curves:
        pts, color, label = cv.points, cv.colour, cv.label
        if not pts:
            continue
        xs = [p["output_throughput"] for p in pts]
        for ax, key in zip(axes, ("median_ttft_ms", "median_tpot_ms"), strict=False):
            ax.plot(xs, [p.get(key, 0.0) for p in pts], marker="o", color=color, label=label)
            for x, p in zip(xs, pts, strict=True):
                ax.annotate(level_name(p), (x, p.get(key, 0.0)), fontsize=7, alpha=0.7)
        if goodput:
            names = [level_name(p) for p in pts]
            axes[2].plot(names, [p.get("request_goodput") or 0.0 for p in pts], marker="o",
                         color=color, label=f"{label} goodput")  # fmt: skip
            axes[2].plot(names, [p.get("request_throughput", 0.0) for p in pts], linestyle=":",
                         color=color, label=f"{label} req/s")  # fmt: skip
    axes[0].set_ylabel("median TTFT (ms)")
    axes[1].set_ylabel("median TPOT (ms)")
    for ax in axes[:2]:
        ax.set_xlabel("output throughput (tokens/s)")
    if goodput:
        axes[2].set_ylabel("requests/s")
        axes[2].set_xlabel("level")
        axes[2].tick_params(axis="x", labelsize=7, rotation=30)
        axes[2].legend(fontsize=7, frameon=False)
    return _finish(fig, axes, title)


def pareto_figure(curves: list[Curve], title: str = "Tokens/s per user vs tokens/s per GPU") -> Any:
    fig, axes = _figure(1)
    ax = axes[0]
    everything: list[tuple[float, float]] = []
    for cv in curves:
        xy = [(per_user(p), p["output_throughput"] / cv.gpus) for p in cv.points]
        everything += xy
        ax.scatter([x for x, _ in xy], [y for _, y in xy], color=cv.colour,
                   label=f"{cv.label} ({cv.gpus} GPU{'s' if cv.gpus > 1 else ''})",
                   zorder=3)  # fmt: skip
        for (x, y), p in zip(xy, cv.points, strict=True):
            ax.annotate(level_name(p), (x, y), fontsize=7, alpha=0.7)
    front = pareto_front(everything)
    if front:  # black: green is the winner's colour
        ax.plot([x for x, _ in front], [y for _, y in front], color="#000000", linewidth=1.4,
                linestyle="-.", label="Pareto front", zorder=2)  # fmt: skip
    ax.set_xlabel("tokens/s per user (output throughput / streams in flight)")
    ax.set_ylabel("tokens/s per GPU")
    return _finish(fig, axes, title)


def cost_figure(
    curves: list[Curve], price: CostConfig, title: str = "Serving cost vs latency"
) -> Any:
    """$ per million output tokens (tools/domain/cost.py) against median TPOT, a point per level
    (a point without a TPOT cannot be placed: left out); the front joins the points no other
    beats on both - cheaper and quicker - lower being better on both axes."""
    fig, axes = _figure(1)
    ax = axes[0]
    everything: list[tuple[float, float]] = []
    for cv in curves:
        placed = [
            (float(p["median_tpot_ms"]), usd, p)
            for p in cv.points
            if (p.get("median_tpot_ms") or 0) > 0
            if (usd := usd_per_mtok(price, cv.gpus, p["output_throughput"])) is not None
        ]
        everything += [(x, y) for x, y, _ in placed]
        ax.scatter([x for x, _, _ in placed], [y for _, y, _ in placed], color=cv.colour,
                   label=f"{cv.label} ({cv.gpus} GPU{'s' if cv.gpus > 1 else ''})",
                   zorder=3)  # fmt: skip
        for x, y, p in placed:
            ax.annotate(level_name(p), (x, y), fontsize=7, alpha=0.7)
    front = [(-x, -y) for x, y in pareto_front([(-x, -y) for x, y in everything])]
    if front:
        ax.plot([x for x, _ in front], [y for _, y in front], color="#000000", linewidth=1.4,
                linestyle="-.", label="Pareto front", zorder=2)  # fmt: skip
    ax.set_xlabel("median TPOT (ms per output token)")
    dollars = f"$ per million output tokens ({price.describe()})"
    ax.set_ylabel(dollars.replace("$", r"\$"))  # a bare $ starts matplotlib's mathtext
    return _finish(fig, axes, title)


def chart_files(series: list[tuple[str, BenchResult]]) -> list[tuple[str, bytes]]:
    """("latency" | "pareto", PNG) of the two charts of `agent bench --json`'s results ([] when
    nothing was served)."""
    return curve_files(result_curves(series))


def curve_files(curves: list[Curve]) -> list[tuple[str, bytes]]:
    if not any(cv.points for cv in curves):
        return []
    return [("latency", png(latency_figure(curves))), ("pareto", png(pareto_figure(curves)))]


def png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", pad_inches=0.15)
    return buf.getvalue()


def section(f: Figures) -> list[Block]:
    """The report's section: the configurations of its throughput chart, every level each
    served."""
    curves = report_curves(f)
    files = curve_files(curves)
    if not files:
        return []
    text = (
        "Median TTFT and TPOT against output throughput (each point a level), and tokens/s per "
        "user against tokens/s per GPU: a configuration on the front (the black line) is not "
        "beaten on both at once. Each configuration has the same colour in every chart."
    )
    if any(p.get("request_goodput") is not None for cv in curves for p in cv.points):
        text += " Goodput counts the requests within the SLO."
    out: list[Block] = [
        Heading(2, "Latency, throughput and the Pareto front"),
        Para(text),
        Image(LATENCY_FILE, files[0][1], "latency vs throughput"),
        Image(PARETO_FILE, files[1][1], "tokens/s per user vs tokens/s per GPU"),
    ]
    if f.price is not None:
        out.append(
            Para(
                f"What a million output tokens cost to serve at {f.price.describe()} against "
                "median TPOT: on the front, nothing is both cheaper and quicker (the table per "
                "level is in Cost, below)."
            )
        )
        out.append(Image(COST_FILE, png(cost_figure(curves, f.price)), "$ per Mtok vs latency"))
    return out


def _figure(panels: int) -> tuple[Any, list[Any]]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.6 * panels + 0.8, 4.6), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig, [fig.add_subplot(1, panels, i + 1) for i in range(panels)]


def _finish(fig: Any, axes: list[Any], title: str) -> Any:
    for ax in axes:
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes[0].legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig
