"""An experiment's purpose and the pipeline's next action are types (issue 30.2):
purposes.Purpose (steps.Experiment.purpose, Measurement.purpose, the groups FIRST, SERIAL, PARTIAL,
MOVES_BEST) and pipeline.Action (Where.action). mypy (strict_equality) rejects `== "word"` outside
the Literal; this test parses the modules that read purposes and actions and rejects the rest: a
word outside the Literal tested with `in`, a purpose read from a label's words."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

from agent.brains.autopilot.history import Measurement
from agent.brains.autopilot.pipeline import Action
from agent.brains.autopilot.purposes import PURPOSES, purpose_of

ROOT = Path(__file__).resolve().parent.parent
READERS = [  # every module that tells purposes or pipeline actions apart
    *sorted((ROOT / "agent" / "brains" / "autopilot").glob("*.py")),
    *sorted((ROOT / "agent" / "fleet").glob("*.py")),
    *sorted((ROOT / "benchmarks").glob("*.py")),
    ROOT / "agent" / "view" / "fleet.py",
    ROOT / "agent" / "report" / "measured.py",
    ROOT / "state" / "fleet.py",
]
KINDS = {"purpose": set(PURPOSES), "action": set(get_args(Action))}


def words(node: ast.expr) -> list[str]:
    """The string constants an operand holds: itself, or the items of a tuple, list or set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [w for item in node.elts for w in words(item)]
    return []


def kind_of(node: ast.expr) -> str | None:
    """`x.purpose` or `purpose`, `x.action`: the kind it reads (not `request.purpose`, a brain's
    TurnRequest: step or summary, a Literal of agent/brains/base.py)."""
    if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "request":
        return None
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
    return name if name in KINDS else None


def strays(source: str) -> list[tuple[int, str]]:
    """(line, word) for each word outside its Literal compared to a purpose or an action, and for
    each label tested for a purpose's word (`label.startswith("screen")`: read m.purpose)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, operand in enumerate(operands):
                kind = kind_of(operand)
                if kind is None:
                    continue
                for other in operands[:i] + operands[i + 1 :]:
                    found += [(node.lineno, w) for w in words(other) if w not in KINDS[kind]]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "startswith"
            and "label" in ast.unparse(node.func.value)
        ):
            found += [(node.lineno, w) for a in node.args for w in words(a) if w in PURPOSES]
    return found


def test_no_purpose_or_action_is_compared_to_a_word_outside_its_literal() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {word!r}"
        for path in READERS
        for line, word in strays(path.read_text())
    ]
    assert not offenders, "compare with a member of Purpose or Action:\n" + "\n".join(offenders)


def test_the_scan_finds_a_stray_word() -> None:
    code = (
        "a = step.purpose == 'confrim'\n"
        "b = m.purpose in ('screen', 'screens')\n"
        "c = 'polling' != at.action\n"
        "d = m.label.startswith('surrogate')\n"
        "fine = step.purpose in (*FIRST, 'screen') and at.action == 'poll'\n"
    )
    assert strays(code) == [(1, "confrim"), (2, "screens"), (3, "polling"), (4, "surrogate")]


def test_a_label_of_no_purpose_has_none() -> None:
    assert Measurement({}, 0, {}, "confirm-L04-fa3").purpose == "confirm"
    assert Measurement({}, 0, {}, "my-own-run").purpose is None
    assert purpose_of("baseline") == "baseline" and purpose_of("") is None


def test_the_scan_reads_the_readers_where_they_are() -> None:
    """A module moved away is no longer scanned, silently (agent/fleet_*.py became agent/fleet/):
    every path listed exists, and the fleet's controller is among them."""
    assert all(path.is_file() for path in READERS)
    assert ROOT / "agent" / "fleet" / "controller.py" in READERS
