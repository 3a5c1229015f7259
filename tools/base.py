"""The tool protocol: a pydantic input model, a description from prompts/tools/NAME.md, and
an async `run(ctx, input)` that returns text for the model, an is_error flag and structured data.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from tools.domain.config import Config
from tools.errors import ToolError as ToolError  # every tool imports it from here
from tools.hosts import Host, HostError, HostPool

if TYPE_CHECKING:
    from state.run import Run
    from tools.domain.fleet_config import FleetConfig
    from tools.fleet.ray_backend import Submitted
    from tools.fleet.trial import TrialOutcome, TrialSpec


class ToolInput(BaseModel):
    """Base of every tool's input: unknown fields are errors, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


class ToolResult(BaseModel):
    text: str
    is_error: bool = False
    data: dict[str, Any] = {}


# The result of a call that a crash of the agent cut short, written by `agent resume`
# (agent/recover.py); a brain that sees it knows the call is no verdict.
INTERRUPTED_PREFIX = "interrupted: the agent process stopped"
INTERRUPTED = (
    INTERRUPTED_PREFIX + " while this {name} call ran (a crash or a kill), so "
    "it may have run in part; the run was resumed. Check what it did before you repeat it."
)


class Progress(Protocol):
    """`progress(kind, **info)`: what a running tool reports for the terminal and `agent watch`."""

    def __call__(self, kind: str, /, **info: Any) -> None: ...


class Fleet(Protocol):
    """Where run_trial places trials: tools/fleet/ray_backend.RayFleet (a fake in tests)."""

    config: FleetConfig

    def submit(self, spec: TrialSpec, avoid: str | None = None, attempt: int = 1) -> None: ...

    async def wait(self, trial_id: str) -> tuple[Submitted, TrialOutcome]: ...


@dataclass
class ToolContext:
    """What a tool may reach. Fields beyond `run` and `config` are filled as the features exist."""

    run: Run
    config: Config
    hosts: HostPool | None = None
    progress: Progress | None = None  # terminal progress bars (agent/view/bars.py), or None
    extras: dict[str, Any] = field(default_factory=dict)
    fleet: Fleet | None = None  # a run on a fleet (agent run --fleet): run_trial places trials
    # the minutes the run's minutes budget leaves now (None: no such budget), as the loop counts
    # them (agent/supervision.py): a tool that measures in rounds starts none it cannot end
    minutes_left: Callable[[], float | None] = lambda: None


def host_for(ctx: ToolContext, name: str | None) -> Host:
    """The host a tool call names (default: the server's), or a ToolError the model can act on."""
    if ctx.hosts is None:
        raise ToolError("no hosts are configured for this run")
    try:
        return ctx.hosts.get(name)
    except HostError as err:
        raise ToolError(str(err)) from None


class Tool:
    name: ClassVar[str]
    Input: ClassVar[type[ToolInput]]

    async def run(self, ctx: ToolContext, inp: Any) -> ToolResult:
        raise NotImplementedError

    @classmethod
    def spec(cls) -> dict[str, Any]:
        return _spec(cls.name, cls.Input)


@cache
def _spec(name: str, model: type[ToolInput]) -> dict[str, Any]:
    """The API definition. Cached, and built deterministically: prompt caching needs the tool
    definitions byte-identical on every call."""
    schema = _strip_titles(model.model_json_schema())
    schema.pop("description", None)
    return {"name": name, "description": description(name), "input_schema": schema}


def description(name: str) -> str:
    return resources.files("prompts").joinpath("tools", f"{name}.md").read_text().strip()


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: _strip_titles(v)
            for k, v in node.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


ERRORS_SHOWN = 10  # a list of 50 items each wrong is 50 errors: the first ones say enough


def format_validation_error(err: ValidationError) -> str:
    """One line per error, one line in all for one error; at most ERRORS_SHOWN of them."""
    lines = []
    errors = err.errors()
    for e in errors[:ERRORS_SHOWN]:
        loc = ".".join(str(p) for p in e["loc"]) or "(input)"
        got = json.dumps(e.get("input"), default=str)
        if len(got) > 80:
            got = got[:77] + "..."
        lines.append(f"{loc}: {e['msg']} (got {got})")
    if len(errors) > ERRORS_SHOWN:
        lines.append(f"... and {len(errors) - ERRORS_SHOWN} more errors")
    return (
        "invalid input: " + lines[0] if len(lines) == 1 else "invalid input:\n" + "\n".join(lines)
    )


class ToolBox:
    """The tools of a run: their specs, and one entry point that never raises."""

    def __init__(self, tools: list[Tool]) -> None:
        self.tools = {t.name: t for t in tools}

    def specs(self) -> list[dict[str, Any]]:
        return [t.spec() for t in self.tools.values()]

    async def call(
        self, ctx: ToolContext, name: str, raw_input: Any, call_id: str = ""
    ) -> tuple[ToolResult, float]:
        start = time.perf_counter()
        result = await self._call(ctx, name, raw_input)
        return result, time.perf_counter() - start

    async def _call(self, ctx: ToolContext, name: str, raw_input: Any) -> ToolResult:
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self.tools))
            return ToolResult(text=f"unknown tool {name!r}; known tools: {known}", is_error=True)
        try:
            inp = tool.Input.model_validate(raw_input)
        except ValidationError as err:
            return ToolResult(text=format_validation_error(err), is_error=True)
        try:
            return await tool.run(ctx, inp)
        except ToolError as err:
            return ToolResult(text=str(err), is_error=True, data=err.data)
        except Exception as err:  # a bug in a tool must not end the campaign
            where = traceback.extract_tb(err.__traceback__)[-1]
            return ToolResult(
                text=f"{name} failed: {type(err).__name__}: {err} "
                f"(at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})",
                is_error=True,
            )
