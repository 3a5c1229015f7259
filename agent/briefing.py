"""The first user message of every run: the goal and what the model needs to know of the lab."""

from __future__ import annotations

import json

from tools.domain.config import Config


def briefing(goal: str, config: Config) -> str:
    # no budget here: the loop warns near a limit, and replays may run under other limits
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
