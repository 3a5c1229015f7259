"""`plan`: the autopilot's next experiment, as a tool a model may consult (issue 26.6).

The planner is a pure function of the History, and the History is rebuilt from the run's events
(observe.py), whoever made the calls: so the advice for a Claude run is the step the autopilot
would take from what this run measured so far - the same Campaign, the same narration, the same
tool calls (brain.Campaign.experiment and .finish build them), less the todo bookkeeping. The
model may follow it or not; the report says which of its steps did (agent/report/advice.py).

It lives with the autopilot, not in tools/: a tool may not import a brain (pyproject.toml's
layers), so agent/session.py adds it to a one-box run's tools (on a fleet the controller plans).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent.brains.autopilot import narrate
from agent.brains.autopilot.brain import Campaign
from agent.brains.autopilot.planner import Experiment
from state.fold import RunState
from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult
from tools.domain.config import Config
from tools.domain.space import SearchError

# what the model does with its own memory, not an experiment: never part of the advice
BOOKKEEPING = ("todowrite", "todoread", "plan")


@dataclass
class Advice:
    """The next step: `step` is "experiment" or "conclude"; `calls` the tool calls that do it."""

    step: str
    why: str
    says: list[str]
    calls: list[dict[str, Any]] = field(default_factory=list)
    standing: str = ""
    figures: dict[str, Any] = field(default_factory=dict)
    purpose: str | None = None
    config: dict[str, Any] | None = None
    levels: list[int] = field(default_factory=list)

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step, "why": self.why, "calls": self.calls}
        out["standing"] = self.figures
        if self.step == "experiment":
            out |= {"purpose": self.purpose, "config": self.config, "levels": self.levels}
        else:
            recommend = next((c for c in self.calls if c["tool"] == "recommend"), None)
            out["recommendation"] = None if recommend is None else recommend["input"]
        return out

    def text(self) -> str:
        head = "Next: conclude. " if self.step == "conclude" else "Next: "
        lines = [head + " ".join(self.says), self.standing]
        lines.append("calls: " + json.dumps(self.calls, separators=(",", ":")))
        return "\n".join(lines)


def advise(state: RunState, config: Config) -> Advice:
    """What the autopilot would do next in this run, from what it measured so far."""
    campaign = Campaign(state, config)
    step = campaign.search.suggest()
    if isinstance(step, Experiment):
        campaign.experiment(step)
    else:
        campaign.finish(step)
    says = [b["text"] for b in campaign.blocks if b["type"] == "text"]
    calls = [
        {"tool": b["name"], "input": b["input"]}
        for b in campaign.blocks
        if b["type"] == "tool_use" and b["name"] not in BOOKKEEPING
    ]
    standing, figures = standing_of(campaign)
    if not isinstance(step, Experiment):
        return Advice("conclude", step.why, says, calls, standing, figures)
    return Advice(
        "experiment",
        step.why,
        says,
        calls,
        standing,
        figures,
        purpose=step.purpose,
        config=dict(step.config),
        levels=list(step.levels),
    )


def standing_of(campaign: Campaign) -> tuple[str, dict[str, Any]]:
    """The key figures so far - the best, its gain over the baseline, the noise floor, launches
    used - in words and as data: what a model keeps in its todo list."""
    planner, h = campaign.planner, campaign.h
    r, space, levels = planner.read(h), planner.space, planner.settings.levels
    launches = f"{h.launches_used()} of {planner.settings.max_launches} launches used"
    figures: dict[str, Any] = {
        "launches_used": h.launches_used(),
        "max_launches": planner.settings.max_launches,
    }
    if not h.swept(space.baseline, levels):
        return f"Standing: the baseline is not swept yet; {launches}.", figures
    best, base = r.incumbent, r.value(space.baseline)
    value = r.value(best)
    gain = value / base - 1 if base else 0.0
    level_floor, objective_floor = r.floors
    figures |= {
        "best": dict(best),
        "value": round(value, 2),
        "baseline_value": round(base, 2),
        "gain": round(gain, 4),
        "noise_floor": None if objective_floor is None else round(objective_floor, 4),
    }
    text = (
        f"Standing: best {narrate.short(space, best)} {value:,.1f} vs baseline {base:,.1f} "
        f"({gain:+.1%}); {narrate.floors_text(level_floor, objective_floor)}; {launches}."
    )
    return text, figures


class PlanInput(ToolInput):
    pass


class Plan(Tool):
    name = "plan"
    Input = PlanInput

    async def run(self, ctx: ToolContext, inp: PlanInput) -> ToolResult:
        try:
            advice = advise(ctx.run.state, ctx.config)
        except SearchError as err:
            raise ToolError(f"the search space is not usable: {err}") from None
        return ToolResult(text=advice.text(), data=advice.data())
