"""The purposes are one registry (agent/brains/autopilot/purposes.py, issue 45): every purpose the
planner can give an experiment has its entry, and no other module lists purposes of its own - a
tuple, list, set or dict of purposes, or a regex alternation of them - so a new stage's purpose
is one entry there (docs/architecture.md: a planner stage in four files)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import get_args

from agent.brains.autopilot import steps, todo_plan
from agent.brains.autopilot.purposes import KINDS, PURPOSES, Purpose, Todo
from agent.report.measured import autopilot_label, human_label

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "agent" / "brains" / "autopilot" / "purposes.py"
TREE = [
    path
    for top in ("agent", "tools", "state", "sim", "benchmarks")
    for path in sorted((ROOT / top).rglob("*.py"))
    if path != REGISTRY
]


def emitted(source: str) -> list[str]:
    """The purposes written as words where an Experiment is built (its third argument or
    `purpose=`)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "Experiment"):
            continue
        args = [*node.args[2:3], *(k.value for k in node.keywords if k.arg == "purpose")]
        found += [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return found


def lists_of_purposes(source: str) -> list[tuple[int, list[str]]]:
    """(line, words) for each collection made of two purposes or more (a tuple, list or set, a
    dict's keys) and each string that alternates two or more (`screen|confirm`)."""
    found: list[tuple[int, list[str]]] = []
    for node in ast.walk(ast.parse(source)):
        items: list[ast.expr] = []
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        words = [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
        if len(words) >= 2 and all(w in PURPOSES for w in words) and isinstance(node, ast.expr):
            found.append((node.lineno, words))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "|" in node.value:
            alternated = [w for w in re.split(r"[|()^$]", node.value) if w in PURPOSES]
            if len(alternated) >= 2:
                found.append((node.lineno, alternated))
    return found


def test_the_registry_has_every_purpose_once() -> None:
    assert tuple(KINDS) == get_args(Purpose)
    assert set(get_args(Todo)) <= set(todo_plan.ORDER)


def test_every_purpose_the_planner_builds_is_registered() -> None:
    """mypy holds Experiment.purpose to the Literal; the words the tree writes are registered."""
    words = {w for path in TREE for w in emitted(path.read_text())}
    assert words and words <= set(KINDS)


def test_no_module_but_the_registry_lists_purposes() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {words}"
        for path in TREE
        for line, words in lists_of_purposes(path.read_text())
    ]
    assert not offenders, "read purposes.KINDS (or a group of steps.py):\n" + "\n".join(offenders)


def test_the_scan_finds_a_planted_list() -> None:
    code = (
        "A = ('validate', 'pair', 'duet')\n"
        "B = {'screen': 'explore', 'confirm': 'explore'}\n"
        "C = re.compile(r'^(baseline|noise)-L\\d+')\n"
        "fine = ('cleanup', 'baseline', 'noise', 'report')\n"  # todo items, not purposes
        "also = step.purpose in (*FIRST, 'screen')\n"
    )
    assert [line for line, _ in lists_of_purposes(code)] == [1, 2, 3]
    assert emitted("Experiment(c, levels, 'screen', why)\nExperiment(purpose='x')") == [
        "screen",
        "x",
    ]


def test_the_groups_are_the_registrys() -> None:
    """Each purpose in exactly one of the batch planner's groups, as before the registry."""
    assert steps.FIRST == ("baseline", "noise")
    assert steps.SERIAL == ("validate", "pair", "duet")
    assert steps.PARTIAL == ("screen", "challenger", "surrogate", "bundle", "contrary")
    assert steps.MOVES_BEST == ("confirm", "repeat")
    assert steps.CROSS == ("cross",)
    groups = (steps.FIRST, steps.SERIAL, steps.PARTIAL, steps.MOVES_BEST, steps.CROSS)
    assert sorted(p for g in groups for p in g) == sorted(PURPOSES)
    assert todo_plan.SCREENS == ("screen", "surrogate", "bundle", "contrary")


def test_a_label_is_read_by_the_registry() -> None:
    for purpose in PURPOSES:
        assert autopilot_label(f"{purpose}-L03-fa3") == (purpose, "fa3")
        assert autopilot_label(f"{purpose}-L03") == (purpose, None)
    assert autopilot_label("screening-L03-fa3") is None  # not a purpose's word
    assert autopilot_label("screen-fa3") is None  # no launch
    assert autopilot_label("my-own-run") is None
    assert human_label("noise-L01") == "baseline repeat"
    assert human_label("validate-L14-fa3") == "candidate: fa3"
    assert human_label("contrary-L20-a, b") == "screened: a, b"
    assert autopilot_label("cross-P03-L21-fa3") == ("cross", "fa3")  # a crossover's half
    assert human_label("cross-P03-L21") == "crossover"
    assert human_label("my-own-run") == "my-own-run"
