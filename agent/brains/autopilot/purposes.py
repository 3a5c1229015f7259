"""What an experiment is for: every purpose the planner can give a launch or a measurement,
declared once, with what each reader needs to know of it.

A purpose is the first word of its measurement's label (`screen-L05-fa3`), so it also names what
a recorded run measured. Every reader derives from the table below: the planner's groups
(steps.FIRST, SERIAL, PARTIAL, MOVES_BEST: batch.py orders a fleet's experiments by them, a
partial one measures a few levels), the todo item it is measured under (todo_plan.py), the word
the report and the live view use (agent/report/measured.py), a fresh launch in the narration.
A new stage's purpose is one entry here; tests/test_purposes.py checks that no other module
lists purposes of its own and that the planner emits none that is not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Purpose = Literal[
    "baseline",
    "noise",
    "screen",
    "confirm",
    "challenger",
    "surrogate",
    "bundle",
    "contrary",
    "repeat",
    "validate",
    "pair",
    "duet",
    "cross",
]
PURPOSES: tuple[Purpose, ...] = get_args(Purpose)

# how a fleet's batch planner (batch.py) groups purposes: the baseline and its A/A sweep first
# (everything after them reads the noise floor); a partial measurement (a few levels, from the
# best); a full sweep that may move the best; the end stage, serial (the leader may change with
# each one, a pair's two launches one after the other, alone); a fleet's crossover halves, two
# boxes at once, beside other work
Group = Literal["first", "partial", "moves_best", "serial", "cross"]
# the todo item (todo_plan.ORDER) a purpose's measurements count for
Todo = Literal["baseline", "noise", "explore", "family", "validate"]


@dataclass(frozen=True)
class Kind:
    group: Group
    todo: Todo
    word: str  # the report's word for its measurements (agent/report/measured.py)
    # it may measure the objective's level alone, as a full sweep measures it (precision where
    # the objective reads: reading.Reading.samples)
    at_level: bool = False


KINDS: dict[Purpose, Kind] = {
    "baseline": Kind("first", "baseline", "baseline"),
    "noise": Kind("first", "noise", "baseline repeat", at_level=True),  # the A/A sweep
    "screen": Kind("partial", "explore", "screened"),  # a neighbour of the best, a few levels
    "confirm": Kind("moves_best", "explore", "candidate"),  # a promising screen's full sweep
    "challenger": Kind("partial", "family", "challenger"),  # a family tuned per level
    "surrogate": Kind("partial", "explore", "screened"),  # the additive model's screen
    "bundle": Kind("partial", "explore", "screened"),  # the changes within the noise together
    "contrary": Kind("partial", "explore", "screened"),  # the values that lost the most
    "repeat": Kind("moves_best", "explore", "repeat", at_level=True),  # a near-tie again
    "validate": Kind("serial", "validate", "candidate"),  # the winner on a fresh launch
    "pair": Kind("serial", "validate", "paired"),  # the baseline or the winner, alternately
    "duet": Kind("serial", "validate", "duet"),  # the winner, the baseline up beside it
    # the baseline or the winner in one period of a fleet's crossover, both halves at once on
    # two boxes (labelled cross-PNN-L..)
    "cross": Kind("cross", "validate", "crossover"),
}


def purpose_of(word: str) -> Purpose | None:
    """The purpose a label's first word (or a recorded event's `purpose`) names; None for a label
    that names none (a benchmark measured by hand)."""
    for purpose in PURPOSES:
        if word == purpose:
            return purpose
    return None


def of_group(group: Group) -> tuple[Purpose, ...]:
    return tuple(p for p in PURPOSES if KINDS[p].group == group)


def of_todo(todo: Todo) -> tuple[Purpose, ...]:
    return tuple(p for p in PURPOSES if KINDS[p].todo == todo)


AT_LEVEL: tuple[Purpose, ...] = tuple(p for p in PURPOSES if KINDS[p].at_level)
