"""The panels of the supervisor's view, built from a Board (the fold of a run's events).

`render(board)` draws: the goal and status, the step and tool running with its elapsed time,
progress bars, the todo list, a fleet's boxes and trials (agent.view.fleet), the servers up, the
latest benchmark and where the campaign stands (agent.view.standing), spend against the budget,
supervisor messages and the model's last words. Everything is built eagerly, so a renderable
made under a lock can be drawn outside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from agent.report.figures import Figures
from agent.report.measured import human_label, parse_ts
from agent.view.bars import Bar
from agent.view.eta import budget_left_s, estimate, eta_text
from agent.view.fleet import fleet_panel
from agent.view.standing import figures_of, final_lines, standing
from agent.view.words import api_unavailable, clock, short
from state.events import Event
from state.fold import RunState
from tools.bench import results
from tools.bench.schema import BenchResult

SYMBOL = {"completed": "✓", "in_progress": "▶", "pending": "○", "cancelled": "✗"}
STYLE = {"completed": "green", "in_progress": "bold yellow", "pending": "", "cancelled": "dim"}
PRIORITY = {"high": "bold red", "medium": "", "low": "dim"}
MAX_TODOS = 14  # beyond this, the oldest finished items collapse into one line
# events that end a wait on the API: it answered, or the run went on or ended
API_ANSWERED = ("message", "api_exchange", "tool_call", "compaction", "run_finished")


@dataclass
class Board:
    """The fold plus what only the view needs: session start, the last event, progress bars."""

    state: RunState = field(default_factory=RunState)
    last_ts: str = ""
    tool_seq: int = 0  # seq of the running tool's tool_call event
    events: int = 0
    bars: list[Bar] = field(default_factory=list)
    gone: int | None = None  # pid of a run process that ended without finishing the run
    run_path: Path = Path(".")  # the run folder: result files, recommendation.json
    log: list[Event] = field(default_factory=list)
    thinking: str = ""  # the model's latest thinking summary (message events carry it)
    api_wait: Event | None = None  # the model_wait in force: the API is unavailable until then
    _results: dict[str, BenchResult] = field(default_factory=dict)
    _figures: tuple[int, Figures | None] = (-1, None)

    def result(self, event: Event) -> BenchResult:
        """The typed result of a benchmark event (its file, else the event), read once."""
        key = str(event.get("id", event.get("seq")))
        if key not in self._results:
            self._results[key] = results.of_event(event, self.run_path)
        return self._results[key]

    def figures(self) -> Figures | None:
        """The run's figures, computed again only when a benchmark or a recommendation arrived."""
        marks = sum(
            e["type"] == "benchmark" or (e["type"] == "tool_result" and e["name"] == "recommend")
            for e in self.log
        )
        if marks != self._figures[0]:
            try:
                figures = figures_of(self.run_path, self.log)
            except (ValueError, TypeError, KeyError):  # an odd event must not stop the view
                figures = None
            self._figures = (marks, figures)
        return self._figures[1]

    def apply(self, event: Event) -> None:
        self.log.append(event)
        self.state.apply(event)
        self.events += 1
        self.last_ts = event.get("ts", self.last_ts)
        kind = event["type"]
        if kind == "tool_call":
            self.tool_seq = event["seq"]
        elif kind in ("tool_result", "run_finished"):
            self.bars = []
        if kind == "model_wait":
            self.api_wait = event
        elif kind in API_ANSWERED:
            self.api_wait = None
        if kind == "message" and event.get("role") == "assistant" and event.get("thinking"):
            self.thinking = str(event["thinking"])


def since(ts: str, now: datetime) -> float:
    start = parse_ts(ts)
    return max((now - start).total_seconds(), 0.0) if start else 0.0


