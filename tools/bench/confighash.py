"""The config hash: what makes two benchmark results the same experiment.

hash = sha256 of canonical JSON {"server": normalized command, "workload": workload key}, cut to
16 hex digits. Normalizing the command:
- split it like a shell (shlex); leading VAR=value assignments are kept, sorted;
- the program: its first word reduced to its file name, `python3.11` -> `python`, so the
  same command from another virtualenv or machine hashes the same;
- flags: `--flag value`, `--flag=value` and switches (`--flag` alone -> true) into a dict, sorted
  by name, `-`/`_` spelled alike; `--port` and `--host` dropped (where it listens is not what it
  is); values canonical: numbers as numbers ("0.90" == "0.9", "8" == 8), JSON objects (vLLM's
  --speculative-config) re-serialized with sorted keys;
- positional words after the program (vLLM's `serve MODEL`) kept in order; `-m module` is part
  of the program only after python (`llama-server -m model.gguf` is a flag with its value).
The workload key: endpoint, input_len, max_tokens, ignore_eos, temperature, the model name
served, and where not at their defaults the dataset (kind and file digest), lengths, traffic,
burstiness and duration. Not in it: the concurrency levels (the ledger keeps one summary per
level, so results with different levels still share their common levels), requests per level,
warm-up, seed and client.
A benchmark against a bare URL (no command known) hashes "url:<host>:<port>" in place of the
command - good within a session, not across server restarts.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from typing import Any

DROPPED_FLAGS = {"--port", "--host"}
_PYTHON = re.compile(r"^python[0-9.]*$")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def canonical_value(value: Any) -> Any:
    """A flag value in one spelling: bools, numbers and JSON objects normalized."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return int(value) if float(value).is_integer() else float(value)
    text = str(value).strip()
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        number = float(text)
        if number == number and abs(number) != float("inf"):  # not nan/inf
            return int(number) if number.is_integer() and "e" not in low else number
    except ValueError:
        pass
    if text[:1] in "{[":
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


def flag_name(word: str) -> str:
    return "--" + word.lstrip("-").replace("_", "-")


def normalize_command(command: str | list[str]) -> dict[str, Any]:
    """{"env": {...}, "program": [...], "args": [...], "flags": {"--flag": value}}."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    env: dict[str, str] = {}
    while argv and _ASSIGN.match(argv[0]):
        var, _, assigned = argv.pop(0).partition("=")
        env[var] = assigned
    program: list[str] = []
    args: list[str] = []
    flags: dict[str, Any] = {}
    i = 0
    while i < len(argv) and not argv[i].startswith("-"):
        program.append(_program_word(argv[i]) if i == 0 else argv[i])
        i += 1
    python = program[:1] == ["python"]  # `-m X` is a module only to python (llama-server: model)
    if python and i < len(argv) and argv[i] == "-m" and i + 1 < len(argv):
        program += ["-m", argv[i + 1]]
        i += 2
        while i < len(argv) and not argv[i].startswith("-"):
            args.append(argv[i])
            i += 1
    while i < len(argv):
        word = argv[i]
        if word.startswith("-") and len(word) > 1 and not _is_number(word):
            name, eq, inline = word.partition("=")
            if eq:
                value: Any = inline
                i += 1
            elif i + 1 < len(argv) and not _is_flag(argv[i + 1]):
                value = argv[i + 1]
                i += 2
            else:
                value = True
                i += 1
            key = flag_name(name)
            if key not in DROPPED_FLAGS:
                flags[key] = canonical_value(value)
        else:
            args.append(word)
            i += 1
    return {
        "env": dict(sorted(env.items())),
        "program": program,
        "args": args,
        "flags": dict(sorted(flags.items())),
    }


# What shapes the load beyond the lengths, with the value that means "as before it existed": a
# key at that value is left out, so results from before keep their hashes. Not the SLO (it
# judges the load, it does not change it).
TRAFFIC_DEFAULTS: dict[str, Any] = {
    "dataset": "random",
    "dataset_digest": "",
    "lengths": "fixed",
    "traffic": "concurrency",
    "burstiness": 1.0,
    "duration_s": None,
    "shared_prefix": 0,
    "multi_turn": False,
}


def workload_key(workload: dict[str, Any]) -> dict[str, Any]:
    keys = ("endpoint", "input_len", "max_tokens", "ignore_eos", "temperature", "model")
    key = {k: canonical_value(workload.get(k)) for k in keys}
    for name, default in TRAFFIC_DEFAULTS.items():
        value = workload.get(name, default)
        if value != default:
            key[name] = canonical_value(value)
    if key.get("dataset", "").partition(":")[0] in ("sharegpt", "jsonl"):
        key["dataset"] = key["dataset"].partition(":")[0]  # the file's digest says which
    return key


def config_hash(
    command: str | list[str] | None, workload: dict[str, Any], url: str | None = None
) -> str:
    server: Any = normalize_command(command) if command else f"url:{_url_key(url or '')}"
    blob = json.dumps({"server": server, "workload": workload_key(workload)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def flag_diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Flags whose canonical values differ ({flag: (a's, b's)}; None = absent)."""
    out = {}
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if va is False:
            va = None  # `false` in a flag dict means "omitted"
        if vb is False:
            vb = None
        if canonical_value(va) != canonical_value(vb):
            out[key] = (va, vb)
    return out


def _program_word(word: str) -> str:
    base = os.path.basename(word) if "/" in word else word
    return "python" if _PYTHON.match(base) else base


def _is_number(word: str) -> bool:
    try:
        float(word)
        return True
    except ValueError:
        return False


def _is_flag(word: str) -> bool:
    return word.startswith("-") and len(word) > 1 and not _is_number(word)


def _url_key(url: str) -> str:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url if "://" in url else "http://" + url)
        return f"{parts.hostname}:{parts.port or 80}{parts.path.rstrip('/')}"
    except ValueError:  # not a URL (an imported result's stand-in): the text itself
        return url
