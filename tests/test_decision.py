"""One decision (issue 45): the verdict is computed by tools/domain/decision.decide and nowhere
else; the autopilot's conclusion, recommend and the report's figures call it."""

from __future__ import annotations

import ast
from pathlib import Path

from tools.domain import stats
from tools.domain.decision import decide

ROOT = Path(__file__).resolve().parent.parent
DECIDERS = ("agent/brains/autopilot/conclude.py", "tools/recommend.py", "agent/report/figures.py")


def test_each_way_a_verdict_is_reached() -> None:
    moved = stats.drift([{1: 100.0}, {1: 130.0}])  # the baseline itself moved 30 %
    assert moved is not None
    assert decide(1.5, 0.02, is_baseline=True).verdict == "baseline"
    assert decide(None, 0.02).verdict == "not comparable"
    assert decide(1.5, None).verdict == "noise floor unknown"
    assert decide(1.01, 0.02).verdict == "within noise"
    assert decide(0.9, 0.02).verdict == "below the baseline"
    won = decide(1.5, 0.02)
    assert won.verdict == "win" and won.unpaired and won.withheld is None
    # pairs that do not establish the win withhold it, whatever the means say
    weak = stats.Paired((1.5, 0.9))
    assert decide(1.5, 0.02, weak).verdict == "not established"
    assert decide(1.5, 0.02, weak).withheld == "pairs"
    strong = stats.Paired((1.30, 1.31, 1.29, 1.30))
    assert decide(1.5, 0.02, strong).verdict == "win" and not decide(1.5, 0.02, strong).unpaired
    # no pair, and a drift of the baseline as large as the gain: withheld; a larger gain stands
    assert decide(1.25, 0.02, None, moved).withheld == "drift"
    assert decide(1.6, 0.02, None, moved).verdict == "win"
    assert decide(1.25, 0.02, stats.Paired(()), moved).withheld == "drift"  # empty = no pairs
    # pairs, not the drift, decide when there are pairs - and not the means either: sweeps
    # minutes apart on a box that moved can hide a gain the pairs (or a duet's rounds) establish
    assert decide(1.25, 0.02, strong, moved).verdict == "win"
    assert decide(1.01, 0.02, strong).verdict == "win"
    assert decide(1.01, 0.02, weak).verdict == "within noise"  # no claim either way


def _calls(tree: ast.AST, name: str) -> int:
    found = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            found += called == name
    return found


def test_no_module_outside_the_decision_applies_the_verdict_rules() -> None:
    """`Drift.explains` and a `Versus` built to read its verdict are the rules a verdict is
    made of: only the statistics and the decision call them. Each of the three readers that
    once decided for themselves calls `decide` instead."""
    allowed = {"tools/domain/stats.py", "tools/domain/decision.py"}
    offenders = []
    for path in sorted(
        p for top in ("agent", "tools", "state", "sim") for p in (ROOT / top).rglob("*.py")
    ):
        rel = path.relative_to(ROOT).as_posix()
        if rel in allowed:
            continue
        tree = ast.parse(path.read_text())
        if _calls(tree, "explains") or _calls(tree, "Versus"):
            offenders.append(rel)
    assert offenders == []
    for rel in DECIDERS:
        assert _calls(ast.parse((ROOT / rel).read_text()), "decide") >= 1, rel
