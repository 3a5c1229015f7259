"""Profiles: a box's physics as data, so a new box or engine is a file, not code.

A profile (sim/profiles/NAME.toml, or any path) names a built-in hardware box to start from, the
constants it changes, the flags the box adds to the command line, flag effects (factors on the
step model when every condition holds - an effect with two conditions is an interaction term),
start-failure rules, and optionally the search space and base flags of its lab. docs/sim.md
documents the format. Without --profile the simulator is the built-in box named by --hardware,
with exactly the constants below (sim/profiles/reference.toml restates them as data).
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from sim.hardware import PROFILES, Hardware

PROFILE_DIR = Path(__file__).parent / "profiles"
# attention backend -> (fixed-cost factor, per-sequence factor, prefill factor)
BACKENDS: dict[str, tuple[float, float, float]] = {
    "flashinfer": (1.0, 1.0, 1.0),
    "triton": (1.10, 1.10, 1.10),
    "fa3": (0.82, 1.20, 0.95),
}
FACTORS = ("fixed", "per_seq", "prefill", "eager", "kv")
PHASES = ("args", "load", "kv", "graph")


class ProfileError(ValueError):
    """A profile that cannot be used; one line."""


@dataclass(frozen=True)
class FlagSpec:
    """A flag the box adds: a switch, or a value among `choices` (strings or integers)."""

    name: str
    choices: tuple[str, ...] = ()  # empty: a switch (present = true)
    default: str | None = None
    integer: bool = False

    @property
    def dest(self) -> str:
        return "profile_" + self.name.lstrip("-").replace("-", "_")


Condition = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Effect:
    """Factors on the step model while every condition holds (they multiply)."""

    when: Condition
    fixed: float = 1.0  # the batch-independent part of a decode step
    per_seq: float = 1.0  # the per-sequence part
    prefill: float = 1.0
    eager: float = 1.0  # the eager-mode penalty
    kv: float = 1.0  # KV-cache bytes per token
    why: str = ""


@dataclass(frozen=True)
class FailRule:
    """A start that fails while every condition holds, with the line its log ends on."""

    when: Condition
    message: str
    phase: str = "args"


@dataclass(frozen=True)
class Profile:
    name: str
    hardware: Hardware
    heads: int = 64  # attention heads of the served model: --tp must divide them
    default_mem_fraction: float = 0.85
    spec_max_running: int = 48  # SGLang resets max_running_requests to 48 for speculation
    max_running: int = 4096
    slots_flag: str | None = None  # a flag whose value is the admission limit (llama.cpp -np)
    backends: Mapping[str, tuple[float, float, float]] = field(default_factory=lambda: BACKENDS)
    flags: tuple[FlagSpec, ...] = ()
    effects: tuple[Effect, ...] = ()
    failures: tuple[FailRule, ...] = ()
    base_flags: tuple[str, ...] = ()  # what every launch of its lab has in common
    search: Mapping[str, Any] | None = None  # its lab's search space ([search])
    levels: tuple[int, ...] = ()  # its lab's concurrency levels
    objective: Mapping[str, Any] | None = None  # its lab's objective ({kind, level}: [objective])
    source: str = ""  # the file it was read from


def builtin(hardware: str) -> Profile:
    """The built-in box `--hardware NAME` with today's constants."""
    return Profile(name=hardware, hardware=PROFILES[hardware])


def names() -> list[str]:
    """The profiles shipped in sim/profiles/."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))


def path_of(source: str | Path) -> Path:
    """A shipped profile's name, or a path to a profile file."""
    text = str(source)
    shipped = PROFILE_DIR / f"{text}.toml"
    if "/" not in text and not text.endswith(".toml") and shipped.is_file():
        return shipped
    return Path(text)


@lru_cache(maxsize=64)
def load(source: str) -> Profile:
    """Read and check a profile (ProfileError, one line, when it cannot be used)."""
    path = path_of(source)
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as err:
        known = ", ".join(names())
        raise ProfileError(
            f"cannot read profile {source!r}: {err.strerror} (shipped: {known})"
        ) from None
    except tomllib.TOMLDecodeError as err:
        raise ProfileError(f"profile {path}: malformed TOML: {err}") from None
    return parse(raw, str(path))


