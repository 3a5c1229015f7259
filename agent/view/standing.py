"""Where the campaign stands, in one line: the baseline, the best candidate's geometric-mean ratio
and verdict, the noise floor, the winner. The watch view, `agent run`'s live view and its plain
lines print it; the figures are the report's (agent.report.figures), so every screen states the
same numbers as report.md and recommendation.json."""

from __future__ import annotations

from pathlib import Path

from agent.report import gather
from agent.report.figures import Figures
from agent.report.outcome import policy_servers, routing_rule, unmeasured_text
from agent.report.trust import drift_text
from agent.view.words import named
from state.events import Event
from tools.domain import stats
from tools.recommend import verdict_words


def figures_of(run_path: Path, events: list[Event]) -> Figures | None:
    """The run's figures, or None before its first benchmark."""
    if not any(e["type"] == "benchmark" for e in events):
        return None
    return gather(run_path, events)


def standing(f: Figures) -> str:
    if f.baseline is None:
        return "no benchmark yet"
    if f.winner is None:  # benchmarks ran, and the baseline served nothing: never name a winner
        return unmeasured_text(f)
    parts = [named("baseline", f.baseline.name)]
    if f.candidate is not None and f.candidate is not f.baseline and f.versus is not None:
        ratio = "-" if f.versus.ratio is None else f"{f.versus.ratio:.3f}x"
        rec = f.m.recommendation
        means = f.by_means
        verdict: str = "win" if f.winner is f.candidate or means is None else means.verdict
        if rec is not None and rec.verdict == "not established":  # the pairs decide (issue 29)
            if rec.paired is None:  # none made, and the baseline drifted: the means cannot say
                verdict = "not established: the baseline drifted, no launch pairs"
            else:  # recommend's words, naming what was paired (a duet's rounds, crossovers)
                verdict = verdict_words(rec)
        parts.append(f"best {f.candidate.name} {ratio} geomean ratio ({verdict})")
        if rec is not None and rec.paired is not None and rec.paired.stated:
            parts.append(rec.paired.stated)
    parts.append(f"noise floor {stats.percent(f.floor)}")
    parts.append(f"winner {f.winner.name}")
    return " · ".join(parts)


def final_lines(run_path: Path, f: Figures | None) -> list[str]:
    """The last words of a finished run's screen: where the report is and, in full, the command
    to deploy (recommendation.json's, else the winner's launch) - or why there is nothing to
    deploy although benchmarks ran."""
    lines = []
    drift = drift_text(f) if f is not None else None
    if drift is not None:  # before the command: it says how far to trust it
        lines.append(f"drift: {drift}")
    html = run_path / "report.html"
    if html.is_file():
        lines.append(f"report: {html}  (and report.md beside it)")
    if (run_path / "deploy").is_dir():  # agent/report/deploy.py
        lines.append(f"launch script, compose and Kubernetes files: {run_path / 'deploy'}")
    if f is not None and f.winner is None and f.baseline is not None:
        lines.append(f"nothing to deploy: {unmeasured_text(f, why=False)}")
    servers = policy_servers(f) if f is not None else []
    if servers:
        lines.append(
            f"deploy {len(servers)} servers, routed by concurrency: {routing_rule(servers)}"
        )
        lines += [f"server for {s.span} ({s.name}): {s.command}" for s in servers]
    elif f is not None and f.winner is not None:
        stated = f.m.recommendation.command if f.m.recommendation is not None else ""
        command = stated or f.m.command_of(f.winner)
        what = "keep the baseline" if f.winner is f.baseline else f"deploy {f.winner.name}"
        if command:
            lines.append(f"{what}: {command}")
    return lines
