"""The tool protocol: a pydantic input model, a description from prompts/tools/NAME.md, and
an async `run(ctx, input)` that returns text for the model, an is_error flag and structured data.
"""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

if TYPE_CHECKING:
    from state.run import Run


class ToolInput(BaseModel):
    """Base of every tool's input: unknown fields are errors, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


class ToolResult(BaseModel):
    text: str
    is_error: bool = False
    data: dict[str, Any] = {}


class ToolError(Exception):
    """Raised inside a tool for an error the model caused and can act on (one clear line)."""


@dataclass
class ToolContext:
    """What a tool may reach. Fields beyond `run` and `config` are filled as the features exist."""

    run: Run
    config: Any  # agent.config.Config; typed loosely so tools/ does not import agent/
    hosts: Any = None  # tools.hosts.HostPool
    progress: Any = None  # a callable(kind, **info) for terminal progress, or None
    extras: dict[str, Any] = field(default_factory=dict)


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


def format_validation_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(input)"
        got = json.dumps(e.get("input"), default=str)
        if len(got) > 80:
            got = got[:77] + "..."
        lines.append(f"{loc}: {e['msg']} (got {got})")
    return "invalid input:\n" + "\n".join(lines)


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
            return ToolResult(text=str(err), is_error=True)
        except Exception as err:  # a bug in a tool must not end the campaign
            where = traceback.extract_tb(err.__traceback__)[-1]
            return ToolResult(
                text=f"{name} failed: {type(err).__name__}: {err} "
                f"(at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})",
                is_error=True,
            )