def render(board: Board, now: datetime | None = None) -> RenderableType:
    now = now or datetime.now(UTC)
    parts: list[RenderableType] = [_status(board, now)]
    parts.append(_todos(board.state))
    if board.state.fleet is not None:
        ended = board.state.finished or board.gone  # the fleet's time stops at its last event
        parts.append(fleet_panel(board.state.fleet, None if ended else now.timestamp()))
    if board.state.servers:
        parts.append(_servers(board.state, now))
    if board.state.results:
        parts.append(_benchmark(board))
        figures = board.figures()
        if figures is not None:
            parts.append(Text(standing(figures)))
            floors = _floors(figures)
            if floors is not None:
                parts.append(floors)
    parts.append(_spend(board, now))
    if board.state.supervisor:
        lines = [f"[{m['seq']}] {short(m['text'], 200)}" for m in board.state.supervisor[-3:]]
        parts.append(Panel(Text("\n".join(lines)), title="supervisor", title_align="left"))
    if board.thinking:
        parts.append(
            Panel(Text(short(board.thinking, 400), style="dim italic"), title="thinking",
                  title_align="left")
        )  # fmt: skip
    if board.state.last_text:
        parts.append(
            Panel(Text(short(board.state.last_text, 400)), title="agent", title_align="left")
        )
    if board.state.finished:
        parts += _final(board)
    return Group(*parts)


def _final(board: Board) -> list[RenderableType]:
    """What to do next, in full: the report's path and the command to deploy."""
    lines = [Text(line) for line in final_lines(board.run_path, board.figures())]
    return [Panel(Group(*lines), title="result", title_align="left")] if lines else []


def _status(board: Board, now: datetime) -> RenderableType:
    s = board.state
    title = f"run {s.run_id or '?'} · {s.brain or '?'}" + (
        f" ({s.model})" if s.model and s.model != s.brain else ""
    )
    lines: list[RenderableType] = [Text(short(s.goal, 200), style="bold")]
    if s.finished:
        f = s.finished
        lines.append(
            Text(f"{f['status']} (exit {f['exit_code']}): {short(f.get('reason') or '', 300)}")
        )
    else:
        waiting = False
        if s.current_tool:
            tool = s.current_tool
            args = short(json.dumps(tool["input"], separators=(",", ":")), 90)
            doing = f"▶ {tool['name']} {args} · {clock(since(tool['ts'], now))}"
        elif s.fleet is not None and s.fleet.running:  # the controller waits on its trials
            doing = f"{len(s.fleet.running)} trial(s) in flight on the fleet"
        elif board.api_wait is not None:
            doing, waiting = api_unavailable(board.api_wait, now.timestamp()), True
        else:
            doing = f"thinking · {clock(since(board.last_ts, now))}"
        if s.stop_requested:
            doing += " · stop requested"
        # one line, cut where the terminal ends; the API's wait wraps: its reason is the news
        lines.append(Text(f"step {s.steps} · {doing}", no_wrap=not waiting, overflow="ellipsis"))
    for bar in board.bars:
        lines.append(_bar(bar))
    status = (s.finished or {}).get("status") or "running"
    return Panel(Group(*lines), title=title, subtitle=status, title_align="left")


def _bar(bar: Bar) -> RenderableType:
    grid = Table.grid(padding=(0, 1))
    grid.add_row(
        Text(bar.label, style="cyan"),
        ProgressBar(total=1.0, completed=bar.fraction or 0.0, width=30, pulse=bar.fraction is None),
        Text("  …" if bar.fraction is None else f"{bar.fraction:4.0%}"),
        Text(short(bar.detail, 70), style="dim", no_wrap=True, overflow="ellipsis"),
    )
    return grid


def _todos(s: RunState) -> RenderableType:
    todos = s.todos
    done = sum(t["status"] in ("completed", "cancelled") for t in todos)
    table = Table.grid(padding=(0, 1))
    shown = todos
    if len(todos) > MAX_TODOS:  # collapse the oldest finished items, never the open ones
        drop = len(todos) - MAX_TODOS
        finished = [i for i, t in enumerate(todos) if t["status"] in ("completed", "cancelled")]
        hidden = set(finished[:drop])
        shown = [t for i, t in enumerate(todos) if i not in hidden]
        table.add_row("", "", Text(f"… {len(hidden)} finished items not shown", style="dim"))
    for t in shown:
        style, priority = STYLE.get(t["status"], ""), str(t.get("priority", "medium"))
        table.add_row(
            Text(SYMBOL.get(t["status"], "?"), style=style),
            Text(f"{priority:<6}", style=PRIORITY.get(priority, "")),
            Text(short(t["content"], 110), style=style),
        )
    if not todos:
        table.add_row("", "", Text("(no todos yet)", style="dim"))
    return Panel(table, title=f"todos {done}/{len(todos)} done", title_align="left")


