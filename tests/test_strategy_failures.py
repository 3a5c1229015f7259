"""Failures learned in context: a start failure is put down to the smallest set of flags that
explains it (retried once on another base before it is banned everywhere), the reason is kept and
reported; identical launch failures that no flag explains end the campaign instead of repeating."""

from __future__ import annotations

from collections.abc import Sequence

from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.history import History, Objective
from agent.brains.autopilot.narrate import conclusion
from agent.brains.autopilot.observe import start_failure
from agent.brains.autopilot.offline import sim_truth, simulate
from agent.brains.autopilot.planner import Finish, Planner, Settings
from agent.brains.autopilot.reading import Reading
from sim.space import load_lab
from tools.domain.space import Flags, SearchSpace

LAB = load_lab("llamacpp-cpu")
SPACE = SearchSpace.parse(
    LAB.space, check=engine_check("sim", "python -m sim " + " ".join(LAB.base))
)
LEVELS = tuple(LAB.levels)
BASE = SPACE.baseline
WHY = "llama_init_from_model: V cache quantization requires flash_attn"


def planner() -> Planner:
    return Planner(SPACE, Settings(levels=LEVELS, objective=Objective()))


def history(*steps: tuple[Flags, bool]) -> History:
    """Launches in order (ok or crashed); every one that started is swept once."""
    h = History(SPACE)
    for config, ok in steps:
        h.launched(config, ok=ok, reason="" if ok else WHY)
        if ok:
            per = {c: 10.0 for c in LEVELS}
            h.measured(config, len(h.launches) - 1, per, "confirm")
    return h


def test_one_crash_is_retried_once_on_another_base_then_banned_everywhere() -> None:
    p4 = {**BASE, "--parallel": 4}
    p8 = {**BASE, "--parallel": 8}
    q4 = {"--cache-type-v": "q4_0"}
    r = Reading(
        SPACE, planner().settings, history((BASE, True), (p4, True), ({**BASE, **q4}, False))
    )
    assert r.crash_reason(p4, {**p4, **q4}) is None, "one retry on a base that differs"
    r = Reading(
        SPACE,
        planner().settings,
        history((BASE, True), (p4, True), ({**BASE, **q4}, False), ({**p4, **q4}, False)),
    )
    assert r.crash_reason(p8, {**p8, **q4}) == WHY, "two crashes and no start: banned"


def test_a_start_elsewhere_puts_the_blame_on_the_partner_flag() -> None:
    fa = {**BASE, "--flash-attn": "on"}
    q4 = {"--cache-type-v": "q4_0"}
    h = history((BASE, True), ({**BASE, **q4}, False), (fa, True), ({**fa, **q4}, True))
    r = Reading(SPACE, planner().settings, h)
    p4 = {**BASE, "--parallel": 4}
    p4_fa = {**p4, "--flash-attn": "on"}
    assert r.crash_reason(p4, {**p4, **q4}) == WHY, "flash attention off: still fails"
    assert r.crash_reason(p4_fa, {**p4_fa, **q4}) is None, "flash attention on: it starts"
    learned = r.learned_failures()
    assert learned == [f"fails to start with --flash-attn off, --cache-type-v q4_0: {WHY}"]
    finish = planner().finish(h)
    assert isinstance(finish, Finish)
    text = conclusion(SPACE, finish, h, planner())
    assert "Learned: fails to start with --flash-attn off, --cache-type-v q4_0" in text


def test_the_campaign_finds_the_quantized_cache_once_flash_attention_is_on() -> None:
    """On the CPU box the q4_0 V cache fails without flash attention; the campaign still deploys a
    configuration within 2 % of the optimum, which has q4_0 with flash attention on."""
    truth = sim_truth(max_tokens=128, base=LAB.base)
    _, finish = simulate(planner(), truth, seed=0)
    assert finish.best is not None and finish.best["--flash-attn"] == "on"
    assert finish.best["--cache-type-v"] != "f16"


def test_identical_launch_failures_end_the_campaign() -> None:
    """A broken command fails every launch the same way: after three failures that no flag
    explains, the autopilot concludes on what it measured instead of relaunching."""
    real = sim_truth(max_tokens=128, base=LAB.base)
    launches: list[Flags] = []

    def broken_after_baseline(config: Flags, levels: Sequence[int]) -> dict[int, float] | str:
        launches.append(config)
        if SPACE.key(config) != SPACE.key(BASE):
            return "bash: ./llama-server: Permission denied"
        return real(config, levels)

    h, finish = simulate(planner(), broken_after_baseline, seed=0)
    failed = [launch for launch in h.launches if not launch.ok]
    assert len(failed) == 3
    assert "stopped: the last 3 launches failed with the same error" in finish.why
    assert "Permission denied" in finish.why and finish.best == BASE


def test_a_repeated_failure_a_flag_explains_does_not_stop_the_search() -> None:
    """Three failures with one message, all carrying --cache-type-v q4_0: a flag explains them."""
    q4 = {"--cache-type-v": "q4_0"}
    h = history(
        (BASE, True),
        ({**BASE, **q4}, False),
        ({**BASE, "--parallel": 2, **q4}, False),
        ({**BASE, "--threads": 16, **q4}, False),
    )
    h.measured(BASE, 0, {c: 10.1 for c in LEVELS}, "noise")
    step = planner().next_step(h)
    assert not (isinstance(step, Finish) and "stopped" in step.why)


def test_a_failed_starts_reason_is_its_diagnosis_whatever_the_seconds() -> None:
    """The same broken command read from start_server's results on a real box (0.4 s, then 0.6 s
    to fail): one reason, so the rule above can see three identical failures; and no "server
    server" in what the autopilot says."""
    why = "bash: ./llama-server: Permission denied"
    blocks = [
        {
            "content": f"server server failed to start after {s} s: {why}\nlog x; the lines:",
            "is_error": True,
            "data": {"name": "server", "diagnosis": why, "seconds": float(s)},
        }
        for s in ("0.4", "0.6", "12.0")
    ]
    assert {start_failure(b) for b in blocks} == {why}
