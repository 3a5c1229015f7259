"""The EAGLE-3 pipeline lab: the drafter pipeline of sim/pipeline as scripts on the host (this
machine), then the simulator serving the trained drafter. `agent lab setup eagle3-pipeline`
writes DIR/agent.toml, the host's workdir DIR/work with its scripts, and DIR/fixes (the fixed
data-generation script the agent copies over when the data check finds malformed samples)."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.space import SPEC
from tools.domain.config import free_port, lab_config
from tools.domain.config_toml import to_toml

PIPELINE_SCALE = 2000.0  # 5.3 h of data generation in about 10 s
SERVER_SCALE = 20.0
SAMPLES, EPOCHS = 10000, 3
DRAFT = "--speculative-draft-model-path"

HEADER = """\
# Written by `agent lab setup eagle3-pipeline`: train an EAGLE-3 drafter with long jobs (data
# generation, data check, hidden states, vocabulary mapping, training, conversion - the scripts in
# {work}/scripts), then serve it with the simulator against the baseline and n-gram speculation.
#   agent run --config {config} --goal "train an EAGLE-3 drafter and beat the baseline" --model autopilot
# The stages run {scale:g} times faster than they say. docs/pipeline.md says more.
"""  # noqa: E501

SCRIPT = """\
#!/usr/bin/env bash
# {what}
set -euo pipefail
exec {python} -m sim.pipeline {stage} --time-scale {scale:g} {args}
"""

# stage -> (what it does, arguments)
STAGES: dict[str, tuple[str, str]] = {
    "datagen": (f"generate {SAMPLES} samples with the verifier", f"--samples {SAMPLES}"),
    "check": ("check the samples before the expensive stages", f"--samples {SAMPLES}"),
    "extract": ("extract the verifier's hidden states", ""),
    "vocab": ("map the verifier's vocabulary to the drafter's", ""),
    "train": (f"train the EAGLE-3 head ({EPOCHS} epochs)", f"--epochs {EPOCHS}"),
    "convert": ("convert the checkpoint to the engine's layout (layers.0.*)", "--out drafter"),
}


@dataclass(frozen=True)
class PipelineLab:
    folder: Path
    config: Path
    work: Path
    drafter: Path


def script(stage: str, scale: float, defect: bool = False) -> str:
    what, args = STAGES[stage]
    if defect:  # the bug of the reference campaign: reasoning reassembled without </think>
        args += " --defect"
    return SCRIPT.format(
        what=what, python=shlex.quote(sys.executable), stage=stage, scale=scale, args=args
    ).replace(" \n", "\n")


def search_space(drafter: Path) -> dict[str, Any]:
    return {
        SPEC: [False, "EAGLE3", "NGRAM"],
        DRAFT: [str(drafter)],
        "requires": {DRAFT: {SPEC: "EAGLE3"}},
        "baseline": {SPEC: False},
    }


def lab_toml(folder: Path, scale: float, server_scale: float, port: int) -> dict[str, Any]:
    work = folder / "work"
    base = lab_config(server_scale, port)
    stages = []
    for name, (what, _) in STAGES.items():
        stage: dict[str, Any] = {"name": name, "command": f"bash scripts/{name}.sh", "what": what}
        if name == "check":
            stage["fix"] = {
                "source": str(folder / "fixes" / "datagen.sh"),
                "dest": "scripts/datagen.sh",
                "rerun": "datagen",
                "when": "malformed",
            }
        stages.append(stage)
    return {
        "hosts": [{"name": "local", "address": "local", "workdir": str(work)}],
        "server": {
            "engine": "sim",
            "host": "local",
            # all-reduce fusion on, as the reference campaign served
            "command": base.server.command + " --enable-flashinfer-allreduce-fusion",
            "port": port,
            "ready_timeout_s": 120.0,
        },
        "bench": {"concurrency": [1, 2, 5, 10, 30, 70], "max_tokens": 128},
        "budget": {"max_minutes": 30.0},
        "files": {"allow_local": [str(folder / "fixes")]},  # put_file copies the fixed script
        # relative to the host's workdir, where the server starts
        "search": search_space(Path("drafter")),
        "pipeline": {
            "time_scale": scale,
            "drafter": "drafter",
            "stages": stages,
        },
    }


def setup(
    folder: Path,
    defect: bool = False,
    scale: float = PIPELINE_SCALE,
    server_scale: float = SERVER_SCALE,
) -> PipelineLab:
    """The lab in `folder`; `defect`: the data-generation script has the </think> bug."""
    folder = folder.expanduser().resolve()
    work = folder / "work"
    (work / "scripts").mkdir(parents=True, exist_ok=True)
    (folder / "fixes").mkdir(parents=True, exist_ok=True)
    for name in STAGES:
        (work / "scripts" / f"{name}.sh").write_text(
            script(name, scale, defect and name == "datagen")
        )
    (folder / "fixes" / "datagen.sh").write_text(script("datagen", scale))
    body = lab_toml(folder, scale, server_scale, free_port(30000))
    config = folder / "agent.toml"
    tmp = config.with_suffix(".toml.tmp")
    header = HEADER.format(work=work, config=shlex.quote(str(config)), scale=scale)
    tmp.write_text(header + "\n" + to_toml(body))
    tmp.replace(config)
    return PipelineLab(folder, config, work, work / "drafter")
