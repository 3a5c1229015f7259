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
    return "\n".join(lines)
