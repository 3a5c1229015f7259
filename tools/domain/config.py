"""agent.toml: pydantic-validated, unknown keys are errors that name the key.

Without a config file the built-in lab is used: the simulator on this machine, the local host and
the simulator's default search space (see `lab_config`).
"""

from __future__ import annotations

import difflib
import os
import shlex
import socket
import sys
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from state.numbers import (
    Count,
    Dollars,
    Factor,
    Fraction,
    Milliseconds,
    Minutes,
    Port,
    Rate,
    Seconds,
    Seed,
    Steps,
    Usd,
)
from state.secrets import MASK, is_secret_word
from tools.domain import engines
from tools.domain.cost import CostConfig
from tools.domain.fleet_config import FleetConfig
from tools.domain.permission_rules import RuleError, parse_rule
from tools.domain.physics import HardwareConfig
from tools.domain.pipeline import PipelineConfig

Scalar = bool | int | float | str


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HostConfig(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    address: str = (
        "local"  # "local" or ssh://[user@]host[:port] (host may be a ~/.ssh/config alias)
    )
    identity_file: str | None = None
    known_hosts: str = "~/.ssh/known_hosts"  # a path, or "accept-new"
    workdir: str = "~/campaign"
    allow_paths: list[str] = []  # absolute paths outside workdir that put_file/get_file may touch
    keepalive_s: Seconds = 15.0
    connect_timeout_s: Seconds = 15.0

    @field_validator("address")
    @classmethod
    def address_form(cls, v: str) -> str:
        if v != "local" and not (v.startswith("ssh://") and len(v) > len("ssh://")):
            raise ValueError('use "local" or ssh://[user@]host[:port]')
        if v != "local":
            try:
                port = urlsplit(v).port  # raises on a port that is no number from 0 to 65535
            except ValueError:
                port = 0
            if port == 0:
                raise ValueError("the port is not a number from 1 to 65535")
            if urlsplit(v).password is not None:  # unused, and it would be written in clear
                raise ValueError(
                    "a password in the address is refused: log in with a key "
                    "(identity_file) or an ssh-agent"
                )
        return v


# the engine profiles shipped in tools/servers/profiles/*.toml, by their names
BUILTIN_ENGINES = engines.names()


class ServerConfig(Strict):
    profile: str | None = None  # an engine profile file (relative to agent.toml's folder)
    engine: str = "sim"  # a built-in engine profile; with `profile` only a label
    host: str = "local"
    name: str = "server"
    command: str
    port: Port = 30000
    model: str | None = None  # the model name the API serves; default: from the engine's /v1/models
    ready_timeout_s: Seconds = 1800
    kill_timeout_s: Seconds = 30
    ready_line: str | None = (
        None  # overrides the engine profile's ready line (docs/configuration.md)
    )
    health_path: str | None = None  # overrides the engine profile's health endpoint
    allow_public_bind: bool = False  # let start_server run a server with a non-loopback --host
    # the host runs two servers of the campaign at once (a CPU box, disjoint GPU sets): the
    # autopilot proves its winner in a duet with the baseline beside it, not in launch pairs
    side_by_side: bool = False

    @field_validator("engine")
    @classmethod
    def engine_known(cls, engine: str, info: ValidationInfo) -> str:
        if info.data.get("profile") is None and engine not in BUILTIN_ENGINES:
            hint = difflib.get_close_matches(engine, BUILTIN_ENGINES, n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ValueError(
                f"unknown engine{more}: one of {', '.join(BUILTIN_ENGINES)}, or set "
                "server.profile to an engine profile file"
            )
        return engine


class BenchDeadlines(Strict):
    """[bench.deadlines]: the benchmark client's deadlines (tools/bench/deadlines.py `Deadlines`,
    whose field names these are; a test keeps the two in step). None: the client's default."""

    # each a finite number above 0 (state/numbers.py): true, "30", inf and 1e-300 are refused,
    # as a typo that would leave a wait unbounded, the TOML's boolean taken for 1 s, or no wait
    head_s: Seconds | None = None  # first response byte -> headers complete
    first_token_s: Seconds | None = None  # send -> first token
    pace_tok_s: Rate | None = None  # the slowest tokens/s of one stream a request may keep
    floor_s: Seconds | None = None  # no request's total deadline is shorter
    slack: Factor | None = None  # x the level's learned seconds per token
    level_s: Seconds | None = None  # a whole level's; default: derived from its shape
    probe_s: Seconds | None = None  # one probe (/v1/models, /server_info, /tokenize, ...)

    def given(self) -> dict[str, float]:
        """The deadlines this config sets (the rest are the client's defaults)."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class BenchConfig(Strict):
    concurrency: list[Count] = Field(default=[1, 2, 5, 10, 30, 70, 100, 250], min_length=1)
    input_len: Count = 512
    max_tokens: Count = 512
    requests_per_level: Count | None = None  # default: 5 x C (at least 10)
    warmup_requests: Annotated[Count, Field(ge=0)] = 2
    endpoint: Literal["completions", "chat"] = "completions"
    client: Literal["local", "forward", "remote"] = "forward"  # forward = through SSH when remote
    remote_command: str | None = (
        None  # e.g. "vllm bench serve ... --save-result --result-filename {out}"
    )
    seed: Seed = 0
    # the workload (docs/benchmark.md, Workloads): where prompts come from, how requests arrive
    dataset: str = Field(default="random", pattern=r"^(random|chat|code|sharegpt:.+|jsonl:.+)$")
    lengths: Literal["data", "fixed"] | None = None  # None: a dataset's own, random's max_tokens
    request_rate: list[Rate] | None = None  # open-loop levels (req/s)
    burstiness: Factor | Literal["constant"] = 1.0  # 1: Poisson arrivals
    duration_s: Seconds | None = None  # seconds per level
    # the least a closed level lasts (past its requests, up to 16 x them); None: the engine
    # profile's (5 s on real engines, none on the simulator); 0: the requests alone
    min_level_s: Annotated[Seconds, Field(ge=0)] | None = None
    slo: dict[Literal["ttft_ms", "tpot_ms", "e2el_ms"], Milliseconds] = {}
    shared_prefix: Annotated[Count, Field(ge=0, le=100_000)] = 0  # system-prompt tokens shared
    multi_turn: bool = False  # replay the dataset's conversations turn by turn
    deadlines: BenchDeadlines = BenchDeadlines()  # [bench.deadlines] (docs/benchmark.md)

    @model_validator(mode="after")
    def multi_turn_needs_conversations(self) -> BenchConfig:
        # the same rule as agent bench --multi-turn, said once at load time, not at every sweep
        if self.multi_turn and self.dataset.partition(":")[0] not in ("sharegpt", "jsonl"):
            raise ValueError(
                "multi_turn needs conversations: dataset = 'sharegpt:FILE' or 'jsonl:FILE'"
            )
        if self.multi_turn and self.request_rate:
            raise ValueError("multi_turn runs closed loops: drop request_rate")
        return self


class ObjectiveConfig(Strict):
    kind: Literal["geomean", "level", "peak", "slo", "max_load"] = "geomean"
    level: Count | None = None  # for kind = "level"
    ttft_p99_ms: Milliseconds | None = None  # for kind = "slo" and "max_load"
    tpot_p99_ms: Milliseconds | None = None
    # the autopilot measures more (repeats) while the objective's noise floor is above this
    precision: Fraction = 0.02


BUDGET_WARN_AT = 0.8  # share of a budget at which the run is told to wrap up (agent/supervision)


class BudgetConfig(Strict):
    """[budget]: the same bounds as `agent run --max-*`, `agent budget` and the log's limits
    (state/numbers.py); a budget cannot be switched off, only set high."""

    max_steps: Steps = 300
    max_usd: Dollars = 25.0
    max_minutes: Minutes = 24 * 60


class ModelConfig(Strict):
    name: str = "claude-sonnet-4-6"  # a Claude model id, or "autopilot"; no API key: autopilot
    max_tokens: Count = 32_000  # per reply, thinking included; streamed
    # "auto": adaptive where the model has it, else a thinking budget; or adaptive/enabled/off
    thinking: Literal["auto", "adaptive", "enabled", "off"] = "auto"
    thinking_budget: Annotated[Count, Field(ge=1024)] = 16_000  # thinking tokens, for "enabled"
    # API overloaded: pause, then end (0: end at once)
    overload_wait_minutes: Annotated[Minutes, Field(ge=0)] = 30
    # the longest a response may go without a byte (a stalled stream, the connection open): past
    # it the stream counts as broken and is retried (the SDK's own read timeout is 600 s)
    stall_timeout_s: Seconds = 90
    prices: dict[str, dict[str, Usd]] = {}  # model id -> {"input", "output", ...} USD per Mtok


class CompactionConfig(Strict):
    threshold_tokens: Count = 120_000  # compact when a prompt passes this
    keep_turns: Count = 6  # the last turns kept verbatim after a summary
    keep_tool_tokens: Count = 40_000  # newest tool output kept when pruning


class GuardConfig(Strict):
    """What the model's bash may run (docs/configuration.md [guard], docs/reliability.md)."""

    # rules as Claude Code writes them: `Bash(pip install:*)`, `kill -0:*`, `Bash(reboot)`; an
    # allow rule lets a matching simple command run outside the sandbox, a deny rule refuses it
    # (deny wins)
    allow: list[str] = []
    deny: list[str] = []
    # run what the rules do not allow outright in bubblewrap where the host has it; false: refuse it
    sandbox: bool = True

    @field_validator("allow", "deny")
    @classmethod
    def rules(cls, rules: list[str]) -> list[str]:
        for rule in rules:  # a bad one would make every bash call fail, much later
            try:
                parse_rule(rule)
            except RuleError as err:
                raise ValueError(str(err)) from None
        return rules


class FilesConfig(Strict):
    # absolute folders on this machine that put_file may read and get_file may write, beyond the
    # run folder (the far end has its host's workdir and allow_paths)
    allow_local: list[str] = []

    @field_validator("allow_local")
    @classmethod
    def absolute(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not Path(path).expanduser().is_absolute():
                raise ValueError(f"{path!r} is not an absolute path")
        return paths


class Config(Strict):
    hosts: list[HostConfig] = [HostConfig(name="local")]
    server: ServerConfig
    bench: BenchConfig = BenchConfig()
    search: dict[str, Any] = {}  # flag -> candidate values, plus "requires" and "baseline" tables
    objective: ObjectiveConfig = ObjectiveConfig()
    budget: BudgetConfig = BudgetConfig()
    model: ModelConfig = ModelConfig()
    compaction: CompactionConfig = CompactionConfig()
    guard: GuardConfig = GuardConfig()
    files: FilesConfig = FilesConfig()
    pipeline: PipelineConfig | None = None  # long jobs before the campaign (docs/pipeline.md)
    fleet: FleetConfig | None = None  # trials in parallel on a Ray cluster (docs/fleet.md)
    cost: CostConfig | None = None  # the hardware's price: $ per million tokens in the report
    # the box and the model where nothing else tells (docs/physics.md): each level's floor
    hardware: HardwareConfig | None = None
    source: str = "built-in lab"  # where this config came from (not a TOML key users set)
    # the built-in lab, alone or under a file's sections (no server.command of the file's own):
    # `agent run --fleet ray` starts its simulated boxes (not a TOML key users set)
    lab: bool = False

    @model_validator(mode="after")
    def hosts_known(self) -> Config:
        names = [h.name for h in self.hosts]
        if len(set(names)) != len(names):
            raise ValueError(f"host names must be unique: {names}")
        if self.server.host not in names:
            raise ValueError(f"server.host {self.server.host!r} is not one of the hosts: {names}")
        return self

    def host(self, name: str) -> HostConfig:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)


class ConfigError(Exception):
    """A config the user must fix; the message is one line naming the offending key."""


class UsageError(Exception):
    """Bad usage: one line on stderr, exit 2."""


# agent.toml is a page or two: a file past this is no agent.toml (`--config /dev/zero`, a log or a
# model given by mistake) and is not read to its end
MAX_CONFIG_BYTES = 1 << 20
# the deepest nesting of tables and arrays agent.toml needs is 4 ([search.requires] flag = {...});
# a file nested thousands deep would overflow the parser's recursion and every walk after it
MAX_DEPTH = 32


def load_config(path: Path | None) -> Config:
    """agent.toml, validated; None: the built-in lab. A file that leaves `server.command` out (and
    names no other engine) is the built-in lab with the user's sections over it: what it does not
    say keeps the lab's values (128-token answers, a 120 s ready timeout, its search space)."""
    if path is None:
        return lab_config()
    raw = _read_toml(path)
    problem = _unpassable(raw)
    if problem:
        raise ConfigError(f"{path}: {problem}")
    if not isinstance(raw.get("server", {}), dict):
        raise ConfigError(f"{path}: server must be a table ([server]), got {raw['server']!r}")
    lab = lab_config()
    server = raw.setdefault("server", {})
    simulated = server.get("engine", "sim") == "sim" and not server.get("profile")
    on_lab = simulated and "command" not in server
    if on_lab:  # the lab's own values where the file says nothing (a section it adds changes
        # only what it says): the lab's differ from a real box's defaults
        given = lab.model_dump(exclude_unset=True, exclude={"search", "source", "lab"})
        for section, values in given.items():
            if isinstance(raw.get(section, {}), dict):
                raw[section] = {**values, **raw.get(section, {})}
        raw["lab"] = True
    server.setdefault("command", lab.server.command)
    _resolve_profile(server, path)
    raw.setdefault("search", lab.search if simulated else {})
    try:
        return Config.model_validate({**raw, "source": str(path)})
    except ValidationError as err:
        raise ConfigError(f"{path}: {explain(err, raw)}") from None


# what the lab's own box is (its engine, where it runs, how it starts): no default of another box
LAB_BOX = {"server": {"engine", "host", "command", "port"}}


def defaults_note(config: Config) -> str | None:
    """Where a box's config takes a real box's default that is not the lab's (the file leaves the
    key out): one line naming each, with both values - so a campaign that runs 2.5x as long per
    sweep as the lab's says why (`agent run` prints it). None: the lab, or nothing differs."""
    if config.lab:
        return None
    lab = lab_config(port=1)  # a port of its own: no socket is probed for a note
    differ = []
    for section, values in lab.model_dump(exclude_unset=True, exclude={"search", "lab"}).items():
        mine = getattr(config, section, None)
        if not isinstance(values, dict) or mine is None:
            continue
        for key, theirs in values.items():
            if key in LAB_BOX.get(section, set()) or key in mine.model_fields_set:
                continue
            if getattr(mine, key) != theirs:
                differ.append(
                    f"{section}.{key} = {_said(getattr(mine, key))} (the lab's {_said(theirs)})"
                )
    if not differ:
        return None
    return (
        f"{config.source}: a box's defaults where it says nothing, not the lab's: "
        f"{', '.join(differ)}; set them there to change them"
    )


def _said(value: Any) -> str:
    return (
        f"{value:g}"
        if isinstance(value, int | float) and not isinstance(value, bool)
        else repr(value)
    )


def _read_toml(path: Path) -> dict[str, Any]:
    """The file's TOML, read up to MAX_CONFIG_BYTES; each failure one line."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} not found") from None
    except OSError as err:  # a folder, no permission, ...
        raise ConfigError(f"cannot read config file {path}: {err.strerror or err}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{path} is larger than {MAX_CONFIG_BYTES >> 20} MiB: not an agent.toml "
            "(it is read no further)"
        )
    try:
        return tomllib.loads(data.decode())
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not a text file (agent.toml is UTF-8 TOML)") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: malformed TOML: {err}") from None
    except RecursionError:  # the parser recurses once per level of [[[...]]] or {a = {b = ...}}
        raise ConfigError(
            f"{path}: tables or arrays nested too deep (agent.toml needs at most {MAX_DEPTH} "
            "levels)"
        ) from None


def _unpassable(raw: dict[str, Any]) -> str | None:
    """What no program, path or walk of the config could take, naming the key: nesting past
    MAX_DEPTH, or a NUL character (`"\\u0000"`) in a string or a key - no command line, file name
    or environment variable can hold one."""
    todo: list[tuple[str, Any, int]] = [("", raw, 1)]
    while todo:
        where, value, depth = todo.pop()
        if depth > MAX_DEPTH:
            top = where.split(".", 1)[0]  # the key it starts under (the rest: .0.0.0...)
            return f"{top}: nested deeper than {MAX_DEPTH} levels of tables and arrays"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            at = f"{where}.{key}" if where else str(key)
            if "\0" in at or (isinstance(item, str) and "\0" in item):
                key = at if at.isprintable() else repr(at)
                return f"{key}: a NUL character (\\u0000) cannot be passed to a program"
            if isinstance(item, dict | list):
                todo.append((at, item, depth + 1))
    return None


def _resolve_profile(server: dict[str, Any], path: Path) -> None:
    """server.profile is relative to agent.toml's folder; it must exist."""
    profile = server.get("profile")
    if not isinstance(profile, str):
        return  # absent, or a type error the model names
    where = (path.parent / Path(profile).expanduser()).resolve()
    if not where.is_file():
        raise ConfigError(f"{path}: server.profile: engine profile {where} not found")
    server["profile"] = str(where)


def explain(err: ValidationError, raw: Any = None) -> str:
    """The first problem as one line, with a did-you-mean for unknown keys. With the input it
    was validated from, the key is named as the file spells it (without the union member a
    number | "constant" field's error adds)."""
    e = err.errors()[0]
    loc = ".".join(str(p) for p in _key_path(e["loc"], raw))
    if e["type"] == "extra_forbidden":
        key = str(e["loc"][-1])
        hint = difflib.get_close_matches(key, _known_keys(e["loc"][:-1]), n=1)
        more = f" (did you mean {hint[0]!r}?)" if hint else ""
        return f"unknown key {loc!r}{more}"
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{loc}: {e['msg']} (got {_without_password(e.get('input'))!r}){more}"


def _key_path(loc: tuple[Any, ...], raw: Any) -> tuple[Any, ...]:
    """The parts of an error's location that are keys (or indexes) of the input: a part past a
    leaf is a union member's tag; one a table lacks (a missing field) is named all the same."""
    if raw is None:
        return loc
    out: list[Any] = []
    node, unknown = raw, object()
    for part in loc:
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        ):
            node = node[part]
        elif isinstance(node, dict | list):
            node = unknown
        elif node is not unknown:
            continue
        out.append(part)
    return tuple(out)


def _without_password(value: Any) -> Any:
    """An address as given, its password masked: the error line must not print it."""
    if isinstance(value, str) and "://" in value:
        try:
            password = urlsplit(value).password
        except ValueError:
            return value
        if password:
            return value.replace(f":{password}@", f":{MASK}@", 1)
    return value


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    model: Any = Config
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return []
        ann = field.annotation
        model = getattr(ann, "__args__", (ann,))[0] if hasattr(ann, "__args__") else ann
    return list(getattr(model, "model_fields", {}))


def free_port(first: int) -> int:
    """The first port from `first` up that nothing listens on: the lab must start even where
    another server holds SGLang's default port."""
    for port in range(first, first + 100):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    return first


def lab_config(time_scale: float | None = None, port: int | None = None) -> Config:
    """The built-in lab: the simulator on this machine, as the reference box."""
    from sim.space import DEFAULT_BASE_FLAGS, default_space  # the lab's truth lives with the sim

    scale = time_scale if time_scale is not None else _env_scale()
    command = shlex.join(
        [sys.executable, "-m", "sim", "--time-scale", f"{scale:g}", *DEFAULT_BASE_FLAGS]
    )
    return Config(
        lab=True,
        server=ServerConfig(
            engine="sim",
            host="local",
            command=command,
            port=port or free_port(30000),
            ready_timeout_s=120,
        ),
        # every streamed token is an SSE chunk both sides pay CPU for (~20k chunks/s on 2 cores):
        # 128-token answers keep a full 8-level sweep near 20 s; the ranking of the space and
        # its crossover are the same as with 512 (sim.truth)
        bench=BenchConfig(max_tokens=128),
        search=default_space(),
    )


def _env_scale() -> float:
    text = os.environ.get("AGENT_LAB_TIME_SCALE", "20")
    try:
        scale = float(text)
    except ValueError:
        scale = 0.0
    if not scale > 0:
        raise ConfigError(f"AGENT_LAB_TIME_SCALE must be a number > 0, got {text!r}")
    return scale


def redact(obj: Any, under_secret: bool = False) -> Any:
    """A copy with every string under a secret-looking name replaced (numbers such as
    max_tokens are counts, not secrets)."""
    if isinstance(obj, dict):
        return {k: redact(v, under_secret or is_secret_word(str(k))) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v, under_secret) for v in obj]
    return MASK if under_secret and isinstance(obj, str) and obj else obj
