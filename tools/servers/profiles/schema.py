"""The shape of an engine profile file (docs/configuration.md, "Engine profiles"): pydantic, every
unknown key an error, so a typo in a profile is caught when it is loaded, not mid-campaign."""

from __future__ import annotations

import re
import string
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tools.domain.engines import Metrics, Parallelism, Precision, Processes

DIAGNOSIS_FIELDS = {"port", "line", "match", "exception", "after"}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as err:
        raise ValueError(f"not a regular expression ({err}): {value!r}") from None
    return value


class Readiness(Strict):
    health_path: str = Field(default="/health", pattern=r"^/")  # polled until it answers 200
    ready_lines: list[str] = []  # regexes; one of them in the log = ready ([]: no line awaited)
    completion: bool = True  # and one real streamed completion before "ready"

    @field_validator("ready_lines")
    @classmethod
    def regexes(cls, v: list[str]) -> list[str]:
        return [_regex(p) for p in v]


class PrefixCache(Strict):
    """How a measurement gets a cold prefix cache: POST a reset endpoint, a request field that
    turns reuse off (the benchmark's extra_body), or prompts never sent before."""

    reset: Literal["post", "request_field", "fresh_prompts"] = "fresh_prompts"
    path: str | None = Field(default=None, pattern=r"^/")  # for reset = "post"
    request_fields: dict[str, Any] = {}  # for reset = "request_field"

    @model_validator(mode="after")
    def complete(self) -> PrefixCache:
        if self.reset == "post" and not self.path:
            raise ValueError('reset = "post" needs path (e.g. "/flush_cache")')
        if self.reset == "request_field" and not self.request_fields:
            raise ValueError('reset = "request_field" needs request_fields')
        return self


class Tokens(Strict):
    """The server's own tokenizer endpoint, so input_len is exact ("" or absent: none)."""

    tokenize_path: str = Field(default="", pattern=r"^(/.*)?$")
    text_field: str = "content"  # the request's field holding the text
    tokens_field: str = "tokens"  # the response's list of token ids


class Version(Strict):
    """Commands that print the engine's version, tried in order; the first whose output matches
    `pattern` (group 1, multi-line) wins. {exe} is the command's program, {launcher} the command
    without its flags."""

    commands: list[str] = []
    pattern: str = r"(\S+)"

    @field_validator("pattern")
    @classmethod
    def one_group(cls, v: str) -> str:
        if re.compile(_regex(v)).groups < 1:
            raise ValueError(f"pattern needs a group around the version: {v!r}")
        return v


class FlagCheck(Strict):
    """Before a launch: "help" = the flags `help_command` lists (cached per engine version),
    "python" = the engine's own parser `module:function`, called with the argv (it raises on a
    command line the engine would refuse), "none" = learned from a failed start."""

    check: Literal["none", "help", "python"] = "none"
    help_command: str = "{exe} --help"
    parser: str | None = Field(default=None, pattern=r"^[\w.]+:\w+$")

    @model_validator(mode="after")
    def complete(self) -> FlagCheck:
        if self.check == "python" and not self.parser:
            raise ValueError('check = "python" needs parser = "module:function"')
        return self


class Bench(Strict):
    """How the engine is measured by default (agent.toml's [bench] overrides it)."""

    # the least a closed level lasts, past its requests (docs/benchmark.md): a real engine's
    # level of 10-30 requests can be a second, too short to average out a scheduler hiccup;
    # 0: the requests alone (the simulator, whose lab decides on counts)
    min_level_s: float = Field(default=5.0, ge=0, allow_inf_nan=False)


class Speculation(Strict):
    switches: list[str] = []  # flags that turn speculative decoding on (any value but false)
    dependents: list[str] = []  # its parameters: meaningful only while it is on


class Failure(Strict):
    pattern: str
    diagnosis: str  # one line; {port} {line} {match} {exception} {after} are filled in
    # what code reads of it (the words are the model's): "port_busy" - another process holds
    # the port, which says nothing about the configuration
    cause: Literal["", "port_busy"] = ""

    @field_validator("pattern")
    @classmethod
    def regex(cls, v: str) -> str:
        return _regex(v)

    @field_validator("diagnosis")
    @classmethod
    def fields(cls, v: str) -> str:
        try:
            names = {f for _, f, _, _ in string.Formatter().parse(v) if f is not None}
        except ValueError as err:
            raise ValueError(f"malformed diagnosis ({err}): {v!r}") from None
        unknown = names - DIAGNOSIS_FIELDS
        if unknown:
            raise ValueError(
                f"diagnosis uses {{{sorted(unknown)[0]}}}: only {sorted(DIAGNOSIS_FIELDS)} are "
                "filled in"
            )
        return v


class Profile(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    inherits: str | None = None  # a built-in profile whose tables this one starts from
    port_flag: str = "--port"
    loopback: str = ""  # added unless the command sets --host (vLLM binds every interface)
    workers: list[str] = []  # worker process names (they may outlive the main process)
    image: str = ""  # the engine's container image, for the run's deploy/ files ("": none known)
    readiness: Readiness = Readiness()
    prefix_cache: PrefixCache = PrefixCache()
    tokens: Tokens = Tokens()
    version: Version = Version()
    flags: FlagCheck = FlagCheck()
    speculation: Speculation = Speculation()
    bench: Bench = Bench()
    failures: list[Failure] = []
    # read by the layers below the lifecycle too (tools/domain/engines.py): the GPU count, the
    # /metrics names, the launchers and process names, the flags whose value is a file
    parallelism: Parallelism = Parallelism()
    metrics: Metrics = Metrics()
    processes: Processes = Processes()
    file_flags: list[str] = []  # flags whose value is a file the engine reads (deploy/ carries it)
    precision: Precision = Precision()  # the flags of the dtypes it serves in (the floor's bytes)
