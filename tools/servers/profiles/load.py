"""Reading profile files: the built-in ones shipped beside this module (one TOML per engine) and
a user's own (`[server] profile = "path.toml"`), with `inherits` resolved. The files are read,
and `inherits` merged, by tools/domain/engines.py, which the layers below the lifecycle read
them with; here each is validated whole (schema.py)."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tools.domain.engines import ProfileError, builtin_raw, inherit, read
from tools.servers.profiles.schema import Profile

__all__ = ["ProfileError", "builtin_names", "builtin_raw", "load_file", "resolve"]


def builtin_names() -> tuple[str, ...]:
    return tuple(builtin_raw())


def resolve(raw: dict[str, Any], where: str, seen: tuple[str, ...] = ()) -> Profile:
    """A validated profile from its table, merged over the profile it inherits."""
    merged = inherit(raw, where, seen)
    try:
        return Profile.model_validate(merged)
    except ValidationError as err:
        raise ProfileError(f"{where}: {_explain(err)}") from None


def load_file(path: Path) -> Profile:
    return resolve(read(path), str(path))


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
