"""An SLO objective from the goal's words (tools/domain/goal_slo.py): the limits it names, the
objective it asks for, and a config that set its own objective keeping it."""

from __future__ import annotations

from tools.domain.config import Config, lab_config
from tools.domain.goal_slo import goal_limits, goal_objective, with_goal_slo


def test_the_usual_words_give_limits_in_ms() -> None:
    assert goal_limits("beat baseline") == {}
    assert goal_limits("highest throughput with p99 TTFT under 200 ms") == {"ttft": 200.0}
    assert goal_limits("keep TPOT below 50ms and TTFT < 1.5 s") == {"ttft": 1500.0, "tpot": 50.0}
    assert goal_limits("time to first token under 250 milliseconds") == {"ttft": 250.0}
    assert goal_limits("e2e latency within 5 s") == {"e2el": 5000.0}


def test_the_objective_is_slo_or_max_load() -> None:
    assert goal_objective("beat baseline") is None
    assert goal_objective("e2e latency within 5 s") is None  # goodput only: no objective limit
    assert goal_objective("best tok/s with TTFT under 200 ms") == {
        "kind": "slo",
        "ttft_p99_ms": 200.0,
        "tpot_p99_ms": None,
    }
    load = goal_objective("find the max load that keeps TPOT p99 at most 40 ms")
    assert load == {"kind": "max_load", "ttft_p99_ms": None, "tpot_p99_ms": 40.0}


def test_a_config_gets_the_goals_slo_unless_it_set_its_own() -> None:
    config = with_goal_slo(lab_config(), "beat baseline with p99 TTFT under 300 ms")
    assert config.objective.kind == "slo" and config.objective.ttft_p99_ms == 300.0
    assert config.bench.slo == {"ttft_ms": 300.0}  # every result then carries goodput
    assert with_goal_slo(lab_config(), "beat baseline") == lab_config()
    own = Config.model_validate(
        {
            **lab_config().model_dump(),
            "objective": {"kind": "peak"},
            "bench": {"slo": {"tpot_ms": 9}},
        }
    )
    kept = with_goal_slo(own, "TTFT under 300 ms")
    assert kept.objective.kind == "peak" and kept.bench.slo == {"tpot_ms": 9.0}
