"""[fleet] of agent.toml: trials run in parallel on a Ray cluster (docs/fleet.md).

[fleet]
engine = "ray"
address = "auto"              # "auto" (RAY_ADDRESS or a running local cluster),
                              # "ray://host:10001", or "local" (the lab starts one)
resources = { box = 1 }       # what one trial needs: {"GPU" = 8} or a custom resource
max_trials = 3                # trials at once (at most one per box with `box = 1`)
boxes = 3                     # with address "local": simulated boxes to start
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

RAY_CLIENT = re.compile(r"^ray://[A-Za-z0-9_.-]+:\d{1,5}$")
# the custom resource every simulated box of the lab has (one trial at a time per box)
BOX = "box"


class FleetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    engine: Literal["ray"] = "ray"
    address: str = "auto"
    resources: dict[str, float] = {BOX: 1.0}
    max_trials: int = Field(default=3, ge=1, le=256)
    boxes: int = Field(default=3, ge=1, le=16)
    retries: int = Field(default=1, ge=0, le=3)  # a trial lost with its node runs again elsewhere
    # a trial not back by then (a wedged node, a server no deadline of the benchmark caught) is
    # cancelled, what it left on its node reaped, and failed: it never holds a box for the run
    trial_timeout_min: float = Field(default=120, gt=0)
    # a clean-up task on a live node: scheduled, run, answered; one not back by then is kept and
    # awaited again at each of the controller's waits, once more (this long) at the run's end
    reap_timeout_s: float = Field(default=60, gt=0)
    object_store_mb: int = Field(default=100, ge=80)  # per simulated box (the lab)

    @field_validator("address")
    @classmethod
    def address_form(cls, v: str) -> str:
        if v not in ("auto", "local") and not RAY_CLIENT.match(v):
            raise ValueError(f"must be 'auto', 'local' or ray://host:port, got {v!r}")
        return v

    @field_validator("resources")
    @classmethod
    def resources_positive(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k, n in v.items() if not n > 0]
        if bad:
            raise ValueError(f"each resource needs an amount > 0: {', '.join(bad)}")
        if not v:
            raise ValueError("name what one trial needs, e.g. {GPU = 8} or {box = 1}")
        return v
