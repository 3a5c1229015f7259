"""One writer of the planner's History (issue 30): only agent/brains/autopilot/history.py changes
a History's launches, measurements, broken launches, experiments in flight or running server.
Everyone else - the one-box brain's observe, the fleet controller, the batch planner, the offline
study, benchmarks and tests - records through its methods (launched, measured, measured_more,
broke, started, ended, serving_nothing, copy), so each rule of recording is written once."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WRITER = ROOT / "agent" / "brains" / "autopilot" / "history.py"
FIELDS = {"launches", "measurements", "broken", "in_flight"}
MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "setdefault", "update"}


def writes(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each write to a History field: a mutating call on one of its containers,
    or an assignment to a field or to an item of one (`running` only by assignment: other
    objects have a `running` set)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if (
                node.func.attr in MUTATORS
                and isinstance(owner, ast.Attribute)
                and owner.attr in FIELDS
            ):
                found.append((node.lineno, f".{owner.attr}.{node.func.attr}()"))
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            inner = target.value if isinstance(target, ast.Subscript) else target
            if isinstance(inner, ast.Attribute) and inner.attr in {*FIELDS, "running"}:
                if isinstance(inner.value, ast.Name) and inner.value.id == "self":
                    continue  # an object's own field (the History's are in history.py)
                found.append((node.lineno, f"assignment to .{inner.attr}"))
    return found


def test_only_history_py_writes_a_history() -> None:
    offenders = []
    for folder in ("agent", "tools", "state", "sim", "benchmarks", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == WRITER:
                continue
            for line, what in writes(ast.parse(path.read_text(), str(path))):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not offenders, "write a History through its methods:\n" + "\n".join(offenders)


def test_the_check_sees_a_direct_write() -> None:
    """The scan is not vacuous: each kind of write it forbids is found."""
    code = (
        "h.launches.append(x)\n"
        "h.measurements[-1] = m\n"
        "h.broken.setdefault(0, 'why')\n"
        "h.running = None\n"
        "self.running = None\n"
        "h.in_flight.append(e)\n"
    )
    assert sorted(line for line, _ in writes(ast.parse(code))) == [1, 2, 3, 4, 6]
