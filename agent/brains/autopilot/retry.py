"""A start failure retried from another base before the move is banned (issue 26.2).

A one-factor move that failed to start from the best is not banned at once (reading.crash_reason
lets one crash with no start anywhere through): the failure may be the context's, not the
move's - a small win adopted earlier (torch.compile's workspace) leaves too little memory for
the next good move (EAGLE-3's draft model). Nothing else would launch the move again from a base
without that context, so this stage does, once: from the best swept configuration that lacks
the flags the failure names (the flags of the space its message mentions), or - when it names
none, as an out-of-memory line does - that lacks at least one of the flags the crashed base
changed from the baseline. A second crash bans the move (reading.crash_reason); a start narrows
the blame to the context flags (reading.blame).
"""

from __future__ import annotations

from agent.brains.autopilot.families import describe
from agent.brains.autopilot.reading import Reading
from agent.brains.autopilot.steps import Experiment
from tools.domain.space import Flags, same


def crashed_move(r: Reading, inc: Flags) -> Experiment | None:
    """The first move that failed to start once, never started, and was not retried yet,
    launched again from the best base without the flags suspected of the failure."""
    space, h = r.space, r.h
    for config, why in h.crashed().values():
        for ref in r.swept_configs:
            change = space.diff(ref, config)
            if not change or len(r.roots(change)) != 1:
                continue
            if len(r.crashes_of(change)) != 1 or r.started_with(change):
                break  # retried already (a second crash bans it), or it started somewhere
            step = _retry(r, config, ref, change, why)
            if step is not None:
                return step
            break
    return None


def suspects(r: Reading, crashed: Flags, change: Flags, why: str) -> tuple[set[str], bool]:
    """(the context flags suspected of a failure, whether the base must lack all of them): the
    changed-from-baseline flags its message names, else every one (a base lacking any)."""
    base = r.space.baseline
    context = {
        f
        for f in r.space.flags
        if f not in change and not same(crashed.get(f, False), base.get(f, False))
    }
    named = {f for f in context if f in why}
    return (named, True) if named else (context, False)


def _retry(r: Reading, config: Flags, ref: Flags, change: Flags, why: str) -> Experiment | None:
    space, h = r.space, r.h
    flags, every = suspects(r, config, change, why)
    if not flags:
        return None  # the move crashed from the baseline itself: nothing to take away

    def lacks(base: Flags) -> bool:
        free = [not same(base.get(f, False), config.get(f, False)) for f in flags]
        return all(free) if every else any(free)

    bases = sorted((c for c in r.swept_configs if lacks(c)), key=lambda c: -r.value(c))
    for base in bases:
        cand = space.repair({**base, **change})
        if not space.admissible(cand) or not r.allowed(cand) or h.tried(cand):
            continue
        dropped = ", ".join(sorted(f for f in flags if not same(base.get(f), config.get(f))))
        what = describe(space, ref, config)
        text = (
            f"retry {what} from a base without {dropped}: it failed to start from "
            f"{'the best' if h.key(ref) == h.key(r.incumbent) else 'another base'} "
            f"({why[:100]}), which may be that context's, not the move's"
        )
        return Experiment(cand, r.settings.screens(), "screen", text, fresh=True, base=base)
    return None
