"""The fleet's proof as crossovers (issue 46): the winner and the baseline measured at the same
time on two boxes, then each on the other's box; each crossover's ratio the geometric mean of its
two periods' (stats.crossover_ratio), read by stats.Paired and decision.decide like launch pairs
and duets. On constructed data - a box 20 % slower than the other, a drift common to both - and
through the fleet controller (agent/fleet/controller.py) around a fake fleet whose second box
slows down once the proof begins; and the batched campaign on three boxes (batch.py), where the
proof runs beside other work."""

from __future__ import annotations

import asyncio
import json
import math
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent.brains.autopilot.ask_tell import AskTell, Measured, NotStarted, Sweep
from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.offline import sim_truth
from agent.brains.autopilot.planner import Experiment, Finish, Planner, Settings
from agent.fleet.controller import FleetCampaign
from agent.fleet.resume import experiment_of
from sim.space import DEFAULT_LEVELS, default_space
from tests.test_fleet_controller import FakeFleet, events, new_run, tiny_config, truth
from tools.bench.results import period_of
from tools.domain import lab_truth, stats
from tools.domain.decision import decide
from tools.domain.space import SearchSpace
from tools.fleet.ray_backend import Submitted
from tools.fleet.trial import TrialOutcome, TrialSpec

GAIN = 1.25  # the candidate's true throughput over the baseline's
SLOW = 0.8  # the second box's speed against the first's


def period(a_box: float, b_box: float, drift: float = 1.0) -> float:
    """One period's ratio: the baseline (100) on a box of speed a_box and the candidate
    (100 x GAIN) on one of speed b_box, at the same time, both under `drift`."""
    return (100 * GAIN * b_box * drift) / (100 * a_box * drift)


def test_a_box_effect_cancels_in_a_crossover_where_one_box_pair_would_be_20_percent_off() -> None:
    first = period(1.0, SLOW)  # the baseline on box 1, the candidate on box 2
    second = period(SLOW, 1.0)  # swapped
    assert math.isclose(first, GAIN * SLOW) and abs(first / GAIN - 1) >= 0.2 - 1e-9
    assert abs(second / GAIN - 1) >= 0.2  # each period alone measures the boxes too
    assert math.isclose(stats.crossover_ratio(first, second), GAIN)
    # not swapped, the same two boxes twice: the box effect stays in
    assert math.isclose(stats.crossover_ratio(first, period(1.0, SLOW)), GAIN * SLOW)


def test_a_drift_common_to_both_boxes_cancels_and_periods_pair_in_order() -> None:
    periods = [period(1.0, SLOW, 1.0), period(SLOW, 1.0, 0.7), period(1.0, SLOW, 0.5)]
    assert stats.crossovers(periods) == (stats.crossover_ratio(periods[0], periods[1]),)
    assert math.isclose(stats.crossovers(periods)[0], GAIN)  # the third waits for its swap
    rows = stats.crossover_blocks([(1.0, GAIN * SLOW), (GAIN / SLOW, 1.5), (9.0, 9.0)])
    assert len(rows) == 1 and math.isclose(rows[0][0], math.sqrt(GAIN / SLOW))
    assert stats.crossover_ratio(period(1.0, SLOW), 0.0) == 0.0  # a failed period fails it


def noisy(gain: float, n: int) -> tuple[float, ...]:
    """n crossovers of a candidate `gain` x the baseline, box 2 SLOW, a drift that halves the
    speed over the run, and a deterministic +-1 % noise on each period."""
    out = []
    for i in range(n):
        drift = 1.0 - 0.5 * i / n
        wobble = 1.01 if i % 2 else 0.99
        first = gain * SLOW * drift / drift * wobble
        second = gain / SLOW * (drift * 0.9) / (drift * 0.9) / wobble**0.5
        out.append(stats.crossover_ratio(first, second))
    return tuple(out)


