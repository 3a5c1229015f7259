"""What every layer knows of an engine, read from its profile (tools/servers/profiles/*.toml,
docs/engines.md "What a profile holds"): the parts of the profile schema that the layers below
the server lifecycle read - the domain (a configuration's GPU count, the built-in engines'
names), the guard (the engine's launchers and process names) and the benchmark client (its
/metrics names) - and the reading of the profile files themselves, so that these layers read the
same files as the lifecycle and a new engine is one profile file, no code.

tools/servers/profiles/schema.py holds the whole profile, these tables among its fields; a
built-in profile is validated whole when tools.servers.profiles is imported, and its knowledge
here the first time a layer below asks."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# the built-in profiles, one TOML per engine (shipped with the package)
PROFILES = Path(__file__).resolve().parent.parent / "servers" / "profiles"


class ProfileError(Exception):
    """A profile the user must fix; the message is one line naming the file and the key."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def flag_key(flag: str) -> str:
    """A flag's name spelled one way: `--tp_size`, `--tp-size` and `tp-size` alike, and vLLM's
    `-tp` as `--tp` (a benchmark result's command is normalized so: tools/bench/confighash)."""
    return flag.lstrip("-").replace("_", "-")


def _size(value: object) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return max(1, int(float(str(value))))
    except ValueError:
        return None


def _merged(lists: Iterable[Iterable[Any]]) -> list[Any]:
    """The lists one after the other, each item once, in the order first seen."""
    out: list[Any] = []
    for items in lists:
        out += [x for x in items if x not in out]
    return out


class Parallelism(Strict):
    """The flags of a server's GPU count, as the engine spells them: tensor x pipeline x data x
    context parallel sizes (each 1 where absent or unreadable). Expert parallelism spreads a
    MoE's experts over those same GPUs (vLLM, SGLang, TensorRT-LLM alike) and adds none."""

    MULTIPLY: ClassVar[tuple[str, ...]] = ("tensor", "pipeline", "data", "context")

    tensor: list[str] = []
    pipeline: list[str] = []
    data: list[str] = []
    context: list[str] = []
    expert: list[str] = []  # known as parallelism, not multiplied

    @field_validator("tensor", "pipeline", "data", "context", "expert")
    @classmethod
    def flags(cls, v: list[str]) -> list[str]:
        bad = [f for f in v if not f.startswith("-")]
        if bad:
            raise ValueError(f"not a flag: {bad[0]!r}")
        return v

    def gpus(self, flags: Mapping[str, object]) -> int:
        """The GPUs a command's flags ask for (flags in any spelling: flag_key)."""
        given = {flag_key(name): value for name, value in flags.items()}
        n = 1
        for kind in self.MULTIPLY:
            names: list[str] = getattr(self, kind)
            n *= next((s for f in names if (s := _size(given.get(flag_key(f)))) is not None), 1)
        return n

    def counted(self) -> list[str]:
        """The flags that multiply into the GPU count."""
        return _merged(getattr(self, kind) for kind in self.MULTIPLY)

    @classmethod
    def union(cls, many: Iterable[Parallelism]) -> Parallelism:
        many = list(many)
        kinds = (*cls.MULTIPLY, "expert")
        return cls.model_validate({k: _merged(getattr(p, k) for p in many) for k in kinds})


class Metrics(Strict):
    """The engine's Prometheus names for the benchmark's server metrics over time
    (tools/bench/server_metrics.py): a request count is summed over its label sets, a fraction
    averaged; the first name of a list the server serves is the one read."""

    path: str = Field(default="/metrics", pattern=r"^/")  # where the Prometheus text is served
    running: list[str] = []  # requests being decoded
    waiting: list[str] = []  # requests queued
    kv_cache: list[str] = []  # the KV cache's use, 0-1
    accept_length: list[str] = []  # a gauge: tokens per verification step (the bonus counted)
    # (drafts, accepted tokens) counters: 1 + accepted / drafts over an interval
    spec_counters: list[tuple[str, str]] = []
    # the draft tokens proposed, a counter: accepted / drafted is the acceptance rate
    spec_draft_tokens: list[str] = []

    def named(self) -> bool:
        return bool(self.running or self.waiting or self.kv_cache or self.accept_length)

    @classmethod
    def union(cls, many: Iterable[Metrics]) -> Metrics:
        many = list(many)
        kinds = (
            "running",
            "waiting",
            "kv_cache",
            "accept_length",
            "spec_counters",
            "spec_draft_tokens",
        )
        return cls.model_validate({k: _merged(getattr(m, k) for m in many) for k in kinds})


