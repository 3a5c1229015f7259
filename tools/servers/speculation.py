"""Speculative decoding as a property of the engine profile: which flags switch it on, and which
are its parameters - so "skip speculation", the families and the report work for every engine
(llama.cpp's --spec-type and --spec-draft-model as much as SGLang's --speculative-algorithm)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tools.servers.flagcheck import canonical_flag
from tools.servers.profiles import Engine


def speculative_flags(
    engine: Engine, flags: Iterable[str], requires: Mapping[str, Mapping[str, Any]] | None = None
) -> tuple[str, ...]:
    """The flags among `flags` that belong to speculation: the profile's switches and their
    parameters, and any flag a search space's `requires` table ties to one of them."""
    names = list(flags)
    spec = engine.profile.speculation
    own = {canonical_flag(f) for f in (*spec.switches, *spec.dependents)}
    chosen = [f for f in names if canonical_flag(f) in own]
    rules = requires or {}
    grew = True
    while grew:  # a flag gated on a speculative flag is speculative too
        grew = False
        for flag, rule in rules.items():
            if flag not in chosen and flag in names and any(o in chosen for o in rule):
                chosen.append(flag)
                grew = True
    return tuple(f for f in names if f in chosen)


def speculation_on(engine: Engine, config: Mapping[str, Any]) -> bool:
    """Whether a configuration ({--flag: value}, false = omitted) decodes speculatively."""
    switches = {canonical_flag(f) for f in engine.profile.speculation.switches}
    return any(
        canonical_flag(f) in switches and v not in (False, None, "none") for f, v in config.items()
    )