def test_decide_reads_crossovers_as_it_reads_pairs() -> None:
    won = decide(1.3, 0.05, stats.Paired(noisy(GAIN, 4), unit="crossover"))
    assert won.verdict == "win" and won.paired is not None
    assert abs(won.paired.ratio / GAIN - 1) < 0.01
    assert "4 crossovers" in won.paired.stated()
    # the baseline against itself on the same slow box 2: no win, whatever the means say
    same = decide(1.3, 0.05, stats.Paired(noisy(1.0, 4), unit="crossover"))
    assert same.verdict == "not established" and same.withheld == "pairs"
    # the periods read alone, box 2 always the candidate's: a 20 % loss where there is a gain
    alone = stats.Paired(tuple(GAIN * SLOW * (1.01 if i % 2 else 0.99) for i in range(4)))
    assert decide(1.3, 0.05, alone).verdict == "not established"


class BoxFleet(FakeFleet):
    """Two boxes; a trial runs on the box it is pinned to, else on one no trial in flight has.
    From the first crossover period on, box 2 is SLOW (another tenant came), and from the third
    both boxes are 30 % slower (a drift common to both)."""

    def __init__(self) -> None:
        super().__init__()
        self.on: dict[str, str] = {}

    def submit(
        self, spec: TrialSpec, avoid: str | None = None, attempt: int = 1, pin: str | None = None
    ) -> None:
        super().submit(spec, avoid, attempt, pin)
        busy = {self.on.get(s.spec.trial_id) for s in self.pending}
        self.on[spec.trial_id] = pin or next((n for n in ("n1", "n2") if n not in busy), "n1")

    async def next_done(self) -> tuple[Submitted, TrialOutcome]:
        sub, out = await super().next_done()
        node = self.on[sub.spec.trial_id]
        k = period_of(sub.spec.trial_id) or 0
        speed = (SLOW if node == "n2" and k else 1.0) * (0.7 if k >= 3 else 1.0)
        points = [{**p, "output_throughput": p["output_throughput"] * speed} for p in out.points]
        return sub, replace(out, node=node, box=node.replace("n", "box"), points=points)


def test_the_fleet_proves_the_winner_in_crossovers_on_two_boxes_swapped(tmp_path: Path) -> None:
    run = new_run(tmp_path)
    fleet = BoxFleet()
    campaign = FleetCampaign(run, tiny_config(tmp_path), fleet)
    assert asyncio.run(campaign.drive()) == 0
    log = events(run.path)
    started = [e for e in log if e["type"] == "trial_started"]
    crossed = [e for e in started if e["purpose"] == "cross"]
    assert not [e for e in started if e["purpose"] in ("pair", "validate")]
    periods: dict[int, dict[bool, dict[str, Any]]] = {}
    base = {"--attention-backend": "flashinfer", "--speculative-algorithm": False}
    for e in crossed:
        periods.setdefault(e["period"], {})[e["flags"] == base] = e
    assert len(periods) >= 4 and all(len(p) == 2 for p in periods.values())
    for k, halves in periods.items():  # both halves placed in one round, on two boxes
        a, b = log.index(halves[True]), log.index(halves[False])
        assert abs(a - b) == 1, k
        assert fleet.on[halves[True]["trial"]] != fleet.on[halves[False]["trial"]]
    order = sorted(periods)
    for first, second in zip(order[::2], order[1::2], strict=False):  # the second swapped
        one, two = periods[first], periods[second]
        assert fleet.on[two[True]["trial"]] == fleet.on[one[False]["trial"]]
        assert fleet.on[two[False]["trial"]] == fleet.on[one[True]["trial"]]
        assert fleet.pins[two[True]["trial"]] == fleet.on[one[False]["trial"]]

    rec = json.loads((run.path / "recommendation.json").read_text())
    levels = [1, 8]
    gain = math.prod(truth(rec["config"], c) / truth(base, c) for c in levels) ** (1 / 2)
    assert gain > 1.3 and rec["paired"]["unit"] == "crossover"
    assert rec["paired"]["verdict"] == "win"
    assert math.isclose(rec["paired"]["ratio"], gain, rel_tol=1e-3)  # box 2 and the drift cancel
    # the same trials read as periods alone measure box 2 too: each 20 % off the truth
    measured = {e["label"]: e["summary"] for e in log if e["type"] == "benchmark"}
    for halves in periods.values():
        a, b = measured[halves[True]["trial"]], measured[halves[False]["trial"]]
        ratio = math.prod(float(b[str(c)]) / float(a[str(c)]) for c in levels) ** (1 / 2)
        assert abs(ratio / gain - 1) >= 0.2 - 1e-6
    # a resumed controller places a crossover's half again with its period, and reads from the
    # log where a crossover's first period ran: its second is swapped as it would have been
    assert experiment_of(crossed[0]).period == crossed[0]["period"]
    one, two = periods[order[0]], periods[order[1]]
    firsts = {one[True]["trial"], one[False]["trial"]}
    cut = max(i for i, x in enumerate(log) if x["type"] == "trial_ended" and x["trial"] in firsts)
    resumed = FleetCampaign(run, tiny_config(tmp_path), BoxFleet(), log[: cut + 1])
    assert resumed.swapped(experiment_of(two[True])) == fleet.on[one[False]["trial"]]
    assert resumed.swapped(experiment_of(two[False])) == fleet.on[one[True]["trial"]]
    assert (
        FleetCampaign(run, tiny_config(tmp_path), BoxFleet(), log[:cut]).swapped(
            experiment_of(two[True])
        )
        is None
    )  # the first period not whole yet: where Ray places it
    run.close()