def parse(raw: Mapping[str, Any], source: str = "<profile>") -> Profile:
    where = f"profile {source}"
    known = {
        "name", "description", "hardware", "constants", "backends", "flags", "effects",
        "failures", "base_flags", "search", "levels", "objective",
    }  # fmt: skip
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ProfileError(
            f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})"
        )
    base = str(raw.get("hardware", "reference"))
    if base not in PROFILES:
        raise ProfileError(f"{where}: hardware {base!r} is not one of {', '.join(PROFILES)}")
    hw_fields = {f.name for f in dataclasses.fields(Hardware)}
    model_fields = {
        "heads",
        "default_mem_fraction",
        "spec_max_running",
        "max_running",
        "slots_flag",
    }
    constants = dict(_table(raw, "constants", where))
    bad = sorted(set(constants) - hw_fields - model_fields)
    if bad:
        raise ProfileError(f"{where}: constants.{bad[0]} is not a constant of the model")
    hw_over = {k: v for k, v in constants.items() if k in hw_fields}
    hw_over |= _unstated_physics(PROFILES[base], hw_over)
    if "description" in raw:
        hw_over.setdefault("description", raw["description"])
    try:
        hardware = dataclasses.replace(PROFILES[base], **hw_over)
    except TypeError as err:
        raise ProfileError(f"{where}: constants: {err}") from None
    backends = dict(BACKENDS)
    for name, factors in _table(raw, "backends", where).items():
        if not (isinstance(factors, list) and len(factors) == 3):
            raise ProfileError(f"{where}: backends.{name} must be [fixed, per_seq, prefill]")
        backends[name] = (float(factors[0]), float(factors[1]), float(factors[2]))
    flags = tuple(_flag(name, spec, where) for name, spec in _table(raw, "flags", where).items())
    effects = tuple(_effect(e, where) for e in _list(raw, "effects", where))
    failures = tuple(_failure(f, where) for f in _list(raw, "failures", where))
    extra = {k: constants[k] for k in model_fields if k in constants}
    search = raw.get("search")
    if search is not None and not isinstance(search, dict):
        raise ProfileError(f"{where}: search must be a table")
    objective = raw.get("objective")
    if objective is not None and not (
        isinstance(objective, dict) and set(objective) <= {"kind", "level"} and "kind" in objective
    ):
        raise ProfileError(f"{where}: objective must be a table of kind (and level)")
    return Profile(
        name=str(raw.get("name", Path(source).stem)),
        hardware=hardware,
        backends=backends,
        flags=flags,
        effects=effects,
        failures=failures,
        base_flags=tuple(str(w) for w in raw.get("base_flags", [])),
        search=search,
        levels=tuple(int(c) for c in raw.get("levels", [])),
        objective=objective,
        source=source,
        **extra,
    )


# the physics a profile inherits from its base box only while it keeps what they describe: a
# profile that changes the box (or the model) keeps none of the base's figures of it that it
# does not state again (no bandwidth: /server_info says nothing of a floor; no peak or link:
# no compute or interconnect bound) rather than the base box's figures
_BOX = ("gpus", "gpu_mem_gb", "sm")
_BOX_PHYSICS = ("device", "mem_bw_gb_s", "peak_tflops", "link_gb_s")
_MODEL = ("model", "weights_gb")
_MODEL_PHYSICS = ("expert_weights_gb", "experts", "active_experts", "hidden", "layers")


def _unstated_physics(base: Hardware, over: Mapping[str, Any]) -> dict[str, Any]:
    """The base box's physics fields reset where `over` changes what they describe."""
    out: dict[str, Any] = {}
    for changes, physics in ((_BOX, _BOX_PHYSICS), (_MODEL, _MODEL_PHYSICS)):
        changed = any(k in over and over[k] != getattr(base, k) for k in changes)
        if changed:  # each figure of the other box (model) it does not state again
            out |= {k: type(getattr(base, k))() for k in physics if k not in over}
    return out


def _table(raw: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise ProfileError(f"{where}: {key} must be a table")
    return value


def _list(raw: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ProfileError(f"{where}: {key} must be an array of tables ([[{key}]])")
    return value


def _flag(name: str, spec: Any, where: str) -> FlagSpec:
    if not name.startswith("--") or not isinstance(spec, dict):
        raise ProfileError(f"{where}: flags.{name}: a '--flag' = {{choices = [...]}} table")
    choices = spec.get("choices", [])
    if not isinstance(choices, list):
        raise ProfileError(f"{where}: flags.{name}.choices must be a list")
    integer = bool(choices) and all(isinstance(c, int) and c is not True for c in choices)
    default = spec.get("default")
    return FlagSpec(
        name,
        tuple(str(c) for c in choices),
        None if default is None else str(default),
        integer,
    )


def _when(spec: Mapping[str, Any], where: str) -> Condition:
    when = spec.get("when")
    if not isinstance(when, dict) or not when:
        raise ProfileError(f"{where}: every effect and failure needs when = {{'--flag' = value}}")
    return tuple(sorted(when.items()))


def _effect(spec: Mapping[str, Any], where: str) -> Effect:
    bad = sorted(set(spec) - {"when", "why", *FACTORS})
    if bad:
        raise ProfileError(f"{where}: effects: {bad[0]!r} is not one of {', '.join(FACTORS)}")
    factors = {k: float(spec[k]) for k in FACTORS if k in spec}
    if any(v <= 0 for v in factors.values()):
        raise ProfileError(f"{where}: effects: factors must be > 0")
    return Effect(_when(spec, where), why=str(spec.get("why", "")), **factors)


def _failure(spec: Mapping[str, Any], where: str) -> FailRule:
    phase = str(spec.get("phase", "args"))
    if phase not in PHASES or "message" not in spec:
        raise ProfileError(
            f"{where}: failures need a message and a phase among {', '.join(PHASES)}"
        )
    return FailRule(_when(spec, where), str(spec["message"]), phase)


def holds(when: Condition, value_of: Mapping[str, Any]) -> bool:
    """Every condition holds: true = given (any value), false = omitted, a list = any of them,
    else the same value (compared as text, so 4 and "4" agree)."""
    for flag, want in when:
        have = value_of.get(flag)
        present = have is not None and have is not False
        if want is True:
            ok = present
        elif want is False:
            ok = not present
        elif isinstance(want, list):
            ok = present and any(_text(have) == _text(w) for w in want)
        else:
            ok = present and _text(have) == _text(want)
        if not ok:
            return False
    return True


def _text(value: Any) -> str:
    if value is True:
        return "true"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
