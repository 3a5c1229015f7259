"""The search space and the objective: what a campaign may vary, and what it maximises.

A `[search]` table maps each flag (as written on the command line) to its candidate values, plus
two optional tables:

    [search]
    "--attention-backend" = ["flashinfer", "triton", "fa3"]
    "--speculative-algorithm" = [false, "EAGLE3"]        # false = the flag is omitted
    "--speculative-num-steps" = [1, 3, 5]
    [search.requires]                                     # flags that only apply together
    "--speculative-num-steps" = {"--speculative-algorithm" = "EAGLE3"}
    [search.baseline]                                     # the configuration to beat
    "--attention-backend" = "flashinfer"

A rule `A = {B = v}` means A may only be given while B has value v (`true`: any value but false;
a list: any of them). While a rule does not hold, A is omitted; while it holds, A takes one of its
candidates. A configuration here is always complete: every flag of the space has a value.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Scalar = bool | int | float | str
Flags = dict[str, Scalar]
Check = Callable[[Flags], "str | None"]  # the engine's own argument check: why it refuses, or None
RESERVED = ("requires", "baseline")


class SearchError(ValueError):
    """A search space the user must fix; the message is one line naming the offending key."""


def same(a: Any, b: Any) -> bool:
    """Equality that keeps true apart from 1 (TOML and JSON do)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def show(value: Any) -> str:
    return json.dumps(value)


@dataclass(frozen=True)
class SearchSpace:
    flags: dict[str, tuple[Scalar, ...]]  # flag -> candidates, in the table's order
    requires: dict[str, dict[str, Any]] = field(default_factory=dict)
    baseline: Flags = field(default_factory=dict)  # complete
    # Command lines the engine would refuse (e.g. SGLang's "draft tokens must equal steps + 1 when
    # topk is 1"), when that can be known without a launch: the simulator's parser can tell.
    check: Check | None = field(default=None, compare=False)
    # key() memoized by the config's items and their types (True and 1 are different keys): a
    # planner reads the identity of every measurement at every decision
    _keys: dict[tuple[Any, ...], str] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    # --- parsing -------------------------------------------------------------------------------
    @classmethod
    def parse(cls, raw: Mapping[str, Any], check: Check | None = None) -> SearchSpace:
        if not isinstance(raw, Mapping):
            raise SearchError(f"search must be a table, got {show(raw)}")
        flags: dict[str, tuple[Scalar, ...]] = {}
        for flag, values in raw.items():
            if flag in RESERVED:
                continue
            if not flag.startswith("--"):
                raise SearchError(
                    f"search.{flag}: a flag must be written as on the command "
                    "line, starting with '--'"
                )
            if not isinstance(values, list) or not values:
                raise SearchError(
                    f"search.{flag}: expected a non-empty list of candidate "
                    f"values, got {show(values)}"
                )
            for v in values:
                if not isinstance(v, bool | int | float | str):
                    raise SearchError(f"search.{flag}: candidate {show(v)} is not a scalar")
            flags[flag] = tuple(_dedupe(values))
        requires = _parse_requires(raw.get("requires", {}), flags)
        space = cls(flags=flags, requires=requires)
        baseline = _parse_baseline(raw.get("baseline", {}), space)
        space = cls(flags=flags, requires=requires, baseline=baseline, check=check)
        problems = space.problems(baseline)
        if problems:
            raise SearchError(f"search.baseline breaks a rule: {problems[0]}")
        refused = space.refusal(baseline)
        if refused:
            raise SearchError(f"search.baseline would be refused by the server: {refused}")
        return space

    # --- configurations --------------------------------------------------------------------------
    def complete(self, given: Mapping[str, Any]) -> Flags:
        """Every flag of the space (false where not given); flags outside the space are kept."""
        out: Flags = {f: given.get(f, False) for f in self.flags}
        out.update({f: v for f, v in given.items() if f not in self.flags})
        return out

    def key(self, config: Mapping[str, Any]) -> str:
        """Canonical identity of a configuration: the space's flags plus any extra given."""
        try:
            memo = (tuple(config.items()), tuple(map(type, config.values())))
            hash(memo)
        except TypeError:  # an unhashable extra value: no memo
            memo = None
        if memo is not None and (known := self._keys.get(memo)) is not None:
            return known
        full = self.complete(config)
        key = json.dumps(sorted(full.items()), separators=(",", ":"))
        if memo is not None:
            if len(self._keys) >= 100_000:
                self._keys.clear()
            self._keys[memo] = key
        return key

    def active(self, flag: str, config: Mapping[str, Any]) -> bool:
        """Whether the rules let `flag` be given in `config`."""
        return all(
            _holds(rule, config.get(other, False))
            for other, rule in self.requires.get(flag, {}).items()
        )

    def problems(self, config: Mapping[str, Any]) -> list[str]:
        out = []
        for flag, candidates in self.flags.items():
            value, on = config.get(flag, False), self.active(flag, config)
            if value is False:  # omitted: fine unless the flag applies and must be given
                if on and False not in candidates:
                    out.append(f"{flag} must be given (one of {show(list(candidates))})")
            elif not on:
                rule = ", ".join(f"{o} = {show(r)}" for o, r in self.requires[flag].items())
                out.append(f"{flag} only applies with {rule}")
            elif not any(same(value, c) for c in candidates):
                out.append(f"{flag} = {show(value)} is not one of {show(list(candidates))}")
        return out

    def is_valid(self, config: Mapping[str, Any]) -> bool:
        return not self.problems(config)

    def refusal(self, config: Mapping[str, Any]) -> str | None:
        """Why the engine would refuse this command line, when it can be known offline."""
        return self.check(self.complete(config)) if self.check is not None else None

    def admissible(self, config: Mapping[str, Any]) -> bool:
        return self.is_valid(config) and self.refusal(config) is None

    def enumerate(self) -> list[Flags]:
        """Every valid configuration, in a stable order (a gated flag may also be omitted)."""
        names = list(self.flags)
        options = [
            (*self.flags[f], False)
            if f in self.requires and False not in self.flags[f]
            else self.flags[f]
            for f in names
        ]
        combos = itertools.product(*options)
        return [
            c
            for c in (dict(zip(names, combo, strict=True)) for combo in combos)
            if self.admissible(c)
        ]

    def repair(self, config: Mapping[str, Any], prefer: Mapping[str, Any] | None = None) -> Flags:
        """Make the rules hold after one flag changed: flags whose rule no longer holds are
        omitted; flags that became applicable take their value in `prefer` (else the baseline's,
        else their first non-false candidate)."""
        out = self.complete(config)
        for _ in range(len(self.flags)):  # rules may chain; a fixpoint within len(flags) rounds
            before = dict(out)
            for flag, candidates in self.flags.items():
                on = self.active(flag, out)
                if not on and out[flag] is not False:
                    out[flag] = False
                elif on and out[flag] is False and False not in candidates:
                    out[flag] = self._default_on(flag, prefer or {})
            if out == before:
                break
        return out

    def _default_on(self, flag: str, prefer: Mapping[str, Any]) -> Scalar:
        for source in (prefer, self.baseline):
            value = source.get(flag, False)
            if value is not False and any(same(value, c) for c in self.flags[flag]):
                return value
        return next(c for c in self.flags[flag] if c is not False)

    def neighbours(
        self, config: Mapping[str, Any], prefer: Mapping[str, Any] | None = None
    ) -> list[tuple[str, Scalar, Flags]]:
        """One-factor changes of `config` (repaired to stay valid): (flag, new value, config)."""
        base = self.complete(config)
        out, seen = [], {self.key(base)}
        for flag, candidates in self.flags.items():
            if not self.active(flag, base):
                continue
            for value in candidates:
                if same(value, base[flag]):
                    continue
                cand = self.repair({**base, flag: value}, prefer)
                k = self.key(cand)
                if k not in seen and self.admissible(cand):
                    seen.add(k)
                    out.append((flag, value, cand))
        return out

    def diff(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Scalar]:
        """The flags of b that differ from a."""
        fa, fb = self.complete(a), self.complete(b)
        return {f: v for f, v in fb.items() if not same(fa.get(f, False), v)}


