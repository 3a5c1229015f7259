"""A program's options as an allow-list: `parse(args, spec)` names the first option the spec does
not list (the caller then says "not certain"), the operands, and each option's value. Short
options cluster (`-lah`, `-bn1`: a valued letter takes the rest) unless the program reads a long
word as one option (nvidia-smi's `-lmcd`); long options take `=value` or the next word."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Opts:
    """A program's options that are known to read only (or to do what its shape checks)."""

    flags: str = ""  # short options without a value, clustered or not: -lah
    valued: str = ""  # short options that take a value: -n 5, -n5, -bn1
    long: frozenset[str] = field(default_factory=frozenset)  # --all
    long_valued: frozenset[str] = field(default_factory=frozenset)  # --lines=5, --lines 5
    numeric: bool = False  # -20 (head, tail)
    cluster: bool = True  # -lah is -l -a -h (nvidia-smi reads -lmcd as one option of its own)


def opts(
    flags: str = "",
    valued: str = "",
    long: str = "",
    values: str = "",
    numeric: bool = False,
    cluster: bool = True,
) -> Opts:
    return Opts(flags, valued, frozenset(long.split()), frozenset(values.split()), numeric, cluster)


@dataclass
class Parsed:
    unknown: str | None = None  # the first option not in the list
    operands: list[str] = field(default_factory=list)
    values: list[tuple[str, str]] = field(default_factory=list)  # (option, its value)
    flags: set[str] = field(default_factory=set)  # options without a value: -r, --recursive


def parse(args: list[str], spec: Opts) -> Parsed:
    out = Parsed()
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            out.operands.extend(args[i:])
            break
        if not a.startswith("-") or a == "-":
            out.operands.append(a)
        elif a.startswith("--"):
            name, eq, value = a.partition("=")
            if name in spec.long_valued:
                if not eq:
                    if name in spec.long:  # optional value (--color, --follow): none given
                        out.flags.add(name)
                        continue
                    if i >= len(args):
                        return Parsed(unknown=a)
                    value, i = args[i], i + 1
                out.values.append((name, value))
            elif name in spec.long and not eq:
                out.flags.add(name)
            else:
                out.unknown = a
                return out
        elif spec.numeric and re.fullmatch(r"-\d+", a):
            out.values.append(("-n", a[1:]))
        elif not spec.cluster and len(a) != 2:
            out.unknown = a
            return out
        else:
            for j, ch in enumerate(a[1:], 1):
                if ch in spec.valued:
                    value = a[j + 1 :]
                    if not value:
                        if i >= len(args):
                            return Parsed(unknown=a)
                        value, i = args[i], i + 1
                    out.values.append(("-" + ch, value))
                    break
                if ch not in spec.flags:
                    out.unknown = a
                    return out
                out.flags.add("-" + ch)
    return out
