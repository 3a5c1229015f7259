"""The end of a campaign (stage 5 of the strategy): re-validation on fresh launches, then the
winner and the concurrency policy."""

from __future__ import annotations

from agent.brains.autopilot.reading import Reading
from agent.brains.autopilot.steps import Experiment, Finish, PolicyRange
from tools.domain import stats
from tools.domain.space import Flags

MAX_VALIDATIONS = 3  # re-validation launches at most (a shuffle among near-ties must end)


SAME_FAILURES = 3  # consecutive launch failures with one reason that no flag explains


def same_failures(r: Reading) -> str | None:
    """Why launching more is pointless, or None: the last SAME_FAILURES launches failed to start
    with the same first line, and no flag value is common to their changes from the baseline -
    the command or the host is broken, not the configurations."""
    last = r.h.launches[-SAME_FAILURES:]
    if len(last) < SAME_FAILURES or any(launch.ok for launch in last):
        return None
    if len({launch.reason for launch in last}) != 1:
        return None
    changes = [set(r.space.diff(r.space.baseline, launch.config).items()) for launch in last]
    if set.intersection(*changes):
        return None  # a flag value they share may be the cause: the search goes on around it
    return (
        f"stopped: the last {SAME_FAILURES} launches failed with the same error, which no flag "
        f"explains ({last[-1].reason[:160]}) - fix the command or the host and resume"
    )


def validated(r: Reading, config: Flags) -> bool:
    return len({m.launch for m in r.h.sweeps(config, r.settings.levels)}) >= 2


def validate(r: Reading, inc: Flags, left: int) -> Experiment | None:
    """The winner, then the challenger, swept again on a fresh launch (within the budget)."""
    levels = r.settings.levels
    done = sum(1 for c in r.h.configs() if validated(r, c) and c != r.space.baseline)
    if left < 1 or done >= MAX_VALIDATIONS:
        return None
    if not validated(r, inc):
        why = "re-validate the winner on a fresh launch"
        return Experiment(inc, levels, "validate", why, fresh=True)
    found = r.challenger(inc) if r.settings.challenger else None
    if found is not None and not validated(r, found[0]):
        why = "re-validate the challenger on a fresh launch"
        return Experiment(found[0], levels, "validate", why, fresh=True)
    return None


def finish(r: Reading) -> Finish:
    inc, base = r.incumbent, r.space.baseline
    value, base_value = r.value(inc), r.value(base)
    policy, crossover = concurrency_policy(r, inc)
    ratio = value / base_value if base_value > 0 else None
    gain = ratio - 1 if ratio is not None else 0.0
    floor = r.floors[1]
    if r.h.key(inc) == r.h.key(base):
        why = "no candidate beat the baseline by more than the noise floor"
    elif floor is None:
        why = f"the best beats the baseline by {gain:+.1%} (noise floor unknown)"
    elif not stats.beats(ratio, floor):
        why = f"the best beats the baseline by {gain:+.1%}, within the noise floor"
    else:
        why = f"the best beats the baseline by {gain:+.1%} (noise floor {floor:.1%})"
    return Finish(inc, why + precision_note(r, inc), value, base_value, policy, crossover)


def precision_note(r: Reading, inc: Flags) -> str:
    """What measuring longer bought, and what the noise leaves unestablished (or nothing)."""
    floor, target = r.floors[1], r.settings.target_noise
    if floor is None or floor <= target:
        return ""
    base, levels = r.space.baseline, r.settings.levels
    extra = max(0, len(r.h.sweeps(base, levels)) - 2)
    extra += sum(1 for m in r.h.measurements if m.purpose == "repeat")
    note = f"; the noise floor ({floor:.1%}) is above the {target:.0%} target"
    if extra:
        note += f": measured more before deciding ({extra} extra sweeps)"
    noise = r.precision(inc, base)
    if noise > target:
        note += (
            f"; the budget did not buy the {target:.0%} precision: differences under "
            f"{noise:.1%} between the best and the baseline are not established"
        )
    return note


def concurrency_policy(r: Reading, inc: Flags) -> tuple[tuple[PolicyRange, ...], tuple[int, ...]]:
    """Which configuration serves which levels (the challenger where it wins), and where the
    owner changes."""
    levels = r.settings.levels
    found = r.challenger(inc) if r.settings.challenger else None
    owner = [inc] * len(levels)
    if found is not None:
        owner = [found[0] if c in found[1] else inc for c in levels]
    ranges: list[PolicyRange] = []
    crossover: list[int] = []
    for i, c in enumerate(levels):
        if ranges and r.h.key(ranges[-1].config) == r.h.key(owner[i]):
            continue
        if ranges:
            last = ranges[-1]
            ranges[-1] = PolicyRange(last.from_concurrency, levels[i - 1], last.config)
            crossover.append(c)
        ranges.append(PolicyRange(c, None, owner[i]))
    return tuple(ranges), tuple(crossover)