def _servers(s: RunState, now: datetime) -> RenderableType:
    table = Table(box=None, padding=(0, 1), show_edge=False)
    for col in ("server", "where", "engine", "pid", "state", "flags"):
        table.add_column(col, style="bold" if col == "server" else "")
    for name, srv in s.servers.items():
        state = "ready" if srv.get("ready") else f"loading {clock(since(srv.get('ts', ''), now))}"
        flags = " ".join(
            k if v is True else f"{k} {v}" for k, v in (srv.get("flags") or {}).items() if v
        )
        table.add_row(
            name,
            f"{srv.get('host', '?')}:{srv.get('port', '?')}",
            str(srv.get("engine", "")),
            str(srv.get("pid", "")),
            state,
            short(flags, 60) or "-",
        )
    return Panel(table, title="servers up", title_align="left")


LATENCIES = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms")


def _benchmark(board: Board) -> RenderableType:
    s = board.state
    latest = board.result(s.results[-1])
    points = {p.max_concurrency: p.model_dump(exclude_unset=True) for p in latest.points}
    table = Table(box=None, padding=(0, 1), show_edge=False)
    table.add_column("C", justify="right")
    table.add_column("tok/s", justify="right")
    has_extra = any(p.get(k) is not None for p in points.values() for k in LATENCIES)
    if has_extra:
        for col in ("TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99 (ms)"):
            table.add_column(col, justify="right")
    for level, p in sorted(points.items()):
        tput = "FAILED" if p.get("level_failed") else _num(p.get("output_throughput"))
        row = [str(level), tput]
        if has_extra:
            row += [_num(p.get(k)) for k in LATENCIES]
        table.add_row(*row)
    name = human_label(latest.label) if latest.label else latest.server.name or latest.id
    title = f"latest benchmark: {name} ({len(s.results)} so far)"
    return Panel(table, title=title, title_align="left")


def _floors(f: Figures) -> RenderableType | None:
    """Each measured configuration's share of each level's floor (the report's `of floor`,
    docs/physics.md), the bound beside a level where it is not memory; None where no result
    carries a floor (the box is not known)."""
    configs = [c for c in f.m.configs if any(c.floor_share(lv) is not None for lv in c.levels)]
    if not configs:
        return None
    levels = sorted({lv for c in configs for lv in c.levels})
    table = Table(box=None, padding=(0, 1), show_edge=False)
    table.add_column("configuration")
    for level in levels:
        bound = next((b for c in configs if (b := c.floor_bound(level)) is not None), "memory")
        table.add_column(
            f"C={level}" + ("" if bound == "memory" else f" ({bound})"), justify="right"
        )
    for c in configs:
        shares = [c.floor_share(level) for level in levels]
        table.add_row(short(c.name, 40), *("-" if v is None else f"{v:.0%}" for v in shares))
    return Panel(table, title="share of the floor (docs/physics.md)", title_align="left")


def _num(value: Any) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def _spend(board: Board, now: datetime) -> RenderableType:
    s, lim = board.state, board.state.limits
    minutes = s.minutes_used(now.timestamp())
    parts = [
        _of(f"steps {s.steps}", s.steps, lim.get("max_steps"), "{:g}"),
        _of(f"${s.spend.usd:.2f}", s.spend.usd, lim.get("max_usd"), "${:.2f}"),
        _of(f"{minutes:.1f} min", minutes, lim.get("max_minutes"), "{:.0f} min"),
        f"tokens {_k(s.spend.input_tokens + s.spend.cache_read_input_tokens)} in"
        f" / {_k(s.spend.output_tokens)} out",
    ]
    left = estimate(s.todos, board.log, s.fleet, budget_left_s(s, board.log))
    eta = eta_text(left, bool(s.finished))
    return Text("  ·  ".join(parts) + (f"\n{eta}" if eta else ""))


def _of(used_text: str, used: float, limit: Any, fmt: str) -> str:
    if not limit:
        return used_text
    left = max(limit - used, 0)
    return f"{used_text} of {fmt.format(limit)} ({fmt.format(left)} left)"


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)
