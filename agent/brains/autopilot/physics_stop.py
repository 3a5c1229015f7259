"""Against physics: the stop signal (issue 48, docs/physics.md). Flags choose among the kernels a
stack already has, so at a memory-bound level they reach about 80 % of the bandwidth floor at most
(physics.CEILINGS). Once the best configuration without speculation is so near that ceiling at
every level the objective reads that flags could add less than the least gain the campaign
resolves (the objective's noise floor, or the precision target below it: the precision stages
measure down to it), more flag tuning cannot be told from noise. Exploring stops but for
speculation, the one lever that passes the floor, and the campaign goes on to validate. The rule
is physics.Headroom.flags_spent (beside the report's and recommend's reading, flags_done); this
module only gathers its figures from a Reading.

It never fires where a level the objective reads has no floor (no description of the box), is
bound by compute or the interconnect (no ceiling is known there), or where the noise floor is not
measured yet - and not on the built-in lab, whose best shares are 10-19 % of the floor."""

from __future__ import annotations

import math
from dataclasses import replace

from agent.brains.autopilot import families, screening
from agent.brains.autopilot.reading import Reading
from agent.brains.autopilot.steps import Experiment, Settings
from tools.domain.physics import headroom_of
from tools.domain.space import Flags

# the objectives that read throughput (the ceilings are of throughput; an SLO's is not)
THROUGHPUT = ("geomean", "level", "peak")


def speculative(settings: Settings, config: Flags) -> bool:
    """The configuration decodes speculatively: one of the space's flags of speculation is set."""
    return any(config.get(f, False) not in (False, None, "none") for f in settings.speculative)


def best_shares(r: Reading) -> dict[int, tuple[float, str]]:
    """At each level the objective reads, the best share of the floor a configuration without
    speculation measured in full sweeps, with the floor's bound; {} unless every such level has
    one. A share is the configuration's mean over its sweeps against its own floor (which follows
    its dtypes), taken down by the noise of that mean - one level's floor (a difference of two
    sweeps) over the root of twice its sweeps - so that a lucky sweep of a configuration short of
    the ceiling does not stop the search (at-the-floor, 10 seeds: one stopped at 0.75 of the gain
    without it)."""
    s, h = r.settings, r.h
    levels = s.objective.depends_on(s.levels)
    best: dict[int, tuple[float, str]] = {}
    for config in r.swept_configs:
        if speculative(s, config):
            continue
        floors, estimate = h.floors.get(h.key(config), {}), h.estimate(config)
        doubt = 1 + r.level_noise / math.sqrt(2 * max(1, len(h.sweeps(config, s.levels))))
        for level in levels:
            if level not in floors or level not in estimate:
                continue
            tok_s, bound = floors[level]
            share = estimate[level] / tok_s / doubt
            if share > best.get(level, (0.0, ""))[0]:
                best[level] = (share, bound)
    return best if set(best) == set(levels) else {}


def spent(r: Reading) -> str | None:
    """Why flags are spent against physics (one line), or None while they may still pay."""
    if r.settings.objective.kind not in THROUGHPUT:
        return None
    best = best_shares(r)
    if not best:
        return None
    noise = r.floors[1]
    if noise is None:
        return None
    # the least gain the campaign resolves: its precision stages measure down to the target
    room = headroom_of(best, min(noise, r.settings.target_noise))
    return room.spent_line() if room.flags_spent else None


def speculation_move(r: Reading, inc: Flags, why: str) -> Experiment | None:
    """Once flags are spent (`why`): the next move from the best that changes speculation alone -
    a neighbour to screen, then the family's own search (families.moves) - or None, and exploring
    is over."""
    s = r.settings
    own = set(s.speculative)
    if not own:
        return None
    for what, cand in screening.untried(r, inc):
        if set(r.space.diff(inc, cand)) <= own:
            text = f"{why}: screen speculation, {what}"
            return Experiment(cand, s.screens(), "screen", text, fresh=True, base=inc)
    for step in families.moves(r, inc):
        if set(r.space.diff(inc, step.config)) <= own:
            return replace(step, why=f"{why}; {step.why}")
    return None