class Precision(Strict):
    """The flags of the dtypes a configuration serves in, as the engine spells them, and how it
    reads their absence (the floor's bytes follow them: tools/domain/physics.py `Served`)."""

    dtype: list[str] = []  # the weights' and activations' dtype (vLLM, SGLang: --dtype)
    kv_cache_dtype: list[str] = []  # K and V's together (--kv-cache-dtype)
    kv_k: list[str] = []  # K's alone (llama.cpp: --cache-type-k)
    kv_v: list[str] = []  # V's alone (llama.cpp: --cache-type-v)
    # what "auto" (or no --dtype) makes of a float32 checkpoint ("": keeps it in float32)
    auto_float32: str = ""
    kv_default: str = "auto"  # an absent KV flag: "auto" the served weights' dtype, or a dtype

    def of(self, flags: Mapping[str, object]) -> dict[str, str]:
        """{"weights", "kv_k", "kv_v": the dtype the flags name, "auto" where they name none}
        (flags in any spelling: flag_key; a switch's True is no dtype)."""
        given = {flag_key(name): value for name, value in flags.items()}

        def named(spellings: list[str], default: str = "auto") -> str:
            for flag in spellings:
                value = given.get(flag_key(flag))
                if isinstance(value, str | int | float) and not isinstance(value, bool):
                    return str(value)
            return default

        kv = named(self.kv_cache_dtype, self.kv_default)
        return {
            "weights": named(self.dtype),
            "kv_k": named(self.kv_k, kv),
            "kv_v": named(self.kv_v, kv),
        }


PYTHON_M = "python -m "


class Processes(Strict):
    """The engine's processes as a bash line or a process list shows them (the guard: which
    lines launch an engine, which kill patterns name its processes). A launcher or program is
    `python -m MODULE`, or a program's name with the subcommand that starts the server where it
    has one (`vllm serve`)."""

    launchers: list[str] = []  # how its server is started
    programs: list[str] = []  # its other programs a model may run (its benchmarks)
    kill_names: list[str] = []  # words a `pkill -f` pattern may name, beside `workers`

    @field_validator("launchers", "programs")
    @classmethod
    def commands(cls, v: list[str]) -> list[str]:
        for line in v:
            words = line.split()
            module = line.startswith(PYTHON_M) and len(words) == 3
            if not (module or 1 <= len(words) <= 2) or (words[:1] == ["python"] and not module):
                raise ValueError(
                    f"not `python -m MODULE` or a program's name (and subcommand): {line!r}"
                )
        return v

    def modules(self, launchers_only: bool = False) -> list[str]:
        lines = self.launchers if launchers_only else self.all()
        return [w.removeprefix(PYTHON_M) for w in lines if w.startswith(PYTHON_M)]

    def executables(self) -> list[str]:
        return _merged([w.split()[0]] for w in self.all() if not w.startswith(PYTHON_M))

    def programs_launching(self) -> dict[str, str]:
        """{program: the subcommand that starts the server ("" : none)} of its launchers."""
        words = [w.split() for w in self.launchers if not w.startswith(PYTHON_M)]
        return {w[0]: " ".join(w[1:]) for w in words}

    def all(self) -> list[str]:
        return [*self.launchers, *self.programs]


class Knowledge(BaseModel):
    """The tables of one profile that the layers below the lifecycle read (the rest of the
    profile is tools/servers/profiles/schema.py's)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    workers: list[str] = []
    loopback: str = ""  # added unless the command sets its address: it binds every interface
    parallelism: Parallelism = Parallelism()
    metrics: Metrics = Metrics()
    processes: Processes = Processes()
    file_flags: list[str] = []
    precision: Precision = Precision()


# --- the profile files ---------------------------------------------------------------------------


@cache
def builtin_raw() -> dict[str, dict[str, Any]]:
    """{engine name: the TOML table} of the shipped profiles."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(PROFILES.glob("*.toml")):
        raw = read(path)
        out[str(raw.get("name", path.stem))] = raw
    return out


