"""The lab's fixed server command and its default search space.

A space is a dict {"--flag": [candidate values], ..., "requires": {...}, "baseline": {...}}, the
same shape as the `[search]` table of agent.toml. A value of false means "flag omitted".
"requires" maps a flag to the flag values it needs ({"--speculative-num-steps":
{"--speculative-algorithm": "EAGLE3"}}): when they do not hold, the flag is omitted.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim import profile as profiles
from sim.hardware import REFERENCE

RESERVED = ("requires", "baseline")
DEFAULT_LEVELS = [1, 2, 5, 10, 30, 70, 100, 250]

# What every lab launch has in common; the campaign's flags and --port are appended to it.
DEFAULT_BASE_FLAGS: list[str] = [
    "--model-path",
    REFERENCE.model,
    "--tp",
    "8",
    "--disable-custom-all-reduce",
    "--load-seconds",
    "1.5",
]

SPEC = "--speculative-algorithm"


def default_space() -> dict[str, Any]:
    """144 valid configurations; the optimum is not "everything on" (see docs/sim.md)."""
    needs_spec = {SPEC: "EAGLE3"}
    return {
        "--attention-backend": ["flashinfer", "triton", "fa3"],
        "--cuda-graph-max-bs": [64, 128, 256],
        "--enable-flashinfer-allreduce-fusion": [True, False],
        SPEC: [False, "EAGLE3"],
        "--speculative-num-steps": [1, 3],
        "--speculative-eagle-topk": [1, 4],
        "--speculative-num-draft-tokens": [2, 4, 8],
        "requires": {
            "--speculative-num-steps": dict(needs_spec),
            "--speculative-eagle-topk": dict(needs_spec),
            "--speculative-num-draft-tokens": dict(needs_spec),
        },
        "baseline": {
            "--attention-backend": "flashinfer",
            "--cuda-graph-max-bs": 128,
            "--enable-flashinfer-allreduce-fusion": True,
            SPEC: False,
            "--speculative-num-steps": False,
            "--speculative-eagle-topk": False,
            "--speculative-num-draft-tokens": False,
        },
    }


class SpaceError(ValueError):
    """A search space that cannot be used; one line."""


def load_space(source: str | Path) -> dict[str, Any]:
    """ "default", a JSON file, or a TOML file (its [search] table, or the whole file)."""
    if str(source) == "default":
        return default_space()
    path = Path(source)
    try:
        text = path.read_text()
    except OSError as err:
        raise SpaceError(f"cannot read space file {path}: {err.strerror}") from None
    try:
        raw = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as err:
        raise SpaceError(f"{path}: malformed {path.suffix.lstrip('.') or 'TOML'}: {err}") from None
    space = raw.get("search", raw) if isinstance(raw, dict) else raw
    validate_space(space)
    return space


def validate_space(space: Any) -> None:
    if not isinstance(space, dict) or not space:
        raise SpaceError("a search space is a non-empty table of '--flag' = [values]")
    for key, values in space.items():
        if key in RESERVED:
            if not isinstance(values, dict):
                raise SpaceError(f"space {key!r} must be a table")
            continue
        if not key.startswith("--"):
            raise SpaceError(f"space key {key!r} is not a flag (flags start with '--')")
        if not isinstance(values, list) or not values:
            raise SpaceError(f"space {key!r} must be a non-empty list of candidate values")
    for flag, needs in space.get("requires", {}).items():
        if flag not in space or not isinstance(needs, dict):
            raise SpaceError(f"requires {flag!r} must name a flag of the space and be a table")
        for other in needs:
            if other not in space:
                raise SpaceError(
                    f"requires {flag!r} depends on {other!r}, which is not in the space"
                )


def flags_of(space: dict[str, Any]) -> list[str]:
    return [k for k in space if k not in RESERVED]


@dataclass(frozen=True)
class Lab:
    """A space with the box it runs on: the search space, the base flags every launch has (the
    profile's, after --profile NAME), and the concurrency levels."""

    name: str
    space: dict[str, Any]
    base: list[str]
    levels: list[int]
    objective: dict[str, Any] | None = None  # the profile's [objective] (None: the geomean)


def lab_names() -> list[str]:
    """The built-in spaces: every shipped profile with a [search] table."""
    return [n for n in profiles.names() if profiles.load(n).search is not None]


def load_lab(source: str, profile: str | None = None) -> Lab:
    """A built-in space's name ("default" = the reference lab), a profile file with a [search]
    table, or a space file (JSON/TOML) run on `profile` (default: the reference box)."""
    if source == "default" and profile is None:
        return Lab("default", default_space(), list(DEFAULT_BASE_FLAGS), list(DEFAULT_LEVELS))
    try:
        box = profiles.load(profile) if profile is not None else None
        if box is None and (source in profiles.names() or _is_profile(source)):
            box = profiles.load(source)
            if box.search is None:
                raise SpaceError(f"profile {source} has no [search] table: pass --space too")
            space = dict(box.search)
            validate_space(space)
        else:
            space = load_space(source)
    except profiles.ProfileError as err:
        raise SpaceError(str(err)) from None
    if box is None:
        return Lab(Path(source).stem, space, list(DEFAULT_BASE_FLAGS), list(DEFAULT_LEVELS))
    shipped = profiles.path_of(box.name) == Path(box.source)  # by name: a readable command
    base = ["--profile", box.name if shipped else box.source, *box.base_flags]
    objective = dict(box.objective) if box.objective is not None else None
    return Lab(box.name, space, base, list(box.levels or DEFAULT_LEVELS), objective)


def _is_profile(source: str) -> bool:
    """A TOML file that names a hardware box (a profile), rather than a bare space."""
    path = Path(source)
    if path.suffix != ".toml" or not path.is_file():
        return False
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return "hardware" in raw or "constants" in raw
