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
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from state.numbers import Amount, Count, Minutes, Seconds

RAY_CLIENT = re.compile(r"^ray://[A-Za-z0-9_.-]+:\d{1,5}$")
# the custom resource every simulated box of the lab has (one trial at a time per box)
BOX = "box"


class FleetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    engine: Literal["ray"] = "ray"
    address: str = "auto"
    resources: dict[str, Amount] = {BOX: 1.0}
    max_trials: Annotated[Count, Field(le=256)] = 3
    boxes: Annotated[Count, Field(le=16)] = 3
    # a trial lost with its node runs again elsewhere
    retries: Annotated[Count, Field(ge=0, le=3)] = 1
    # a trial not back by then (a wedged node, a server no deadline of the benchmark caught) is
    # cancelled, what it left on its node reaped, and failed: it never holds a box for the run
    trial_timeout_min: Minutes = 120
    # a clean-up task on a live node: scheduled, run, answered; one not back by then is kept and
    # awaited again at each of the controller's waits, once more (this long) at the run's end
    reap_timeout_s: Seconds = 60
    object_store_mb: Annotated[Count, Field(ge=80)] = 100  # per simulated box (the lab)

    @field_validator("address")
    @classmethod
    def address_form(cls, v: str) -> str:
        if v not in ("auto", "local") and not RAY_CLIENT.match(v):
            raise ValueError(f"must be 'auto', 'local' or ray://host:port, got {v!r}")
        return v

    @field_validator("resources")
    @classmethod
    def resources_named(cls, v: dict[str, float]) -> dict[str, float]:
        if not v:
            raise ValueError("name what one trial needs, e.g. {GPU = 8} or {box = 1}")
        return v
