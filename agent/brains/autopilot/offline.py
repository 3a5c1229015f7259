"""The planner against a truth function instead of servers: fast, seeded, for tests and the
efficiency study (benchmarks/efficiency.py). A launch either fails (the truth says why) or gives a
server whose every benchmark is the truth times seeded multiplicative noise - and times the box's
speed, when a drift is given (the speed by the number of sweeps measured before: a schedule set
by the campaign's progress, as sim --drift sets one by the clock). With the planner's
`side_by_side`, its winner is proven in a duet: the baseline launched beside it, rounds of a
noisy block per level on each until the rounds decide, as tools/bench/duet.py stops them."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from agent.brains.autopilot.ask_tell import (
    AskTell,
    Beside,
    Dueted,
    Measured,
    NotStarted,
    Started,
    Sweep,
)
from agent.brains.autopilot.history import History
from agent.brains.autopilot.planner import Experiment, Finish, Planner
from tools.bench.duet import DuetRound, paired_of, round_of, settled
from tools.domain import stats
from tools.domain.objective import by_level
from tools.domain.space import Flags

# config, levels -> per-level throughput, or the one-line reason it does not start
Truth = Callable[[Flags, Sequence[int]], "dict[int, float] | str"]
# config, levels -> whether each level met the SLO (for the objectives that read it)
Slo = Callable[[Flags, Sequence[int]], dict[int, bool]]
# config, levels -> the floor per level, (tok/s, bound), as run_benchmark's results carry it
Floors = Callable[[Flags, Sequence[int]], dict[int, tuple[float, str]]]


@dataclass(frozen=True)
class Noise:
    level: float = 0.015  # per benchmark point, relative (one sigma)
    screen: float = 0.025  # per point of a screen: fewer requests, more noise
    launch: float = 0.005  # per launch: two launches of one config differ a little


def sim_truth(
    max_tokens: int = 512, input_len: int = 512, base: Sequence[str] | None = None
) -> Truth:
    """The simulator's modelled throughput on `base` (default: the lab's base flags); a config
    it refuses or that fails to start crashes."""
    from sim.flags import FlagError
    from sim.space import DEFAULT_BASE_FLAGS
    from sim.truth import model_of, throughput_of

    argv = list(DEFAULT_BASE_FLAGS if base is None else base)

    def truth(config: Flags, levels: Sequence[int]) -> dict[int, float] | str:
        try:
            model = model_of(config, argv)
        except FlagError as err:
            return f"refused: {err}"
        if model.failure is not None:
            return f"failed to start: {model.failure.message}"
        return throughput_of(model, list(levels), input_len, max_tokens)

    return truth


def sim_floors(
    max_tokens: int = 512, input_len: int = 512, base: Sequence[str] | None = None
) -> Floors:
    """The floor of each level as the agent computes it from the simulator's /server_info
    physics (tools/domain/physics.py floor_of): what the results of a sweep of it carry; {}
    where the profile states no physics or the flags are refused."""
    from sim.flags import FlagError
    from sim.space import DEFAULT_BASE_FLAGS
    from sim.truth import model_of
    from tools.domain.physics import floor_of, physics_from_json

    argv = list(DEFAULT_BASE_FLAGS if base is None else base)

    def floors(config: Flags, levels: Sequence[int]) -> dict[int, tuple[float, str]]:
        try:
            physics = physics_from_json(model_of(config, argv).physics)
        except FlagError:
            return {}
        if physics is None:
            return {}
        out = {}
        for c in levels:
            floor = floor_of(physics, c, input_len, max_tokens)
            out[c] = (floor.batch_tok_s, str(floor.bound))
        return out

    return floors


def sim_slo(
    ttft_ms: float | None,
    tpot_ms: float | None,
    max_tokens: int = 512,
    input_len: int = 512,
    base: Sequence[str] | None = None,
) -> Slo:
    """Whether each level meets p99 TTFT/TPOT limits, the modelled latencies standing in for the
    p99s (as tools/domain/lab_truth.py scores them), judged by tools.domain.stats.slo_met."""
    from types import SimpleNamespace

    from sim.flags import FlagError
    from sim.space import DEFAULT_BASE_FLAGS
    from sim.truth import latency, model_of
    from tools.domain import stats

    argv = list(DEFAULT_BASE_FLAGS if base is None else base)
    limits = SimpleNamespace(ttft_p99_ms=ttft_ms, tpot_p99_ms=tpot_ms)

    def slo(config: Flags, levels: Sequence[int]) -> dict[int, bool]:
        try:
            model = model_of(config, argv)
        except FlagError:
            return {c: False for c in levels}
        out = {}
        for c in levels:
            lat = latency(model, c, input_len, max_tokens)
            point = {"p99_ttft_ms": lat["ttft_ms"], "p99_tpot_ms": lat["tpot_ms"]}
            out[c] = stats.slo_met(point, limits)
        return out

    return slo


def simulate(
    planner: Planner | AskTell,
    truth: Truth,
    seed: int = 0,
    noise: Noise = Noise(),
    max_steps: int = 1000,
    slo: Slo | None = None,
    drift: Callable[[int], float] | None = None,
    floors: Floors | None = None,
) -> tuple[History, Finish]:
    """Run the planner to its conclusion on one box, asked and told through AskTell; the History
    says what it cost. With `floors`, each sweep carries the floor of its levels (the stop signal
    against physics reads them: physics_stop.py)."""
    rng = random.Random(seed)
    search = planner if isinstance(planner, AskTell) else AskTell(planner)
    levels = search.planner.settings.levels
    offsets: dict[int, float] = {}
    for _ in range(max_steps):
        step = search.suggest()
        if isinstance(step, Finish):
            return search.history, step
        if search.needs_launch(step):
            outcome = truth(step.config, levels)
            if isinstance(outcome, str):
                search.tell(step, NotStarted(outcome))
                continue
            offsets[search.tell(step, Started())] = rng.gauss(0, noise.launch)
        launch = search.history.running  # the server up now, told measured next
        assert launch is not None
        if step.purpose == "duet":
            _duet(search, step, truth, rng, noise, offsets)
            continue
        sigma = noise.level if step.full else noise.screen
        exact = truth(step.config, step.levels)
        assert not isinstance(exact, str)
        speed = 1.0 if drift is None else drift(len(search.history.measurements))
        per = {c: v * speed * (1 + offsets[launch] + rng.gauss(0, sigma)) for c, v in exact.items()}
        ok = slo(step.config, step.levels) if slo is not None else None
        floor = floors(step.config, step.levels) if floors is not None else {}
        search.tell(step, Measured((Sweep(per, ok, floors=floor),)))
    raise RuntimeError(f"the planner did not finish within {max_steps} steps")


def _duet(
    search: AskTell,
    step: Experiment,
    truth: Truth,
    rng: random.Random,
    noise: Noise,
    offsets: dict[int, float],
) -> None:
    """The baseline beside the winner's server, then rounds until they decide (or the most a
    duet takes): each block the truth x its launch x a level's noise (a duet's blocks are the
    length of a sweep's levels)."""
    h = search.history
    assert step.base is not None
    if h.side.launch is None:
        outcome = truth(step.base, step.levels)
        search.tell(step, Beside(outcome if isinstance(outcome, str) else ""))
        if h.side.launch is not None:
            offsets[h.side.launch] = rng.gauss(0, noise.launch)
        return
    side, launch = h.side.launch, h.running
    assert launch is not None
    exact_a, exact_b = truth(step.base, step.levels), truth(step.config, step.levels)
    assert not isinstance(exact_a, str) and not isinstance(exact_b, str)
    o = search.planner.settings.objective  # a round's ratio is the objective's, as the tool's
    rounds: list[DuetRound] = []
    while len(rounds) < stats.MAX_PAIRS:
        a = {c: v * (1 + offsets[side] + rng.gauss(0, noise.level)) for c, v in exact_a.items()}
        b = {c: v * (1 + offsets[launch] + rng.gauss(0, noise.level)) for c, v in exact_b.items()}
        rounds.append(round_of(a, b, partial(o.value, levels=step.levels)))
        if settled(paired_of(rounds, stats.MAX_PAIRS, by_level=by_level(o.kind))):
            break
    search.tell(step, Dueted(tuple((r.a, r.b) for r in rounds), stats.MAX_PAIRS))


def score(value: float, baseline: float, optimum: float) -> float:
    """The fraction of the achievable gain reached: (found - f0) / (f* - f0)."""
    return (value - baseline) / (optimum - baseline) if optimum > baseline else 1.0


def summary(h: History, finish: Finish) -> Mapping[str, Any]:
    return {
        "launches": h.launches_used(),
        "crashes": sum(1 for launch in h.launches if not launch.ok),
        "benchmarks": len(h.measurements),
        "points": sum(len(m.per_level) for m in h.measurements),
        "best": finish.best,
        "crossover": finish.crossover,
    }
