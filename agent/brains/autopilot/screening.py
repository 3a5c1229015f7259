"""One factor at a time from the best (stages 2 and 3 of the strategy): each neighbour is screened
on a few levels, and a promising screen is confirmed with a full sweep. Changes are learned from:
one that lost clearly from another base, or failed to start, is not tried again."""

from __future__ import annotations

from collections.abc import Iterator

from agent.brains.autopilot.families import describe, family_moves
from agent.brains.autopilot.reading import Reading, gated
from agent.brains.autopilot.steps import Experiment, levels_text, show_value
from tools.domain.space import Flags


def confirm(r: Reading, inc: Flags) -> Experiment | None:
    """The latest measurement was a screen: sweep it fully if it may beat the best on the
    objective (within the objective's noise of it, or above), or - for the policy - if it wins
    some level beyond the noise and is the best of its family there so far."""
    h, levels = r.h, r.settings.levels
    if not h.measurements:
        return None
    last = h.measurements[-1]
    if h.swept(last.config, levels) or not r.allowed(last.config):
        return None
    screened = tuple(last.per_level)
    ratio, wins = r.compare(last.config, inc, screened)
    if ratio is not None and ratio >= 1 - r.objective_noise:
        why = f"the screen is within the noise of the best or above ({ratio:.3f}x): confirm"
        return Experiment(last.config, levels, "confirm", why, base=inc)
    if not wins or not r.settings.challenger:
        return None
    rival = r.challenger(inc)
    if rival is not None and last.purpose == "challenger":
        rival_ratio, _ = r.compare(last.config, rival[0], screened)
        if rival_ratio is None or rival_ratio <= 1:
            return None  # it wins there, but the family already has a better member
    why = f"it wins at C={levels_text(wins)}: confirm, it may set the concurrency policy"
    return Experiment(last.config, levels, "confirm", why, base=inc)


def explore(r: Reading, inc: Flags) -> Experiment | None:
    """The first untried neighbour of the best that nothing learned rules out, to screen."""
    for what, cand in untried(r, inc):
        why = f"one factor from the best: {what}"
        return Experiment(cand, r.settings.screens(), "screen", why, fresh=True, base=inc)
    return None


def untried(r: Reading, inc: Flags) -> Iterator[tuple[str, Flags]]:
    """The neighbours of the best still to screen, in order, with what each changes: what
    explore launches next, and how many experiments the todo list says are left."""
    space = r.space
    moves = [
        (f"{f} {show_value(inc.get(f))} -> {show_value(v)}", c)
        for f, v, c in space.neighbours(inc, best_known(r))
    ]
    for gate in space.flags:  # coupled parameters of a family that is on: two at once
        if gated(space, gate) and inc.get(gate, False) is not False:
            family = set(gated(space, gate))
            moves += [
                (describe(space, inc, c), c)
                for c in family_moves(space, inc, family)
                if len(space.diff(inc, c)) == 2
            ]
    for what, cand in moves:
        if r.allowed(cand) and not r.h.tried(cand) and not r.learned_skip(inc, cand):
            yield what, cand


def best_known(r: Reading) -> Flags:
    """For each flag, its value in the best configuration that gives it (by objective): what a
    family brings along when it is switched on from a new base - so earlier winners combine."""
    out: Flags = {}
    for config in sorted(r.swept_configs, key=lambda c: -r.value(c)):
        for flag, value in config.items():
            if value is not False:
                out.setdefault(flag, value)
    return out
