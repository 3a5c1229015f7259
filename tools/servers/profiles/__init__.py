"""Engine profiles: what differs between engines when starting, watching, measuring and killing a
server, as data - one TOML file per engine beside this module (sglang, vllm, llama.cpp,
llama-cpp-python, sim, trtllm and a generic openai), or a user's own file (`[server] profile =
"my-engine.toml"`). A new engine is a profile file, not code (docs/engines.md, "What a profile
holds"): the layers below this one read the same files through tools/domain/engines.py."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tools.servers.profiles.load import ProfileError, builtin_names, builtin_raw, load_file, resolve
from tools.servers.profiles.schema import Profile

__all__ = [
    "ENGINES",
    "LLAMA_CPP",
    "OPENAI",
    "SGLANG",
    "SIM",
    "VLLM",
    "Engine",
    "ProfileError",
    "builtin_names",
    "engine_for",
    "load_profile",
    "recorded_engine",
]


@dataclass(frozen=True)
class Engine:
    """A profile ready for use: its patterns compiled."""

    profile: Profile
    source: str  # "built-in" or the profile file's path
    health_path: str
    ready_lines: tuple[re.Pattern[str], ...]
    failures: tuple[tuple[re.Pattern[str], str, str], ...]  # pattern, diagnosis, cause

    @classmethod
    def of(cls, profile: Profile, source: str = "built-in") -> Engine:
        return cls(
            profile=profile,
            source=source,
            health_path=profile.readiness.health_path,
            ready_lines=tuple(re.compile(p) for p in profile.readiness.ready_lines),
            failures=tuple((re.compile(f.pattern), f.diagnosis, f.cause) for f in profile.failures),
        )

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def workers(self) -> tuple[str, ...]:
        return tuple(self.profile.workers)

    @property
    def port_flag(self) -> str:
        return self.profile.port_flag

    @property
    def loopback(self) -> str:
        return self.profile.loopback

    @property
    def extra_body(self) -> dict[str, Any]:
        """Request fields every benchmark request carries (llama.cpp: cache_prompt = false)."""
        cache_ = self.profile.prefix_cache
        return dict(cache_.request_fields) if cache_.reset == "request_field" else {}

    @property
    def cache_reset_path(self) -> str | None:
        """The endpoint to POST before a measurement for a cold prefix cache, if any."""
        cache_ = self.profile.prefix_cache
        return cache_.path if cache_.reset == "post" else None

    @property
    def min_level_s(self) -> float | None:
        """The least a closed level lasts by default (seconds); None: its requests alone."""
        return self.profile.bench.min_level_s or None

    def level_minimum(self, configured: float | None) -> float | None:
        """The least a closed level lasts on this engine: [bench] min_level_s when set (0:
        none), else the profile's (5 s on a real engine, none on the simulator)."""
        if configured is not None:
            return configured or None
        return self.min_level_s

    @property
    def metrics_path(self) -> str:
        """Where its Prometheus text is served (TensorRT-LLM: /prometheus/metrics)."""
        return self.profile.metrics.path

    @property
    def tokenize_path(self) -> str | None:
        return self.profile.tokens.tokenize_path or None

    def with_overrides(self, ready_line: str | None, health_path: str | None) -> Engine:
        """server.ready_line (a plain substring) and server.health_path from agent.toml."""
        if not ready_line and not health_path:
            return self
        return Engine(
            profile=self.profile,
            source=self.source,
            health_path=health_path or self.health_path,
            ready_lines=(re.compile(re.escape(ready_line)),) if ready_line else self.ready_lines,
            failures=self.failures,
        )


ENGINES: dict[str, Engine] = {
    name: Engine.of(resolve(raw, f"built-in profile {name}")) for name, raw in builtin_raw().items()
}
SGLANG, VLLM, SIM = ENGINES["sglang"], ENGINES["vllm"], ENGINES["sim"]
LLAMA_CPP, OPENAI = ENGINES["llama.cpp"], ENGINES["openai"]


def load_profile(path: str | Path) -> Engine:
    """A user's profile file (ProfileError, one line, when it is wrong)."""
    path = Path(path).expanduser()
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = 0
    return _load_cached(str(path), stamp)


@cache
def _load_cached(path: str, stamp: int) -> Engine:
    return Engine.of(load_file(Path(path)), source=path)


def engine_for(config: object) -> Engine:
    """The profile for config.server - its profile file, else the built-in engine - with the
    documented overrides (ready_line, health_path) applied."""
    server = config.server  # type: ignore[attr-defined]
    profile_path = getattr(server, "profile", None)
    if profile_path:
        base = load_profile(profile_path)
    elif server.engine in ENGINES:
        base = ENGINES[server.engine]
    else:
        raise ProfileError(
            f"unknown engine {server.engine!r}: one of {', '.join(ENGINES)}, or set "
            "server.profile to a profile file"
        )
    return base.with_overrides(getattr(server, "ready_line", None), server.health_path)


def recorded_engine(server: Mapping[str, Any]) -> Engine:
    """The engine of a run from its recorded [server] table (the run folder's config): its
    profile file, where it can still be read, else the built-in engine it names, else openai -
    with its health_path override."""
    engine = ENGINES.get(str(server.get("engine")), OPENAI)
    if server.get("profile"):
        # moved since the run: the built-in engine's
        with contextlib.suppress(ProfileError):
            engine = load_profile(str(server["profile"]))
    return engine.with_overrides(None, server.get("health_path"))
