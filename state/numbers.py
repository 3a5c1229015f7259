"""The numbers a config or the log carries, one definition per kind: each a finite number of its
own type (strict: `true` is no count, `"300"` no number) in a sane range.

agent.toml's models (tools/domain/), the command line's `--max-steps`, `--max-cost` and
`--max-minutes`, `agent budget` and the fold of `limits_changed` all take their numbers from
here, so a bound is said once. A field narrows its kind where it needs to
(`Annotated[Count, Field(ge=0)]`: the later bound wins); it never widens it past the kind's top,
nor lets inf or nan in.

The state layer holds them because the fold (state/fold.py) checks the budget a log carries with
the same bounds as the config that set it, and state is the floor every layer may import.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, Strict, TypeAdapter, ValidationError

# the longest wait or duration anything of a campaign may be given: a month (a longer one is a
# typo, or a way to switch a deadline off); the shortest: a millisecond
LONGEST_S = 30 * 24 * 3600
SHORTEST_S = 1e-3
MOST = 10**9  # the most of anything counted: steps, tokens, requests, levels
MOST_FACTOR = 1e6  # the largest factor or rate (x, req/s, tok/s)
MOST_USD = 1e6  # the largest price or budget in US dollars

_FINITE = Field(allow_inf_nan=False)

# a whole number of things (steps, turns, tokens, requests, levels, trials): 1 to a billion
Count = Annotated[int, Strict(), Field(ge=1, le=MOST)]
# a wait or a duration in seconds: a millisecond to a month
Seconds = Annotated[float, Strict(), _FINITE, Field(ge=SHORTEST_S, le=LONGEST_S)]
# the same in minutes (budgets, a trial's deadline): 0.0001 (6 ms) to a month
Minutes = Annotated[float, Strict(), _FINITE, Field(ge=1e-4, le=LONGEST_S / 60)]
# the same in milliseconds (SLO limits)
Milliseconds = Annotated[float, Strict(), _FINITE, Field(ge=SHORTEST_S * 1000, le=LONGEST_S * 1000)]
# things per second (req/s, tok/s) and factors (x a learned pace, a clock's speed-up)
Rate = Annotated[float, Strict(), _FINITE, Field(gt=0, le=MOST_FACTOR)]
Factor = Rate
# a share of a whole, above 0 and at most 1
Fraction = Annotated[float, Strict(), _FINITE, Field(gt=0, le=1)]
# US dollars: a budget or a price, above 0 (a price of nothing is no price)
Usd = Annotated[float, Strict(), _FINITE, Field(gt=0, le=MOST_USD)]
# an amount of a cluster's resource one trial needs (GPU = 0.5, box = 1, memory in bytes)
Amount = Annotated[float, Strict(), _FINITE, Field(gt=0, le=1e15)]
# a TCP port
Port = Annotated[int, Strict(), Field(ge=1, le=65535)]
# a random seed, as numpy and the benchmark's RNG take it
Seed = Annotated[int, Strict(), Field(ge=0, le=2**32 - 1)]

# a budget's three limits: a budget can be raised, never switched off
Steps = Count
Dollars = Usd


# the limits `run_started` and `limits_changed` carry (`agent budget` sends some of them)
BUDGET: dict[str, TypeAdapter[Any]] = {
    "max_steps": TypeAdapter(Steps),
    "max_usd": TypeAdapter(Dollars),
    "max_minutes": TypeAdapter(Minutes),
}


def limits_problem(limits: object) -> str | None:
    """Why a log's budget limits are no budget (one line naming the key), or None. Each limit
    given must be one of the three, within its bounds; null is no limit (it would switch one off).
    """
    if not isinstance(limits, dict):
        return f"limits: not a table of limits (got {limits!r})"
    for key, value in limits.items():
        if key not in BUDGET:
            return f"limits: unknown limit {key!r} (one of {', '.join(BUDGET)})"
        try:
            BUDGET[key].validate_python(value)
        except ValidationError as err:
            return f"limits.{key}: {err.errors()[0]['msg']} (got {value!r})"
    return None
