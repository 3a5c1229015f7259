"""Noise-adaptive measurement: a target precision for the objective (Settings.target_noise, 2 %
by default). When the A/A pair is noisier, the baseline is swept again; when a full sweep puts a
candidate above the best by less than the noise of the comparison, it is swept again on the same
server before anything is decided - a mean of n sweeps has sqrt(n) less noise. Decisions use the
comparison's own floor (Reading.precision), so no conclusion comes from a difference inside it.
"""

from __future__ import annotations

import math

from agent.brains.autopilot.reading import Reading
from agent.brains.autopilot.steps import Experiment
from tools.domain.space import Flags

MAX_SWEEPS = 3  # full sweeps of one configuration on one launch, at most, to buy precision
MAX_BASELINE_SWEEPS = 4


def baseline_again(r: Reading) -> Experiment | None:
    """Another baseline sweep while the objective's floor is above the target and more sweeps
    would bring the baseline's own mean to it."""
    floor, target = r.floors[1], r.settings.target_noise
    base, h = r.space.baseline, r.h
    n = len(h.sweeps(base, r.settings.levels))
    if floor is None or floor <= target or n >= MAX_BASELINE_SWEEPS:
        return None
    if h.running_key() != h.key(base) or h.measurements[-1].purpose not in ("baseline", "noise"):
        return None  # only right after the A/A, on the baseline's own server
    if floor / math.sqrt(n) <= target:
        return None  # the baseline's mean is already that precise
    why = (
        f"the noise floor on the objective ({floor:.1%}) is above the {target:.0%} target: "
        f"sweep the baseline again (sweep {n + 1}) before deciding anything against it"
    )
    return Experiment(base, r.settings.levels, "noise", why)


def repeat(r: Reading, inc: Flags) -> Experiment | None:
    """The latest full sweep may beat the best, but by less than the comparison's noise: sweep
    it again on the same server (up to MAX_SWEEPS) before the best moves or stays."""
    h, levels = r.h, r.settings.levels
    if not h.measurements or h.running is None:
        return None
    last = h.measurements[-1]
    if last.launch != h.running or not set(levels) <= set(last.per_level):
        return None
    config = last.config
    if h.key(config) in (h.key(inc), h.key(r.space.baseline)) or not r.allowed(config):
        return None
    on_launch = [m for m in h.sweeps(config, levels) if m.launch == h.running]
    if len(on_launch) >= MAX_SWEEPS or r.objective_noise <= r.settings.target_noise:
        return None
    best = r.value(inc)
    if best <= 0:
        return None
    ratio, noise = r.value(config) / best, r.precision(config, inc)
    if not 1 - noise / 2 < ratio <= 1 + noise:
        return None
    why = (
        f"{ratio:.3f}x of the best is inside the noise of the comparison ({noise:.1%}; target "
        f"{r.settings.target_noise:.0%}): sweep it again before deciding"
    )
    return Experiment(config, levels, "repeat", why, base=inc)
