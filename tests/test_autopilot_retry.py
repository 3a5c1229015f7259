"""A start failure blamed on the context is retried from a base without it before the move is
banned (issue 26.2): on the single-level space torch.compile's small win makes EAGLE-3 run out of
memory; the move is launched again from the best base without torch.compile, and found."""

from __future__ import annotations

from agent.brains.autopilot import retry
from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.history import History, Objective
from agent.brains.autopilot.offline import Noise, sim_truth, simulate
from agent.brains.autopilot.planner import Experiment, Planner, Settings
from sim.space import load_lab
from tools.domain.space import Flags, SearchSpace

LAB = load_lab("single-level")
SPACE = SearchSpace.parse(
    LAB.space, check=engine_check("sim", "python -m sim " + " ".join(LAB.base))
)
LEVELS = tuple(LAB.levels)
BASE = SPACE.baseline
C1 = Objective("level", 1)
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB"
FA3 = {**BASE, "--attention-backend": "fa3"}
COMPILED = {**FA3, "--enable-torch-compile": True}
EAGLE = {
    "--speculative-algorithm": "EAGLE3",
    "--speculative-num-steps": 1,
    "--speculative-eagle-topk": 1,
    "--speculative-num-draft-tokens": 2,
}


def planner() -> Planner:
    return Planner(SPACE, Settings(levels=LEVELS, objective=C1))


def swept(h: History, config: Flags, value: float, times: int = 1) -> None:
    for _ in range(times):
        h.launched(config)
        h.measured(config, len(h.launches) - 1, {c: value for c in LEVELS}, "confirm")


def test_a_move_that_crashed_from_the_best_is_retried_from_a_base_without_the_context() -> None:
    h = History(SPACE)
    swept(h, BASE, 80.0, times=2)
    swept(h, FA3, 95.0)
    swept(h, COMPILED, 97.0)  # the best carries torch.compile
    h.launched({**COMPILED, **EAGLE}, ok=False, reason=OOM)
    r = planner().read(h)
    assert r.incumbent == COMPILED
    step = retry.crashed_move(r, COMPILED)
    assert isinstance(step, Experiment) and step.purpose == "screen"
    assert step.config == {**FA3, **EAGLE}  # the best base that lacks the suspected flag
    assert "--enable-torch-compile" in step.why and "failed to start" in step.why
    # a second crash of the move bans it: no third launch
    h.launched(step.config, ok=False, reason=OOM)
    assert retry.crashed_move(planner().read(h), COMPILED) is None


def test_the_flags_a_failure_names_are_all_taken_away() -> None:
    h = History(SPACE)
    swept(h, BASE, 80.0, times=2)
    graphs = {**FA3, "--cuda-graph-max-bs": 256}
    swept(h, FA3, 95.0)
    swept(h, graphs, 96.0)
    why = "Capture cuda graph failed with --cuda-graph-max-bs 256: CUDA out of memory"
    h.launched({**graphs, "--enable-torch-compile": True}, ok=False, reason=why)
    step = retry.crashed_move(planner().read(h), graphs)
    assert isinstance(step, Experiment)
    assert step.config == COMPILED  # named: cgmb 256 is taken away, fa3 kept


def test_a_move_that_crashes_from_the_baseline_is_not_retried() -> None:
    h = History(SPACE)
    swept(h, BASE, 80.0, times=2)
    h.launched({**BASE, **EAGLE}, ok=False, reason=OOM)
    assert retry.crashed_move(planner().read(h), BASE) is None


def test_on_the_single_level_space_the_crashed_move_is_found() -> None:
    """Offline, seeded: the move that ran out of memory beside torch.compile is launched again
    without it, and the campaign deploys EAGLE-3 (the optimum's family), not torch.compile."""
    truth = sim_truth(max_tokens=128, base=LAB.base)
    for seed in (0, 1):
        h, finish = simulate(planner(), truth, seed=seed, noise=Noise(0.02, 0.03, 0.005))
        launches = [launch for launch in h.launches]
        crashed = [
            i
            for i, launch in enumerate(launches)
            if not launch.ok and launch.config.get("--speculative-algorithm") == "EAGLE3"
        ]
        assert crashed, "the single-level space makes the move crash in context"
        later = [
            launch
            for launch in launches[crashed[0] + 1 :]
            if launch.config.get("--speculative-algorithm") == "EAGLE3"
            and launch.config.get("--enable-torch-compile") is False
        ]
        assert later and later[0].ok, seed
        assert finish.best is not None and finish.best["--speculative-algorithm"] == "EAGLE3"
