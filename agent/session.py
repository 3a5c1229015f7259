"""Putting a run together: the config, the brain, the tools and the run folder, for run, resume
and replay alike."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from agent.brains.base import Brain
from agent.brains.models import check_model_config
from agent.brains.pricing import known_models
from agent.briefing import briefing
from agent.loop import Agent
from state.run import Run
from state.secrets import config_secrets, secret_values
from tools.base import Fleet, Tool, ToolBox, ToolContext
from tools.domain.config import Config, ConfigError, UsageError, redact
from tools.domain.config_toml import to_toml
from tools.registry import all_tools

AUTOPILOT = "autopilot"


def system_prompt(fleet: bool = False, pipeline: bool = False) -> str:
    """prompts/system.md; with a [pipeline], prompts/pipeline.md after it (its long jobs); on a
    fleet, prompts/fleet.md last. A campaign without them is not sent their sections."""
    parts = ["system.md", *(["pipeline.md"] if pipeline else []), *(["fleet.md"] if fleet else [])]
    text = [resources.files("prompts").joinpath(p).read_text().strip() for p in parts]
    return "\n\n".join(text)


def choose_model(requested: str | None, config: Config) -> tuple[str, str | None]:
    """The brain to use and a one-line notice to print, if any."""
    explicit = requested or (config.model.name if "name" in config.model.model_fields_set else None)
    name = explicit or config.model.name
    if name == AUTOPILOT:
        return AUTOPILOT, None
    if name not in known_models() and name not in config.model.prices:
        raise UsageError(
            f"unknown model {name!r}; use 'autopilot' or one of: " + ", ".join(known_models())
        )
    try:
        check_model_config(name, config.model)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if not os.environ.get("ANTHROPIC_API_KEY"):
        if explicit:
            raise UsageError(
                f"model {name} needs ANTHROPIC_API_KEY in the environment "
                "(or use --model autopilot)"
            )
        return (
            AUTOPILOT,
            "no ANTHROPIC_API_KEY set: using the autopilot brain (offline, deterministic)",
        )
    return name, None


def make_brain(model: str, config: Config) -> Brain:
    if model == AUTOPILOT:
        from agent.brains.autopilot import AutopilotBrain

        return AutopilotBrain(config)
    from agent.brains.anthropic import AnthropicBrain
    from agent.brains.client import PatientAnthropic, stall_timeout

    client = PatientAnthropic(timeout=stall_timeout(config.model.stall_timeout_s))
    return AnthropicBrain(model, prices=config.model.prices, client=client)


def make_context(
    run: Run, config: Config, progress: Any = None, fleet: Fleet | None = None
) -> ToolContext:
    from tools.hosts import HostPool

    pool = HostPool(config)
    return ToolContext(run=run, config=config, hosts=pool, progress=progress, fleet=fleet)


def run_tools(fleet: bool = False) -> list[Tool]:
    """The tools of a run: tools/registry's, and on one box the autopilot's planner as `plan`
    (issue 26.6: a brain may not be imported by tools/, so it joins here); on a fleet the
    controller plans, and run_trial stays last."""
    from agent.brains.autopilot.plan_tool import Plan

    return all_tools(fleet=True) if fleet else [*all_tools(), Plan()]


@dataclass
class Limits:
    max_steps: int | None = None
    max_usd: float | None = None
    max_minutes: float | None = None

    def resolve(self, config: Config) -> dict[str, float]:
        return {
            "max_steps": self.max_steps or config.budget.max_steps,
            "max_usd": self.max_usd if self.max_usd is not None else config.budget.max_usd,
            "max_minutes": self.max_minutes or config.budget.max_minutes,
        }


def start(
    goal: str,
    config: Config,
    model: str,
    runs_dir: Path,
    run_id: str | None,
    limits: Limits,
    **extra: Any,
) -> Run:
    """Create the run folder and its first event."""
    if not goal.strip():
        raise UsageError(
            "the goal is empty: say what the campaign should achieve, e.g. --goal 'beat baseline'"
        )
    run = Run.create(runs_dir, run_id)
    raw = pin_local_workdirs(config).model_dump(mode="json")
    run.scrub.values = secret_values(extra=config_secrets(raw))
    resolved = redact(raw)
    run.write_text("config.toml", to_toml(resolved))
    run.append(
        "run_started",
        run_id=run.id,
        goal=goal.strip(),
        brain=AUTOPILOT if model == AUTOPILOT else "anthropic",
        model=model,
        limits=limits.resolve(config),
        config=resolved,
        **process_fields(),
        **extra,
    )
    # the model is told its budget; the autopilot plans from the config (session briefing docs)
    told = None if model == AUTOPILOT else limits.resolve(config)
    text = briefing(goal.strip(), config, told)
    run.append("message", role="user", content=[{"type": "text", "text": text}])
    run.sync_todos_file()
    return run


def pin_local_workdirs(config: Config) -> Config:
    """The local host's default workdir is the folder the run started in; written out in full,
    so that the config a resume reloads (where every field counts as set) keeps it, and does not
    move it to the remote default ~/campaign."""
    hosts = [
        h.model_copy(update={"workdir": os.getcwd()})
        if h.address == "local" and "workdir" not in h.model_fields_set
        else h
        for h in config.hosts
    ]
    return config.model_copy(update={"hosts": hosts})


def process_fields() -> dict[str, Any]:
    """Who is writing the run: `watch` tells a live run from one whose process died."""
    return {"pid": os.getpid(), "hostname": socket.gethostname()}


def config_of(run: Run) -> Config:
    try:
        return Config.model_validate(run.state.config)
    except Exception as err:  # a run folder written by another version
        raise ConfigError(f"{run.path}: the recorded config no longer loads: {err}") from None


def make_agent(
    run: Run,
    brain: Brain,
    config: Config,
    tools: ToolBox | None = None,
    progress: Any = None,
    fleet: Fleet | None = None,
) -> Agent:
    """The loop of a run; with a `fleet`, run_trial among its tools and the fleet's section in
    its system prompt."""
    on_fleet = fleet is not None
    return Agent(
        run=run,
        brain=brain,
        tools=tools or ToolBox(run_tools(on_fleet)),
        ctx=make_context(run, config, progress, fleet),
        system=system_prompt(fleet=on_fleet, pipeline=config.pipeline is not None),
        max_tokens=config.model.max_tokens,
        overload_wait_minutes=config.model.overload_wait_minutes,
    )


async def wrap_up(agent: Agent, status: str | None = None) -> None:
    """Every run ends the same way: no server of ours left running, and a report."""
    from agent.report import write_report

    for name in list(agent.run.state.servers):  # one by one: a kill that cannot be recorded
        await agent.tools.call(agent.ctx, "kill_server", {"name": name})  # (a full disk) is done
    if agent.disk_full:  # nothing more can be written; the resumed run's end writes the report
        return
    agent.run.scrub.folder(agent.run.path)  # server logs were written by the servers themselves
    write_report(agent.run, status)
