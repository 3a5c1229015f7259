"""Reading profile files: the built-in ones shipped beside this module (one TOML per engine) and
a user's own (`[server] profile = "path.toml"`), with `inherits` resolved."""

from __future__ import annotations

import difflib
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tools.servers.profiles.schema import Profile

HERE = Path(__file__).parent


class ProfileError(Exception):
    """A profile the user must fix; the message is one line naming the file and the key."""


@cache
def builtin_raw() -> dict[str, dict[str, Any]]:
    """{engine name: the TOML table} of the shipped profiles."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(HERE.glob("*.toml")):
        raw = _read(path)
        out[str(raw.get("name", path.stem))] = raw
    return out


def builtin_names() -> tuple[str, ...]:
    return tuple(builtin_raw())


def resolve(raw: dict[str, Any], where: str, seen: tuple[str, ...] = ()) -> Profile:
    """A validated profile from its table, merged over the profile it inherits."""
    merged = _inherit(raw, where, seen)
    try:
        return Profile.model_validate(merged)
    except ValidationError as err:
        raise ProfileError(f"{where}: {_explain(err)}") from None


def load_file(path: Path) -> Profile:
    return resolve(_read(path), str(path))


def _inherit(raw: dict[str, Any], where: str, seen: tuple[str, ...]) -> dict[str, Any]:
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
    parent = _inherit(known[parent_name], f"built-in profile {parent_name}", (*seen, parent_name))
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


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ProfileError(f"engine profile {path} not found") from None
    except tomllib.TOMLDecodeError as err:
        raise ProfileError(f"{path}: malformed TOML: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ProfileError(f"cannot read engine profile {path}: {err}") from None


def _explain(err: ValidationError) -> str:
    """The first problem as one line, with a did-you-mean for an unknown key."""
    e = err.errors()[0]
    loc = ".".join(str(p) for p in e["loc"])
    if e["type"] == "extra_forbidden":
        model: type[BaseModel] = Profile
        for part in e["loc"][:-1]:
            ann = model.model_fields[str(part)].annotation if isinstance(part, str) else None
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                model = ann
        hint = difflib.get_close_matches(str(e["loc"][-1]), list(model.model_fields), n=1)
        return f"unknown key {loc!r}" + (f" (did you mean {hint[0]!r}?)" if hint else "")
    msg = str(e["msg"]).removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg
