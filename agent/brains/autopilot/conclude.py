"""The end of a campaign (stage 5 of the strategy): re-validation on fresh launches, then the
winner against the baseline in launch pairs (ABBA), then the winner and the concurrency policy.

The pairs (issue 29): the baseline and the winner launched alternately - baseline, winner, then
winner, baseline, and so on - each pair one comparison (stats.Paired), so a drift of the box common
to both launches of a pair cancels, and a drift that goes one way all along (a box warming up, a
load ramping down) favours the winner in one pair and the baseline in the next, so it cancels over
the pairs instead of biasing every pair the same way (as ABAB would); a ratio of sweeps taken
minutes apart (the baseline's at the start, a candidate's later) measures the machine as much as the
configuration. At least MIN_PAIRS, then more while the interval is not decided and more pairs could
decide it (within the budget). The verdict reads only the pairs: a win when their anytime-valid
interval excludes every gain under stats.MIN_GAIN, else "not established" with what it would
take.

On a fleet (Settings.crossover) the winner is proven in crossovers instead (`cross`): the
baseline and the winner measured at the same time on two boxes, then each on the other's box;
each crossover one comparison (stats.crossover_ratio), read by the same stats.Paired and
decide(). They run beside other work: a third box re-validates the challenger, and while
exploring goes on, boxes nothing else needs begin the current leader's crossovers early
(`crossing`)."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from agent.brains.autopilot.history import Measurement
from agent.brains.autopilot.reading import Reading
from agent.brains.autopilot.steps import Experiment, Finish, PolicyRange
from tools.bench.duet import paired_of, round_of
from tools.bench.results import period_of
from tools.domain import stats
from tools.domain.decision import decide, decide_paired
from tools.domain.objective import by_level
from tools.domain.space import Flags

MAX_VALIDATIONS = 3  # re-validation launches at most (a shuffle among near-ties must end)
MIN_PAIRS = 2  # launch pairs of the baseline and the winner before a verdict


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


def validations_done(r: Reading) -> int:
    """The configurations other than the baseline swept on two launches or more."""
    return sum(1 for c in r.h.configs() if validated(r, c) and c != r.space.baseline)


def validate(r: Reading, inc: Flags, left: int, winner: bool = True) -> Experiment | None:
    """The winner, then the challenger, swept again on a fresh launch (within the budget). Not
    `winner`: the challenger only (a crossover launches the winner afresh)."""
    levels = r.settings.levels
    if left < 1 or validations_done(r) >= MAX_VALIDATIONS:
        return None
    if winner and not validated(r, inc):
        why = "re-validate the winner on a fresh launch"
        return Experiment(inc, levels, "validate", why, fresh=True)
    found = r.challenger(inc) if r.settings.challenger else None
    if found is not None and not validated(r, found[0]):
        why = "re-validate the challenger on a fresh launch"
        return Experiment(found[0], levels, "validate", why, fresh=True)
    return None


def reserved(max_launches: int) -> int:
    """Launches exploring leaves for the end: one to re-validate the winner, and MIN_PAIRS launch
    pairs where the budget is large enough to spare them (at most a quarter of it)."""
    return 1 + min(2 * MIN_PAIRS, 2 * (max_launches // 8))


def pair_runs(r: Reading, inc: Flags) -> tuple[list[tuple[Measurement, Measurement]], Flags | None]:
    """The launch pairs measured for `inc`, each (the baseline's sweep, `inc`'s): two `pair`
    sweeps in a row, one of each, in either order (ABBA), in measured order; and the
    configuration whose launch completes the pair that is half made (None: none is)."""
    base, levels = r.space.baseline, r.settings.levels
    h = r.h
    runs = [
        m
        for m in h.measurements
        if m.purpose == "pair"
        and set(levels) <= set(m.per_level)
        and h.key(m.config) in (h.key(base), h.key(inc))  # not a pair of an earlier winner
    ]
    pairs, waiting = stats.launch_pairs(runs, lambda m: h.key(m.config) == h.key(base))
    if waiting is None:
        return pairs, None
    return pairs, inc if h.key(waiting.config) == h.key(base) else base


def paired(r: Reading, inc: Flags) -> stats.Paired:
    """`inc` against the baseline measured so that a drift cancels: its crossovers on a fleet
    (`crossovers`), else its latest duet with the baseline (each round's objective ratio, valid
    over the duet's most rounds), else its launch pairs (each pair's objective ratio) - as
    recommend reads them (results.crossover_periods, results.duet_rounds, results.pairs)."""
    s = r.settings
    crossed = crossovers(r, inc)
    if crossed.n:
        return crossed
    found = r.h.duet_of(r.space.baseline, inc)
    if found is not None:
        value = partial(s.objective.value, levels=s.levels)
        rounds = [round_of(a, b, value) for a, b in found.rounds]
        return paired_of(rounds, found.looks, by_level(s.objective.kind), s.levels)
    ratios = []
    for b, w in pair_runs(r, inc)[0]:
        bv = s.objective.value(b.per_level, b.slo_ok, s.levels)
        wv = s.objective.value(w.per_level, w.slo_ok, s.levels)
        ratios.append(wv / bv if bv > 0 else 0.0)
    return stats.Paired(tuple(ratios))


def cross_periods(r: Reading, inc: Flags) -> list[tuple[Measurement, Measurement]]:
    """`inc`'s crossover periods with both halves measured, in period order, each (the
    baseline's sweep, `inc`'s): the two measured at the same time on two boxes."""
    h, base, levels = r.h, r.space.baseline, r.settings.levels
    halves: dict[int, dict[bool, Measurement]] = {}
    for m in h.measurements:
        k = period_of(m.label)
        if k is not None and set(levels) <= set(m.per_level):
            halves.setdefault(k, {})[h.key(m.config) == h.key(base)] = m
    return [
        (p[True], p[False])
        for _, p in sorted(halves.items())
        if len(p) == 2 and h.key(p[False].config) == h.key(inc)
    ]


def crossovers(r: Reading, inc: Flags) -> stats.Paired:
    """`inc` against the baseline in crossovers: each period's objective ratio, each two
    periods (the boxes swapped in the second) one crossover (stats.crossovers), read level by
    level where the objective is their geometric mean (as a duet's rounds); none: n = 0."""
    s, o = r.settings, r.settings.objective
    ratios, blocks = [], []
    for a, b in cross_periods(r, inc):
        va = o.value(a.per_level, a.slo_ok, s.levels)
        vb = o.value(b.per_level, b.slo_ok, s.levels)
        ratios.append(vb / va if va > 0 else 0.0)
        blocks.append(stats.level_blocks(a.per_level, b.per_level, s.levels))
    rows = stats.crossover_blocks(blocks) if by_level(o.kind) else ()
    return stats.Paired(stats.crossovers(ratios), unit="crossover", blocks=rows)


def cross(r: Reading, inc: Flags, left: int) -> Experiment | None:
    """The baseline's half of the next crossover period of `inc` (`partner`: the winner's half,
    placed with it): at least MIN_PAIRS crossovers, more while they leave the verdict open and
    more could settle it - where the budget has room for both halves. None: not a fleet,
    nothing to prove, decided or no room."""
    h, base = r.h, r.space.baseline
    if not r.settings.crossover or h.key(inc) == h.key(base) or left < 2:
        return None
    periods = len(cross_periods(r, inc))
    k = periods // 2 + 1
    if periods % 2:
        why = f"crossover {k}, swapped: the baseline and the winner each on the other's box"
    else:
        done = crossovers(r, inc)
        if left < 4 or (done.n >= MIN_PAIRS and pairs_wanted(done, left // 2) == done.n):
            return None  # no room for both periods, or decided, or no count would decide it
        why = f"crossover {k}: the baseline and the winner at the same time on two boxes"
    number = 1 + max((period_of(m.label) or 0 for m in h.measurements), default=0)
    return Experiment(base, r.settings.levels, "cross", why, fresh=True, base=inc, period=number)


def partner(half: Experiment) -> Experiment:
    """The other half of a crossover period: the configuration it is compared with, at once."""
    if half.base is None:
        raise ValueError("a crossover's half names what it is compared with (base)")
    return replace(half, config=half.base, base=half.config)


def cross_subject(r: Reading) -> Flags:
    """The configuration the crossovers prove: the one crossed last, unless the incumbent beats
    it by more than the noise of that comparison (then the incumbent); the incumbent when none
    was crossed. A near-tie that moves ahead by a sweep does not throw the evidence away."""
    h, base, inc = r.h, r.space.baseline, r.incumbent
    crossed = [m.config for m in h.measurements if m.purpose == "cross"]
    crossed = [c for c in crossed if h.key(c) != h.key(base)]
    if not crossed or h.key(crossed[-1]) == h.key(inc):
        return inc
    last = crossed[-1]
    if h.key(inc) == h.key(base):
        return last
    ratio, _ = r.compare(inc, last, r.settings.levels)
    return inc if ratio is not None and ratio > 1 + r.precision(inc, last) else last


def crossing(r: Reading) -> Experiment | None:
    """While exploring goes on, for two free boxes: the next crossover period of the
    configuration the crossovers prove (`cross_subject`), begun early - where the budget keeps,
    beyond what exploring reserves for the end, the launches of MIN_PAIRS + 1 crossovers: a
    leader that moves later can still be proven (offline, a guard of one crossover's launches
    left 2 of 10 campaigns unestablished, benchmarks/fleet_speedup.py)."""
    left = r.budget_left - reserved(r.settings.max_launches)
    return cross(r, cross_subject(r), left) if left >= 4 * (MIN_PAIRS + 1) else None


DUET_ROUNDS = stats.MAX_PAIRS  # a duet's most rounds (tools/duet.py stops when it decides)


def duets(r: Reading) -> bool:
    """The winner is proven in a duet rather than launch pairs: the host runs two servers side by
    side ([server] side_by_side) and no duet has failed to be made on it."""
    return r.settings.side_by_side and not r.h.side.failed


def duet(r: Reading, inc: Flags, left: int) -> Experiment | None:
    """The winner against the baseline in a duet (tools/duet.py): a fresh launch of the winner,
    the baseline started beside it, blocks alternated at each level until the rounds decide -
    where the host fits both. None: not this design, nothing to prove, done, or no room for its
    two launches."""
    if not duets(r) or r.h.key(inc) == r.h.key(r.space.baseline):
        return None
    if r.h.duet_of(r.space.baseline, inc) is not None:
        return None
    running_fresh = r.h.running_key() == r.h.key(inc) and r.h.running_fresh()
    both_up = running_fresh and r.h.side.launch is not None
    # both up: the duet needs no launch, and the tool stops its rounds on the minutes left (a
    # real-vLLM campaign counted 0 launches left with both servers up and concluded unmeasured)
    if not both_up and left < (1 if running_fresh else 2):
        return None
    why = (
        "a duet: the winner on a fresh launch and the baseline beside it, both up, blocks "
        "alternated at each level until the rounds decide (a drift hits both alike)"
    )
    return Experiment(inc, r.settings.levels, "duet", why, fresh=True, base=r.space.baseline)


def pair(r: Reading, inc: Flags, left: int) -> Experiment | None:
    """The next launch of the paired comparison: the baseline then the winner, the winner then
    the baseline, and so on (ABBA) - at least MIN_PAIRS pairs, and more while they leave the
    verdict open and more could settle it."""
    base, levels = r.space.baseline, r.settings.levels
    if r.h.key(inc) == r.h.key(base) or left < 1 or duets(r):
        return None  # nothing to prove, no room, or a duet proves it
    pairs, waiting = pair_runs(r, inc)
    k = len(pairs) + 1
    if waiting is not None:
        if r.h.key(waiting) == r.h.key(inc):
            why = f"launch pair {k}: the winner right after the baseline (a drift of both cancels)"
            return Experiment(inc, levels, "pair", why, fresh=True, base=base)
        why = f"launch pair {k}: the baseline right after the winner (a drift of both cancels)"
        return Experiment(base, levels, "pair", why, fresh=True, base=inc)
    if left < 2:
        return None
    if len(pairs) >= MIN_PAIRS and pairs_wanted(paired(r, inc), left) == len(pairs):
        return None  # decided, or no number of pairs the budget allows would decide it
    if k % 2:
        why = f"launch pair {k}: the baseline again on a fresh launch, then the winner"
        return Experiment(base, levels, "pair", why, fresh=True, base=inc)
    why = (
        f"launch pair {k}: the winner first this time, then the baseline (ABBA: a drift that "
        "goes one way cancels over the pairs)"
    )
    return Experiment(inc, levels, "pair", why, fresh=True, base=base)


def pairs_wanted(p: stats.Paired, left: int) -> int:
    """The pairs the comparison makes in all once MIN_PAIRS are in: those an open verdict needs
    (Paired.pairs_needed) when the `left` launches can pay for them, else those made."""
    need = p.pairs_needed()
    if decide_paired(p) == "win" or need is None or need - p.n > left // 2:
        return p.n
    return need


def launches_left(r: Reading, inc: Flags, left: int) -> int:
    """The launches this stage holds at least for `inc` from here, within the `left` the budget
    allows (what the todo list says, and the time left counts): the winner's and the
    challenger's fresh launches not made yet (within MAX_VALIDATIONS), and the launch pairs not
    made yet - before MIN_PAIRS are in, those its sweeps' ratio is expected to need
    (stats.pairs_expected: two pairs decide only a gain many floors large), after, those the
    pairs' own figures need, where `pair` would make them."""
    if r.h.key(inc) == r.h.key(r.space.baseline):
        return 0  # nothing beat the baseline: nothing to re-validate or pair
    fresh = [] if validated(r, inc) else [inc]
    found = r.challenger(inc) if r.settings.challenger else None
    if found is not None and not validated(r, found[0]):
        fresh.append(found[0])
    fresh = fresh[: max(0, MAX_VALIDATIONS - validations_done(r))]
    # a duet's or a crossover's own launches of the winner re-validate it: only the challenger's
    others = [c for c in fresh if r.h.key(c) != r.h.key(inc)]
    if duets(r):  # the winner's fresh launch and the baseline beside it, until the duet is in
        return min(left, len(others) + (0 if r.h.duet_of(r.space.baseline, inc) else 2))
    if r.settings.crossover:  # two launches a period, two periods a crossover
        done = crossovers(r, inc)
        want = MIN_PAIRS if done.n < MIN_PAIRS else pairs_wanted(done, (left - len(fresh)) // 2)
        periods = len(cross_periods(r, inc))
        return min(left, len(others) + max(0, 4 * want - 2 * periods))
    pairs, waiting = pair_runs(r, inc)
    if len(pairs) < MIN_PAIRS:
        base_value = r.value(r.space.baseline)
        ratio = r.value(inc) / base_value if base_value > 0 else 0.0
        need = stats.pairs_expected(ratio, r.floors[1], MIN_PAIRS)
    else:  # as pair() decides, once the fresh launches are made
        need = pairs_wanted(paired(r, inc), left - len(fresh))
    made = 2 * len(pairs) + (waiting is not None)
    return min(left, len(fresh) + max(0, 2 * need - made))


def paired_subject(r: Reading) -> Flags | None:
    """The configuration whose launch pairs began last (None: no pair of a candidate is
    measured yet): the tested claim the campaign concludes on."""
    base, h = r.space.baseline, r.h
    subject = None
    for m in h.measurements:
        if m.purpose == "pair" and h.key(m.config) != h.key(base):
            subject = m.config
    return subject


def pairs_go_on(r: Reading) -> Flags | None:
    """The subject whose launch pairs go on, or None where they begin with the incumbent: the
    pairs stay with their subject unless the sweeps' means put another in the lead and the
    budget still holds that one's fresh launches and pairs. A pair sweep that lowers the
    subject's mean can hand the lead to a near-tie; restarting the pairs for it with no room
    left spent a 45-minute real-vLLM campaign's last launches on a second subject with one pair
    each (docs/engines.md), while keeping the first subject against a leader the budget can
    still test deploys the lesser of the two more often (benchmarks/efficiency.py). A pair
    half made is completed first, whoever leads: its two launches one after the other are what
    cancels a drift (a re-validation between them put a steady slowdown into its ratio)."""
    subject, lead, h = paired_subject(r), r.incumbent, r.h
    if subject is None or h.key(lead) in (h.key(subject), h.key(r.space.baseline)):
        return subject
    if pair_runs(r, subject)[1] is not None:
        return subject
    room = max(0, r.budget_left)
    return None if launches_left(r, lead, room + 1) <= room else subject


def settled(r: Reading) -> Flags:
    """The configuration the campaign concludes on: the one its last duet or its launch pairs
    tested (a tested claim over an untested one, whatever the sweeps' means say after), else
    the incumbent."""
    if r.settings.crossover:
        return cross_subject(r)
    tested = [d.b for d in r.h.duets if d.rounds and r.h.key(d.a) == r.h.key(r.space.baseline)]
    return (tested[-1] if tested else None) or paired_subject(r) or r.incumbent


def baseline_drift(r: Reading) -> stats.Drift | None:
    """The baseline's own full sweeps as a drift series (stats.drift; recommend reads the same
    formula over the result files' sweeps); decision.decide says when it withholds a win."""
    o = r.settings.objective
    sweeps = [m.per_level for m in r.h.sweeps(r.space.baseline, r.settings.levels)]
    return stats.drift(sweeps, o.kind, o.level)


def finish(r: Reading) -> Finish:
    inc, base = settled(r), r.space.baseline
    value, base_value = r.value(inc), r.value(base)
    policy, crossover = concurrency_policy(r, inc)
    ratio = value / base_value if base_value > 0 else None
    gain = ratio - 1 if ratio is not None else 0.0
    floor = r.floors[1]
    is_base = r.h.key(inc) == r.h.key(base)
    pairs = None if is_base else paired(r, inc)
    d = decide(ratio, floor, pairs, baseline_drift(r), is_baseline=is_base)
    if d.verdict == "baseline":
        why = "no candidate beat the baseline by more than the noise floor"
    elif d.verdict == "not established" and d.withheld == "drift" and d.drift is not None:
        why = (
            f"not established: the best measured {gain:+.1%} over the baseline's sweeps, but the "
            f"baseline's own sweeps moved {d.drift.change:+.1%} during the run (beyond the noise "
            f"floor, {floor or 0:.1%}, and as much as the gain) and the budget left no launch "
            "pairs to cancel it"
        )
    elif d.verdict != "win" and d.paired is not None:  # the pairs decide, and did not establish
        what = d.paired.unestablished()
        if decide_paired(d.paired) != "no gain":
            what = f"a gain under {stats.MIN_GAIN:.0%} not excluded ({what})"
        why = (
            f"not established: the best measured {gain:+.1%} over the baseline's sweeps, "
            f"{d.paired.stated()}, {what}"
        )
    elif d.verdict != "win" and floor is None:
        why = f"the best beats the baseline by {gain:+.1%} (noise floor unknown)"
    elif d.verdict != "win":
        why = f"the best beats the baseline by {gain:+.1%}, within the noise floor"
    elif d.paired is None:  # recommend reads the same sweeps and no pairs: the same verdict
        why = (
            f"the best beats the baseline by {gain:+.1%} (noise floor {floor or 0:.1%}), not "
            f"checked in launch pairs: the budget left none ({MIN_PAIRS} pairs would; a drift "
            "of the box during the run is not ruled out)"
        )
    else:  # the claim is the pairs', never the unpaired ratio
        why = (
            f"the best beats the baseline by {d.paired.ratio - 1:+.1%} paired "
            f"({d.paired.evidence()}; "
            + ("noise floor unknown)" if floor is None else f"noise floor {floor:.1%})")
        )
    done = Finish(inc, why + precision_note(r, inc), value, base_value, policy, crossover)
    # what is deployed is the decision: `best` only on a win (recommend deploys the same); the
    # pairs, where any, are the evidence either way (a duet that left the means within the noise
    # had the autopilot say "deploy" where recommend kept the baseline)
    return replace(done, paired=d.paired, established=d.verdict in ("win", "baseline"))


def precision_note(r: Reading, inc: Flags) -> str:
    """What measuring longer bought, and what the noise leaves unestablished (or nothing)."""
    floor, target = r.floors[1], r.settings.target_noise
    if floor is None or floor <= target:
        return ""
    base, level = r.space.baseline, r.settings.one_level()
    extra = max(0, r.samples(base) - 2)  # beyond the A/A pair (at one level: its samples there)
    extra += sum(1 for m in r.h.measurements if m.purpose == "repeat")
    note = f"; the noise floor ({floor:.1%}) is above the {target:.0%} target"
    what = "extra sweeps" if level is None else f"extra measurements at C={level}"
    if extra:
        note += f": measured more before deciding ({extra} {what})"
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
