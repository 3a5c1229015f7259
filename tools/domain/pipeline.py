"""[pipeline] of agent.toml: long jobs that come before the serving campaign (docs/pipeline.md).

Each stage is a command run as a job in the host's workdir, in order. A stage with a `fix` is a
check: when it fails and its log matches `when`, the fixed script `source` (on this machine) is
copied to `dest` on the host, the stage `rerun` is run again, then the check again.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from state.numbers import Factor

NAME = r"^[A-Za-z0-9_.-]+$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FixConfig(_Strict):
    source: str  # the fixed script on this machine
    dest: str  # where it goes on the host (relative: under the workdir)
    rerun: str  # the stage that makes what the check refused
    when: str = ""  # a regex the check's log must match for this fix to apply ("" = any failure)


class StageConfig(_Strict):
    name: str = Field(pattern=NAME)
    command: str
    what: str = ""  # one line for the todo list
    fix: FixConfig | None = None


class PipelineConfig(_Strict):
    host: str | None = None  # default: the server's host
    time_scale: Factor = 1.0  # the stages' clock runs this much faster
    stages: list[StageConfig] = Field(min_length=1)
    drafter: str = ""  # what the pipeline makes, as the serving space names it

    @model_validator(mode="after")
    def names(self) -> PipelineConfig:
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ValueError(f"pipeline stage names must be unique: {names}")
        for i, stage in enumerate(self.stages):
            if stage.fix is not None and stage.fix.rerun not in names[:i]:
                raise ValueError(
                    f"stage {stage.name!r}: fix.rerun {stage.fix.rerun!r} must name a stage "
                    "before it"
                )
        return self