def read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ProfileError(f"engine profile {path} not found") from None
    except tomllib.TOMLDecodeError as err:
        raise ProfileError(f"{path}: malformed TOML: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ProfileError(f"cannot read engine profile {path}: {err}") from None


def inherit(raw: dict[str, Any], where: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """The table merged over the built-in profile it inherits (and that one's, in turn)."""
    parent_name = raw.get("inherits")
    if parent_name is None:
        return raw
    known = builtin_raw()
    if parent_name not in known:
        raise ProfileError(
            f"{where}: inherits {parent_name!r}, not a built-in profile (one of: "
            f"{', '.join(known)})"
        )
    if parent_name in seen:
        raise ProfileError(f"{where}: inherits {parent_name!r} in a cycle: {' -> '.join(seen)}")
    parent = inherit(known[parent_name], f"built-in profile {parent_name}", (*seen, parent_name))
    return merge(parent, raw)


def merge(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """The child's keys over the parent's; tables merged key by key; failures: the child's first
    (the first pattern that matches wins), then the parent's."""
    out = {k: v for k, v in parent.items() if k not in ("inherits", "description")}
    for key, value in child.items():
        if key == "failures" and isinstance(value, list):
            out[key] = [*value, *parent.get("failures", [])]
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


# --- what the layers below the lifecycle ask -----------------------------------------------------


@cache
def builtin() -> dict[str, Knowledge]:
    """{engine name: its knowledge} of every shipped profile, inheritance resolved."""
    out: dict[str, Knowledge] = {}
    for name, raw in builtin_raw().items():
        where = f"built-in profile {name}"
        try:
            out[name] = Knowledge.model_validate(inherit(raw, where))
        except ValidationError as err:
            e = err.errors()[0]
            loc = ".".join(str(p) for p in e["loc"])
            raise ProfileError(f"{where}: {loc}: {e['msg']}") from None
    return out


def names() -> tuple[str, ...]:
    """The built-in engines, sorted (agent.toml's `engine`)."""
    return tuple(sorted(builtin()))


def parallelism(engine: str | Parallelism | None = None) -> Parallelism:
    """The engine's parallelism flags, by its name or its profile's table; for an engine not
    built in (None, a user's profile without the table) or one that names none (the generic
    openai): every built-in profile's, each kind's spellings together."""
    if not isinstance(engine, Parallelism):
        known = builtin().get(engine or "")
        engine = known.parallelism if known is not None else None
    return engine if engine is not None and engine.counted() else _all_parallelism()


def precision(engine: str | None) -> Precision | None:
    """The engine's precision flags by its name; None for an engine not built in (its flags'
    dtypes are not known: the floor stays at the stated dtypes)."""
    known = builtin().get(engine or "")
    return known.precision if known is not None else None


@cache
def _all_parallelism() -> Parallelism:
    return Parallelism.union(k.parallelism for k in builtin().values())


@cache
def all_metrics() -> Metrics:
    """Every built-in profile's /metrics names, each list in the profiles' order: what a server
    of an engine the sampler was not told about is read with."""
    return Metrics.union(k.metrics for k in builtin().values())


@cache
def launch_modules() -> tuple[str, ...]:
    """The python modules (`python -m X`) of every built-in engine's launchers and programs."""
    return tuple(_merged(k.processes.modules() for k in builtin().values()))


@cache
def launch_executables() -> tuple[str, ...]:
    """The programs of every built-in engine's launchers and programs."""
    return tuple(_merged(k.processes.executables() for k in builtin().values()))


@cache
def process_names() -> tuple[str, ...]:
    """The words a kill pattern may name: every built-in engine's kill names and workers."""
    return tuple(_merged([*k.processes.kill_names, *k.workers] for k in builtin().values()))


@cache
def server_modules() -> dict[str, bool]:
    """{module of a `python -m MODULE` launcher: whether it listens on every interface when its
    command names no address} of every built-in engine (tools/guard/launches.py)."""
    out: dict[str, bool] = {}
    for k in builtin().values():
        for module in k.processes.modules(launchers_only=True):
            out.setdefault(module, bool(k.loopback))
    return out


@cache
def server_programs() -> dict[str, tuple[str, bool]]:
    """{program of a launcher: (the subcommand that starts the server, "" for none; whether it
    listens on every interface when its command names no address)} of every built-in engine."""
    out: dict[str, tuple[str, bool]] = {}
    for k in builtin().values():
        for program, sub in k.processes.programs_launching().items():
            out.setdefault(program, (sub, bool(k.loopback)))
    return out


def address_flag(launcher: str) -> str:
    """The flag a built-in engine's address is given with, by its launcher's module or program
    (its `loopback`'s first word, else --host)."""
    for k in builtin().values():
        if launcher in k.processes.modules(True) or launcher in k.processes.programs_launching():
            words = k.loopback.split()
            return words[0] if words else "--host"
    return "--host"
