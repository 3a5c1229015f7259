"""The end of a campaign (stage 5 of the strategy): re-validation on fresh launches, then the
winner and the concurrency policy."""

from __future__ import annotations

from agent.brains.autopilot.reading import Reading
from agent.brains.autopilot.steps import Experiment, Finish, PolicyRange
from tools.domain import stats
from tools.domain.space import Flags

MAX_VALIDATIONS = 3  # re-validation launches at most (a shuffle among near-ties must end)


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
    return Finish(inc, why, value, base_value, policy, crossover)


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