def test_on_three_boxes_the_proof_runs_beside_other_work_and_establishes_the_best() -> None:
    """The batched campaign on three boxes against the simulator's truth (1.5 % noise, trials
    ending when their lab time is up): each crossover period's two halves start in one batch, one
    period in flight at a time, the challenger's re-validation never alone, and the conclusion
    established by its crossovers."""
    space = SearchSpace.parse(default_space(), check=engine_check("sim"))
    settings = Settings(levels=tuple(DEFAULT_LEVELS), crossover=True)
    search, truth, rng = AskTell(Planner(space, settings)), sim_truth(), random.Random(1)
    flight: list[tuple[float, Experiment]] = []
    now, batches, alone = 0.0, list[list[Experiment]](), 0
    for _ in range(500):
        steps = search.suggest_batch(3 - len(flight))
        if steps and isinstance(steps[0], Finish):
            break
        started = [s for s in steps if isinstance(s, Experiment)]
        batches += [started] if started else []
        for step in started:
            search.placed(step)
            flight.append((now + (25.0 if step.full else 9.0) * rng.uniform(0.9, 1.1), step))
        assert len({e.period for _, e in flight if e.period}) <= 1  # one period at a time
        if [e.purpose for _, e in flight] == ["validate"]:
            alone += 1
        flight.sort(key=lambda f: f[0])
        now, e = flight.pop(0)
        got = truth(e.config, e.levels)
        if isinstance(got, str):
            search.tell(e, NotStarted(got))
        else:
            noisy = {c: v * rng.gauss(1, 0.015) for c, v in got.items()}
            search.tell(e, Measured((Sweep(noisy),), e.label))
    finish = steps[0]
    assert isinstance(finish, Finish) and finish.best is not None
    assert finish.established and finish.paired is not None
    assert finish.paired.unit == "crossover" and finish.paired.n >= 2
    assert lab_truth.config_value(finish.best) >= 0.98 * lab_truth.optimum(default_space())[1]
    halves = [e for b in batches for e in b if e.purpose == "cross"]
    for b in batches:  # a period's halves in one batch: the baseline and what it is compared with
        crossed = [e for e in b if e.purpose == "cross"]
        assert len(crossed) in (0, 2) and len({e.period for e in crossed}) <= 1
        if crossed:
            assert crossed[0].config == crossed[1].base and crossed[1].config == crossed[0].base
    assert len({e.period for e in halves}) >= 4  # two crossovers at least
    assert any(e.purpose == "validate" for b in batches for e in b) and alone == 0
    assert search.history.launches_used() <= settings.max_launches
