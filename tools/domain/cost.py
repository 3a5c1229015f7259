"""What serving costs: agent.toml's [cost] (the price of the hardware) and the one formula for
dollars per million output tokens, used by the report and recommendation.json alike.

    $ per million output tokens = hourly price / (output tokens/s x 3600) x 1e6

The hourly price is the configuration's: `usd_per_gpu_hour` x the GPUs its command asks for
(tools.domain.gpus, as the planner and the per-GPU Pareto chart count them), or `usd_per_box_hour`
whatever it uses of the box. The model API's cost of the campaign itself is counted elsewhere
(state.fold's spend, [model] prices); this is what the configuration costs to serve with.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from state.numbers import Dollars

ONE_MILLION = 1e6
HINT = (
    "set `usd_per_gpu_hour` (or `usd_per_box_hour`) under `[cost]` in agent.toml for $ per "
    "million output tokens per configuration and level"
)


class CostConfig(BaseModel):
    """[cost]: the price of one GPU for an hour, or of the whole box; exactly one."""

    model_config = ConfigDict(extra="forbid")

    # strict: `true` is no price (a bool would pass as 1.0), nor is "2.5" (a string in TOML)
    usd_per_gpu_hour: Dollars | None = None
    usd_per_box_hour: Dollars | None = None

    @model_validator(mode="after")
    def exactly_one(self) -> CostConfig:
        given = [v for v in (self.usd_per_gpu_hour, self.usd_per_box_hour) if v is not None]
        if len(given) != 1:
            raise ValueError(
                "set exactly one of usd_per_gpu_hour and usd_per_box_hour"
                + (", not both" if given else "")
            )
        return self

    def hourly_usd(self, gpus: int) -> float:
        """What an hour of a configuration that uses `gpus` GPUs costs."""
        if self.usd_per_gpu_hour is not None:
            return self.usd_per_gpu_hour * max(gpus, 1)
        assert self.usd_per_box_hour is not None
        return self.usd_per_box_hour

    def describe(self) -> str:
        """ "$2.50 per GPU-hour" or "$20.00 per box-hour"."""
        if self.usd_per_gpu_hour is not None:
            return f"${self.usd_per_gpu_hour:,.2f} per GPU-hour"
        return f"${self.usd_per_box_hour:,.2f} per box-hour"


def usd_per_mtok(price: CostConfig, gpus: int, output_tok_s: float) -> float | None:
    """Dollars per million output tokens at a measured output throughput (None: nothing served,
    an infinite cost is no figure)."""
    if not output_tok_s > 0:
        return None
    return price.hourly_usd(gpus) / (output_tok_s * 3600) * ONE_MILLION


def per_level(price: CostConfig, gpus: int, sweep: dict[int, float]) -> dict[int, float]:
    """usd_per_mtok at each level of a sweep (output tok/s per level) that served something."""
    return {c: v for c, tps in sweep.items() if (v := usd_per_mtok(price, gpus, tps)) is not None}


def price_of(raw: object) -> CostConfig | None:
    """[cost] as a run recorded it (run_started's resolved config): None when it was not set
    (or was edited into something agent.toml would refuse: no figure rather than no report)."""
    try:
        return CostConfig.model_validate(raw) if isinstance(raw, dict) else None
    except ValidationError:
        return None
