"""What people look at beside throughput vs concurrency: latency against throughput per
configuration, the Pareto chart of tokens/s per user against tokens/s per GPU (vLLM's
plot_pareto), and goodput per level when an SLO was set. Drawn like chart.py (Agg, no pyplot);
used by `agent bench --json` (PNG files beside the JSON) and the report (its own section).

Per point: tokens/s per GPU = output_throughput / GPUs (the server command's --tp x --dp, 1 when
unknown); tokens/s per user = output_throughput / achieved_concurrency (what one stream of the
requests in flight received). The Pareto front joins the points no other point beats on both.
"""

from __future__ import annotations

import io
from typing import Any

from agent.report.chart import DPI, OTHERS
from agent.report.figures import Figures
from agent.report.outcome import chart_curves
from agent.report.render import Block, Heading, Image, Para
from tools.bench.confighash import normalize_command
from tools.bench.level_traffic import level_name
from tools.bench.schema import BenchResult
from tools.domain.gpus import gpus_of

LATENCY_FILE, PARETO_FILE = "report-latency.png", "report-pareto.png"  # in the report
Series = list[tuple[str, BenchResult]]


def gpus_used(result: BenchResult) -> int:
    """GPUs a server used: as given (`agent bench --gpus`), else as its command's parallelism
    flags ask (tools.domain.gpus, as the planner counts them), else 1."""
    if result.server.gpus:
        return result.server.gpus
    if not result.server.command:
        return 1
    return gpus_of(normalize_command(result.server.command)["flags"])


def served(result: BenchResult) -> list[dict[str, Any]]:
    """The points that measured something, as dicts (extra keys such as request_rate kept)."""
    return [p.model_dump() for p in result.points if not p.level_failed and p.output_throughput]


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


def latency_png(series: Series, title: str = "Latency vs throughput") -> bytes:
    """Median TTFT and TPOT against output throughput, one line per configuration, each point
    named by its level; a third panel of goodput per level when any point has an SLO's goodput."""
    goodput = any(p.get("request_goodput") is not None for _, r in series for p in served(r))
    fig, axes = _figure(3 if goodput else 2)
    for i, (label, result) in enumerate(series):
        pts = served(result)
        if not pts:
            continue
        color = OTHERS[i % len(OTHERS)]
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


def pareto_png(series: Series, title: str = "Tokens/s per user vs tokens/s per GPU") -> bytes:
    fig, axes = _figure(1)
    ax = axes[0]
    everything: list[tuple[float, float]] = []
    for i, (label, result) in enumerate(series):
        gpus = gpus_used(result)
        pts = served(result)
        xy = [(per_user(p), p["output_throughput"] / gpus) for p in pts]
        everything += xy
        ax.scatter([x for x, _ in xy], [y for _, y in xy], color=OTHERS[i % len(OTHERS)],
                   label=f"{label} ({gpus} GPU{'s' if gpus > 1 else ''})", zorder=3)  # fmt: skip
        for (x, y), p in zip(xy, pts, strict=True):
            ax.annotate(level_name(p), (x, y), fontsize=7, alpha=0.7)
    front = pareto_front(everything)
    if front:
        ax.plot([x for x, _ in front], [y for _, y in front], color="#1a9850", linewidth=2.0,
                label="Pareto front", zorder=2)  # fmt: skip
    ax.set_xlabel("tokens/s per user (output throughput / streams in flight)")
    ax.set_ylabel("tokens/s per GPU")
    return _finish(fig, axes, title)


def chart_files(series: Series) -> list[tuple[str, bytes]]:
    """("latency" | "pareto", PNG) of the two charts ([] when nothing was served)."""
    if not any(served(r) for _, r in series):
        return []
    return [("latency", latency_png(series)), ("pareto", pareto_png(series))]


def section(f: Figures) -> list[Block]:
    """The report's section: the configurations of its throughput chart, their latest sweeps."""
    # a sweep rebuilt from its event (no result file) has throughputs, not latencies: left out
    series: Series = [
        (label, c.runs[-1]) for label, c, _ in chart_curves(f) if c.runs and c.from_file[-1]
    ]
    files = chart_files(series)
    if not files:
        return []
    text = (
        "Median TTFT and TPOT against output throughput (each point a level), and tokens/s per "
        "user against tokens/s per GPU: a configuration on the green front is not beaten on "
        "both at once."
    )
    if any(r.workload.slo_ms for _, r in series):
        text += " Goodput counts the requests within the SLO."
    return [
        Heading(2, "Latency, throughput and the Pareto front"),
        Para(text),
        Image(LATENCY_FILE, files[0][1], "latency vs throughput"),
        Image(PARETO_FILE, files[1][1], "tokens/s per user vs tokens/s per GPU"),
    ]


def _figure(panels: int) -> tuple[Any, list[Any]]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.6 * panels + 0.8, 4.6), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig, [fig.add_subplot(1, panels, i + 1) for i in range(panels)]


def _finish(fig: Any, axes: list[Any], title: str) -> bytes:
    for ax in axes:
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes[0].legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", pad_inches=0.15)
    return buf.getvalue()
