"""Noise-adaptive measurement: a target precision for the objective (Settings.target_noise, 2 %
by default). When the A/A pair is noisier, the baseline is swept again; when a full sweep puts a
candidate above the best by less than the noise of the comparison, it is swept again on the same
server before anything is decided - a mean of n sweeps has sqrt(n) less noise. Decisions use the
comparison's own floor (Reading.precision), so no conclusion comes from a difference inside it.

An objective at one level (output throughput at C=1) gets no averaging over levels: its floor is
one level's, and a full sweep spends most of its time on levels the objective does not read. There
the same stages measure that level alone (Experiment.at_level), each measurement with the requests
a full sweep runs there, until the configuration's own mean at that level meets the target
(floor / sqrt(n)) or the comparison's floor does - bounded by time, not by a count: the
measurements of one configuration on one launch spend at most the benchmark time of the full
sweeps the geomean path may spend there (MAX_SWEEPS - 1 for a candidate, MAX_BASELINE_SWEEPS - 2
for the baseline), a level's time being its requests over its throughput (the baseline's,
measured). So precision at one level never costs more time than the full sweeps did; at C=1, about
an eighth of a full sweep on the reference box, the same time buys about eight times the samples.
"""

from __future__ import annotations

import math

from agent.brains.autopilot.history import History
from agent.brains.autopilot.purposes import AT_LEVEL
from agent.brains.autopilot.reading import Reading
from agent.brains.autopilot.steps import FIRST, Experiment, sweep_requests
from tools.domain.space import Flags

MAX_SWEEPS = 3  # full sweeps of one configuration on one launch, at most, to buy precision
MAX_BASELINE_SWEEPS = 4


def baseline_again(r: Reading) -> Experiment | None:
    """Another baseline measurement while the objective's floor is above the target: a full sweep,
    or the objective's level alone (baseline_at_level)."""
    if r.settings.one_level() is not None:
        return baseline_at_level(r)
    return baseline_full(r)


def repeat(r: Reading, inc: Flags) -> Experiment | None:
    """The latest measurement may beat the best, but by less than the comparison's noise: measure
    it again on the same server before the best moves or stays - a full sweep (repeat_full), or
    the objective's level alone (repeat_at_level)."""
    if r.settings.one_level() is not None:
        return repeat_at_level(r, inc)
    return repeat_full(r, inc)


def baseline_full(r: Reading) -> Experiment | None:
    """Another baseline sweep while the objective's floor is above the target and more sweeps
    would bring the baseline's own mean to it."""
    floor, target = r.floors[1], r.settings.target_noise
    base, h = r.space.baseline, r.h
    n = len(h.sweeps(base, r.settings.levels))
    if floor is None or floor <= target or n >= MAX_BASELINE_SWEEPS:
        return None
    if h.running_key() != h.key(base) or h.measurements[-1].purpose not in FIRST:
        return None  # only right after the A/A, on the baseline's own server
    if floor / math.sqrt(n) <= target:
        return None  # the baseline's mean is already that precise
    why = (
        f"the noise floor on the objective ({floor:.1%}) is above the {target:.0%} target: "
        f"sweep the baseline again (sweep {n + 1}) before deciding anything against it"
    )
    return Experiment(base, r.settings.levels, "noise", why)


def repeat_full(r: Reading, inc: Flags) -> Experiment | None:
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


# --- precision where the objective reads: one level ----------------------------------------------
def level_cost(r: Reading, level: int) -> float | None:
    """The benchmark time of one measurement of `level` as a fraction of a full sweep's: a level
    takes its requests' output tokens (max_tokens each) over its throughput (the baseline's
    measured tokens per second per level), and at least the engine's level minimum (on a real
    engine a short level lasts 5 s, so one measured alone costs more of a sweep than its
    requests say). None: the baseline served nothing at `level`."""
    est = r.h.estimate(r.space.baseline)
    s = r.settings
    requests = sweep_requests(s.levels, s.requests_per_level)
    least = s.min_level_s or 0.0
    time = {
        c: max(requests[c] * s.max_tokens / est[c], least) for c in s.levels if est.get(c, 0.0) > 0
    }
    if level not in time:
        return None
    return time[level] / sum(time.values())


