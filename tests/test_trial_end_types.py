"""How a fleet trial ended is a type (issue 30.2): tools/fleet/trial.TrialEnd, carried by the
outcome and its `trial_ended` event. No control flow in the fleet or the trial outcome reads it
from the words of a reason (`reason.startswith(...)`); the reason is for people."""

from __future__ import annotations

import ast
from pathlib import Path

from tools.trial_outcome import end_of, runs_again

ROOT = Path(__file__).resolve().parent.parent
FLEET = [
    *sorted((ROOT / "agent" / "fleet").glob("*.py")),
    *sorted((ROOT / "tools" / "fleet").glob("*.py")),
    ROOT / "tools" / "trial_outcome.py",
    ROOT / "tools" / "run_trial.py",
    ROOT / "state" / "fleet.py",
    ROOT / "agent" / "view" / "fleet.py",
]


def reason_tests(source: str) -> list[int]:
    """Lines where a string test (startswith, endswith, `in`) is made on something named reason."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith")
            and "reason" in ast.unparse(node.func.value)
        ):
            found.append(node.lineno)
        if (
            isinstance(node, ast.Compare)
            and any(isinstance(o, ast.In) for o in node.ops)
            and any("reason" in ast.unparse(c) for c in node.comparators)
        ):
            found.append(node.lineno)
    return found


def test_no_fleet_module_decides_from_a_reason_s_words() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in FLEET
        for line in reason_tests(path.read_text())
    ]
    assert not offenders, "decide from the outcome's end, not its reason: " + ", ".join(offenders)


def test_the_scan_finds_a_reason_test() -> None:
    code = "if out.reason.startswith('lost'): pass\nok = 'x' in reason\nfine = end == 'lost'\n"
    assert reason_tests(code) == [1, 2]


def test_only_a_lost_trial_runs_again_within_its_retries() -> None:
    assert runs_again("lost", attempt=1, retries=1)
    assert not runs_again("lost", attempt=2, retries=1)
    for end in ("measured", "not_started", "failed", "interrupted"):
        assert not runs_again(end, attempt=1, retries=3)  # type: ignore[arg-type]


def test_an_event_s_end_is_read_and_an_old_log_s_is_inferred_without_its_words() -> None:
    assert end_of({"ok": False, "end": "not_started", "reason": "anything"}) == "not_started"
    # before the field: ok or not, whatever the reason says
    assert end_of({"ok": True}) == "measured"
    assert end_of({"ok": False, "reason": "lost on its node (WorkerCrashedError)"}) == "failed"
    assert end_of({"ok": False, "interrupted": True}) == "interrupted"
    assert end_of({"ok": False, "end": "bogus"}) == "failed"


def test_the_scan_reads_the_fleet_s_modules_where_they_are() -> None:
    """A module moved away is no longer scanned, silently (agent/fleet_*.py became agent/fleet/):
    every path listed exists, and the controller and run_trial's modules are among them."""
    assert all(path.is_file() for path in FLEET)
    assert ROOT / "agent" / "fleet" / "controller.py" in FLEET
    assert ROOT / "agent" / "fleet" / "model.py" in FLEET
