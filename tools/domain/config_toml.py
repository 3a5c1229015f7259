"""A small TOML writer for the resolved config that every run folder keeps (config.toml):
tables, arrays of tables, scalars and arrays - what agent.toml itself can hold."""

from __future__ import annotations

import json
from typing import Any


def to_toml(obj: dict[str, Any]) -> str:
    """A small TOML writer for the resolved config (tables, arrays of tables, scalars, arrays)."""
    lines: list[str] = []
    _toml_table(obj, [], lines)
    return "\n".join(lines).strip() + "\n"


def _toml_table(obj: dict[str, Any], path: list[str], lines: list[str]) -> None:
    simple = {k: v for k, v in obj.items() if not _is_table(v) and not _is_table_array(v)}
    for key, value in simple.items():
        if value is not None:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in obj.items():
        if _is_table(value):
            lines.append(f"\n[{'.'.join(_toml_key(p) for p in [*path, key])}]")
            _toml_table(value, [*path, key], lines)
        elif _is_table_array(value):
            for item in value:
                lines.append(f"\n[[{'.'.join(_toml_key(p) for p in [*path, key])}]]")
                _toml_table(item, [*path, key], lines)


def _is_table(v: Any) -> bool:
    return isinstance(v, dict)


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(i, dict) for i in v)


def _toml_key(key: str) -> str:
    return (
        key
        if key.replace("_", "").replace("-", "").isalnum() and key[0] != "-"
        else _toml_value(key)
    )


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(i) for i in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(i)}" for k, i in v.items()) + "}"
    return json.dumps(str(v))
