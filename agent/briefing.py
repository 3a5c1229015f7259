"""The first user message of every run: the goal and what the model needs to know of the lab."""

from __future__ import annotations

import json

from tools.domain.config import BUDGET_WARN_AT, Config


def briefing(goal: str, config: Config, limits: dict[str, float] | None = None) -> str:
    """`limits`: the run's resolved budgets (session.Limits.resolve), stated for a model; None for
    the autopilot, which plans from the config (its recorded briefing stays as it was). A replay
    starts under the recorded limits, so its briefing is the recorded one."""
    server, bench, objective = config.server, config.bench, config.objective
    hosts = ", ".join(f"{h.name} ({h.address})" for h in config.hosts)
    lines = [
        f"Goal: {goal}",
        "",
        f"Hosts: {hosts}.",
        f"Server: engine {server.engine} on host {server.host}, port {server.port}, launched by "
        f"start_server as `{server.command} [your flags] --port {server.port}`.",
        f"Benchmark workload: input_len {bench.input_len}, max_tokens {bench.max_tokens}, "
        f"concurrency levels {bench.concurrency}, endpoint /v1/{bench.endpoint}.",
        f"Objective: {objective.kind}"
        + (f" at C={objective.level}" if objective.level else "")
        + " of output throughput (higher is better).",
    ]
    if limits:
        lines += ["", budget_line(limits)]
    if config.search:
        lines += [
            "",
            "Search space (flag: candidate values; false means the flag is omitted; "
            "'requires' lists flags that apply only together; 'baseline' is the start):",
            json.dumps(config.search, indent=1),
        ]
    if config.pipeline is not None:
        lines += ["", *pipeline_lines(config)]
    return "\n".join(lines)


def budget_line(limits: dict[str, float]) -> str:
    steps, minutes, usd = limits["max_steps"], limits["max_minutes"], limits["max_usd"]
    left = 1 - BUDGET_WARN_AT
    return (
        f"Budget: {steps:g} model turns, {minutes:g} minutes, ${usd:.2f} of model spend. The "
        f"wrap-up warning comes at {BUDGET_WARN_AT * 100:g} % of any of them; the re-validation "
        "(fresh launches of the winner and of the baseline, and their sweeps) and the "
        f"recommendation must fit in what is left then, {minutes * left:g} minutes, "
        f"{steps * left:g} turns: plan your launches so that they do."
    )


def pipeline_lines(config: Config) -> list[str]:
    """The stages a [pipeline] runs before the campaign (docs/pipeline.md)."""
    assert config.pipeline is not None
    p = config.pipeline
    clock = (
        ""
        if p.time_scale == 1
        else f"; its clock runs {p.time_scale:g}x faster than its log says: divide its ETAs"
    )
    out = [
        "Pipeline, before the campaign: run each stage in order as a job (start_job, in the "
        f"host's workdir){clock}:"
    ]
    for stage in p.stages:
        line = f"- {stage.name}: `{stage.command}`" + (f" - {stage.what}" if stage.what else "")
        if stage.fix is not None:
            fix = stage.fix
            line += (
                f". A check: when it fails with /{fix.when}/ in its log, put_file {fix.source} "
                f"to {fix.dest}, rerun {fix.rerun}, then this check again"
            )
        out.append(line)
    if p.drafter:
        out.append(f"It makes {p.drafter}: the search space serves it as a candidate.")
    return out