def _dedupe(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if not any(same(v, o) for o in out):
            out.append(v)
    return out


def _holds(rule: Any, value: Any) -> bool:
    if rule is True:
        return value is not False
    if isinstance(rule, list):
        return any(same(value, r) for r in rule)
    return same(value, rule)


def _parse_requires(raw: Any, flags: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    if not isinstance(raw, Mapping):
        raise SearchError(f"search.requires must be a table, got {show(raw)}")
    out: dict[str, dict[str, Any]] = {}
    for flag, rule in raw.items():
        if flag not in flags:
            raise SearchError(f"search.requires.{flag}: not a flag of the search space")
        if not isinstance(rule, Mapping) or not rule:
            raise SearchError(
                f"search.requires.{flag}: expected a table like "
                f'{{"--other-flag" = value}}, got {show(rule)}'
            )
        for other, value in rule.items():
            if other not in flags:
                raise SearchError(f"search.requires.{flag}: {other} is not a flag of the space")
            if other == flag:
                raise SearchError(f"search.requires.{flag}: a flag cannot require itself")
            if not isinstance(value, bool | int | float | str | list):
                raise SearchError(
                    f"search.requires.{flag}.{other}: expected a value, true or a "
                    f"list, got {show(value)}"
                )
        out[flag] = dict(rule)
    return out


def _parse_baseline(raw: Any, space: SearchSpace) -> Flags:
    """The configuration to beat; flags not named take false if allowed, else a default.
    A baseline value outside the candidates joins them: the baseline is always in the space
    (false, for a flag the rules switch off, is not a candidate but the absence of one)."""
    if not isinstance(raw, Mapping):
        raise SearchError(f"search.baseline must be a table, got {show(raw)}")
    for flag, value in raw.items():
        if flag not in space.flags:
            raise SearchError(f"search.baseline.{flag}: not a flag of the search space")
        if not isinstance(value, bool | int | float | str):
            raise SearchError(f"search.baseline.{flag}: {show(value)} is not a scalar")
        if value is not False and not any(same(value, c) for c in space.flags[flag]):
            space.flags[flag] = (*space.flags[flag], value)
    filled = space.repair({f: raw.get(f, False) for f in space.flags}, raw)
    return {**filled, **raw}  # what was given stays as given: a broken rule is an error


def render_flags(flags: Mapping[str, Any]) -> list[str]:
    """Flags as argv words: true -> the switch, false -> omitted, else "--flag value"."""
    out: list[str] = []
    for flag, value in flags.items():
        if value is True:
            out.append(flag)
        elif value is not False and value is not None:
            out.extend([flag, str(value)])
    return out