def level_budget(r: Reading, level: int, full_sweeps: int) -> int:
    """How many measurements of `level` alone take the time of `full_sweeps` full sweeps."""
    cost = level_cost(r, level)
    return 0 if cost is None else int(full_sweeps / cost)


def alone(r: Reading, config: Flags, launch: int, level: int) -> int:
    """The measurements of `level` alone of config on `launch`."""
    return sum(
        1
        for m in r.h.of(config)
        if m.launch == launch and m.purpose in AT_LEVEL and set(m.per_level) == {level}
    )


def baseline_at_level(r: Reading) -> Experiment | None:
    """The baseline measured again at the objective's level alone, right after the A/A on its own
    server, until its mean there meets the target (or the time of the extra full sweeps the
    geomean path may spend on it is spent)."""
    level = r.settings.one_level()
    floor, target = r.floors[1], r.settings.target_noise
    base, h = r.space.baseline, r.h
    if level is None or floor is None or floor <= target or h.running is None:
        return None
    if h.running_key() != h.key(base) or h.measurements[-1].purpose not in FIRST:
        return None  # only right after the A/A, on the baseline's own server
    n = r.samples(base)
    if floor / math.sqrt(n) <= target:
        return None  # the baseline's mean at its level is already that precise
    if alone(r, base, h.running, level) >= level_budget(r, level, MAX_BASELINE_SWEEPS - 2):
        return None
    why = (
        f"the noise floor at C={level} ({floor:.1%}) is above the {target:.0%} target: measure "
        f"the baseline again at C={level}, the level the objective reads (sample {n + 1})"
    )
    return Experiment(base, (level,), "noise", why, at_level=True)


def rival(r: Reading, config: Flags, inc: Flags) -> Flags:
    """What config is compared against: the best, or when config is the best, the best
    without it."""
    h = r.h
    if h.key(config) != h.key(inc):
        return inc
    k = h.key(config)
    others = [m for m in h.measurements if h.key(m.config) != k]
    without = History(r.space, h.launches, others, h.running, h.broken, duets=h.duets, side=h.side)
    return Reading(r.space, r.settings, without).incumbent


def repeat_at_level(r: Reading, inc: Flags) -> Experiment | None:
    """The configuration measured last on the server up now is within the comparison's noise of
    the best (or is the best, within the noise of the one it displaced): measure it again at the
    objective's level alone, until the comparison's floor or its own mean meets the target, the
    ratio leaves the noise, or the time of MAX_SWEEPS - 1 full sweeps is spent on it."""
    h, levels, level = r.h, r.settings.levels, r.settings.one_level()
    target = r.settings.target_noise
    if level is None or not h.measurements or h.running is None:
        return None
    last = h.measurements[-1]
    whole = set(levels) <= set(last.per_level)
    if last.launch != h.running or not (whole or alone(r, last.config, h.running, level)):
        return None
    config = last.config
    if h.key(config) == h.key(r.space.baseline) or not r.allowed(config):
        return None
    if not h.swept(config, levels) or r.objective_noise <= target:
        return None
    if r.objective_noise / math.sqrt(r.samples(config)) <= target:
        return None  # its own mean is that precise: the rest is the rival's, on another launch
    if alone(r, config, h.running, level) >= level_budget(r, level, MAX_SWEEPS - 1):
        return None
    ref = rival(r, config, inc)
    best = r.value(ref)
    if best <= 0:
        return None
    ratio, noise = r.value(config) / best, r.precision(config, ref)
    if noise <= target or not 1 - noise / 2 < ratio <= 1 + noise:
        return None
    why = (
        f"{ratio:.3f}x of {'the best' if ref is inc else 'the best before it'} at C={level} is "
        f"inside the noise of the comparison ({noise:.1%}; target {target:.0%}): measure C={level} "
        "again, the level the objective reads"
    )
    return Experiment(config, (level,), "repeat", why, base=ref, at_level=True)
