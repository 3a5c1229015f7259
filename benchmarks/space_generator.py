"""Test spaces nobody shaped the planner on (issue 50): a seeded generator of simulator profiles,
each a search space with its truth, in the shape of the built-in ones (sim/profiles/*.toml: a box,
its own flags, flag effects - an effect with several conditions is an interaction term -,
start-failure rules, a [search] table and an objective).

A drawn space has 3-8 flags of 2-5 values each (switches, the profile's own choice flags, and
sometimes the box's native --attention-backend / --cuda-graph-max-bs with their real physics),
and plants:

- main effects: most changes flat or a small loss or win, some level-dependent (the batch-
  independent part of a step and the per-sequence part move apart, so a change can help at C=1
  and cost at C=250);
- sparse interactions of order 2-4 whose parts each lose alone beyond the noise (4-8 %) or are
  flat alone, and gain 10-25 % all together (any smaller subset gains nothing);
- decoys: a change that wins a little alone (2-4 %) and blocks the best - another value of an
  interaction part's flag, or a switch that spoils the interaction when it is on with it;
- crash regions: combinations of one or two changes that fail to start (never the baseline,
  never the planted interaction from the baseline);
- an objective: the geometric mean over the levels, or the throughput at one random level.

Spaces are scored as a draw, never tuned on one by one: `draw(20)` (seed 0) is the score,
`draw(20, seed)` with a fresh seed checks that the score was not fitted to the first draw.
`deceptive_pair()` and `sparse_triple()` build the two shapes issue 50 names, for tests.

    .venv/bin/python benchmarks/space_generator.py --count 20 [--seed 0] [--out DIR]

prints each space's shape (and writes its profile to DIR, default a temporary folder).
The efficiency study runs a draw: `benchmarks/efficiency.py --space generated:20[:SEED]`.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BASE_FLAGS = [
    "--model-path", "moonshotai/Kimi-K2-Thinking", "--tp", "8",
    "--disable-custom-all-reduce", "--load-seconds", "1.5",
]  # fmt: skip
LEVELS = [1, 2, 5, 10, 30, 70, 100, 250]
MAX_GRID = 512  # configurations per space at most: the study scores against the whole grid
# the box's own flags, with their real physics (sim/model.py), and the baseline's value
NATIVE: dict[str, tuple[list[Any], Any]] = {
    "--attention-backend": (["flashinfer", "triton", "fa3"], "flashinfer"),
    "--cuda-graph-max-bs": ([64, 128, 256], 128),
}
WORDS = ["low", "mid", "high", "max", "auto"]  # the values of a choice flag
DEFAULT_DIR = Path(tempfile.gettempdir()) / "campaign-agent-generated-spaces"

Change = tuple[str, Any]  # (flag, value)


@dataclass(frozen=True)
class Planted:
    """What the generator put in a space, for the reader and the tests."""

    kind: str  # "interaction" | "decoy" | "crash"
    changes: tuple[Change, ...]
    note: str = ""


@dataclass
class Space:
    """One generated space: its profile (the TOML table) and what was planted in it."""

    name: str
    profile: dict[str, Any]
    planted: list[Planted] = field(default_factory=list)

    @property
    def interactions(self) -> list[Planted]:
        return [p for p in self.planted if p.kind == "interaction"]

    def write(self, folder: Path = DEFAULT_DIR) -> Path:
        """The profile as a TOML file (what `--profile PATH` and efficiency.py read)."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.name}.toml"
        text = to_toml(self.profile)
        if not path.is_file() or path.read_text() != text:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(path)
        return path


# ---------------------------------------------------------------------------------------------
# effects as factors on the step model


def uniform(gain: float) -> dict[str, float]:
    """Factors that change the throughput by about `gain` at every level (step and prefill)."""
    f = round(1 / (1 + gain), 4)
    return {"fixed": f, "per_seq": f, "prefill": f}


def tilted(low: float, high: float) -> dict[str, float]:
    """About `low` at C=1 (the batch-independent part of a step) and `high` at high load (the
    per-sequence part)."""
    return {"fixed": round(1 / (1 + low), 4), "per_seq": round(1 / (1 + high), 4)}


def effect(when: Mapping[str, Any], factors: Mapping[str, float], why: str) -> dict[str, Any]:
    return {"when": dict(when), **factors, "why": why}


# ---------------------------------------------------------------------------------------------
# the generator


def generate(index: int, seed: int = 0) -> Space:
    """The `index`-th space of draw `seed` (string seeds hash the same on every machine)."""
    rng = random.Random(f"space-generator/{seed}/{index}")
    name = f"gen{seed}-{index:02d}"
    search, own, baseline = _flags(rng)
    effects: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    planted: list[Planted] = []
    flags = list(search)
    changes = {f: [v for v in search[f] if v != baseline[f]] for f in flags}
    used: set[Change] = set()  # changes an interaction or a decoy owns (no main effect)
    # interactions: 1 or 2, sparse, order 2-4, on distinct flags
    free = [f for f in flags if f not in NATIVE]
    count = 1 if len(free) < 4 or rng.random() < 0.6 else 2
    for _ in range(count):
        order = min(rng.choice([2, 2, 3, 3, 4]), len(free))
        if order < 2:
            break
        parts_flags = rng.sample(free, order)
        free = [f for f in free if f not in parts_flags]
        parts = tuple((f, rng.choice(changes[f])) for f in parts_flags)
        alone: list[float] = []
        for f, v in parts:
            loses = rng.random() < 0.6
            g = -rng.uniform(0.04, 0.08) if loses else rng.uniform(-0.004, 0.004)
            alone.append(g)
            word = "loses alone" if loses else "flat alone"
            effects.append(effect({f: v}, uniform(g), f"part of an interaction: {word}"))
            used.add((f, v))
        total = rng.uniform(0.10, 0.25)
        # the whole gains `total` over the baseline: undo the parts' own factors
        whole = (1 + total) / math.prod(1 + g for g in alone) - 1
        effects.append(
            effect(dict(parts), uniform(whole), f"all {order} together: +{total:.0%} in all")
        )
        shape = f"alone {', '.join(f'{g:+.1%}' for g in alone)}; together +{total:.0%}"
        planted.append(Planted("interaction", parts, shape))
    # decoys: a small win alone that blocks the best
    for inter in list(planted):
        if rng.random() < 0.7:
            f, v = rng.choice(inter.changes)
            others = [w for w in changes[f] if w != v and (f, w) not in used]
            g = rng.uniform(0.02, 0.04)
            if others and rng.random() < 0.6:  # another value of a part's flag
                w = rng.choice(others)
                effects.append(effect({f: w}, uniform(g), "decoy: a small win alone"))
                used.add((f, w))
                planted.append(Planted("decoy", ((f, w),), f"+{g:.1%} alone, excludes {f} {v}"))
            elif free:  # a switch elsewhere that spoils the interaction
                d = rng.choice(free)
                free.remove(d)
                w = rng.choice(changes[d])
                effects.append(effect({d: w}, uniform(g), "decoy: a small win alone"))
                spoil = {**dict(inter.changes), d: w}
                effects.append(effect(spoil, uniform(-0.15), "decoy: spoils the interaction"))
                used.add((d, w))
                planted.append(Planted("decoy", ((d, w),), f"+{g:.1%} alone, spoils the best"))
    # main effects of every other change: flat, small loss, small win, or level-dependent
    for f in flags:
        if f in NATIVE:
            continue  # the box's physics
        for v in changes[f]:
            if (f, v) in used:
                continue
            r = rng.random()
            if r < 0.35:
                continue  # flat
            if r < 0.6:
                effects.append(effect({f: v}, uniform(-rng.uniform(0.01, 0.12)), "a loss"))
            elif r < 0.8:
                effects.append(effect({f: v}, uniform(rng.uniform(0.005, 0.03)), "a small win"))
            else:
                low, high = rng.uniform(-0.08, 0.08), rng.uniform(-0.08, 0.08)
                effects.append(effect({f: v}, tilted(low, high), "level-dependent"))
    # crash regions: one or two changes that fail to start
    best = {c for p in planted if p.kind == "interaction" for c in p.changes}
    for _ in range(rng.choice([0, 1, 1, 2])):
        size = rng.choice([1, 2, 2])
        picks = rng.sample(flags, min(size, len(flags)))
        when = {f: rng.choice(changes[f]) for f in picks}
        if len(when) == len(picks) and set(when.items()) <= best:
            continue  # the planted interaction from the baseline starts
        message = rng.choice([
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "Capture cuda graph failed: CUDA out of memory",
            "RuntimeError: this combination is not supported by the kernel",
        ])  # fmt: skip
        failures.append({"when": when, "message": message, "phase": "graph"})
        planted.append(Planted("crash", tuple(when.items()), message.split(":")[0]))
    objective: dict[str, Any] = {"kind": "geomean"}
    if rng.random() >= 0.6:
        objective = {"kind": "level", "level": rng.choice(LEVELS)}
    profile = {
        "name": name,
        "description": f"generated space {index} of draw {seed}",
        "hardware": "reference",
        "base_flags": list(BASE_FLAGS),
        "levels": list(LEVELS),
        "objective": objective,
        "flags": own,
        "effects": effects,
        "failures": failures,
        "search": {**search, "baseline": baseline},
    }
    return Space(name, profile, planted)


def _flags(
    rng: random.Random,
) -> tuple[dict[str, list[Any]], dict[str, dict[str, Any]], dict[str, Any]]:
    """The search space's flags (3-8, 2-5 values each, at most MAX_GRID configurations), the
    profile's own flag table, and the baseline."""
    n = rng.randint(3, 8)
    native = [f for f in NATIVE if rng.random() < 0.3][: max(0, n - 2)]
    sizes = [rng.randint(2, 5) for _ in range(n - len(native))]
    while math.prod(sizes) * 3 ** len(native) > MAX_GRID:
        if max(sizes) > 2:
            sizes[sizes.index(max(sizes))] -= 1
        else:  # every own flag at 2 values: a native flag gives its place to a switch
            native.pop()
            sizes.append(2)
    search: dict[str, list[Any]] = {}
    own: dict[str, dict[str, Any]] = {}
    baseline: dict[str, Any] = {}
    for f in native:
        search[f], baseline[f] = list(NATIVE[f][0]), NATIVE[f][1]
    for i, k in enumerate(sizes):
        flag = f"--knob-{chr(ord('a') + i)}"
        if k == 2 and rng.random() < 0.7:  # a switch, off at the baseline
            own[flag] = {}
            search[flag], baseline[flag] = [False, True], False
        else:
            values = WORDS[:k]
            own[flag] = {"choices": values}
            search[flag] = list(values)
            baseline[flag] = rng.choice(values)
    return search, own, baseline


def draw(count: int = 20, seed: int = 0) -> list[Space]:
    """A draw of `count` spaces: seed 0 is the score, any other a fresh draw."""
    return [generate(i, seed) for i in range(count)]


# ---------------------------------------------------------------------------------------------
# the two shapes of issue 50, built by the generator's own pieces


def deceptive_pair(seed: int = 0, alone: float = -0.05, together: float = 0.20) -> Space:
    """Two changes that each lose `alone` (beyond a 2 % noise) and gain `together` as a pair,
    with both kinds of decoy (another value of a part's flag, and a switch that spoils the pair,
    each winning 2-4 % alone) and three other flags (a small win, a loss, a level-dependent
    choice)."""
    rng = random.Random(f"deceptive-pair/{seed}")
    return _planted(rng, f"pair{seed}", alone=[alone, alone], together=together)


def sparse_triple(seed: int = 0, together: float = 0.15) -> Space:
    """Three changes that pay only together - one flat alone, two that lose 4-5 % alone; every
    pair of them gains nothing - with the same decoys and other flags as `deceptive_pair`."""
    rng = random.Random(f"sparse-triple/{seed}")
    alone = [0.0, -rng.uniform(0.04, 0.05), -rng.uniform(0.04, 0.05)]
    return _planted(rng, f"triple{seed}", alone=alone, together=together)


def _planted(rng: random.Random, name: str, alone: Sequence[float], together: float) -> Space:
    search: dict[str, list[Any]] = {}
    own: dict[str, dict[str, Any]] = {}
    baseline: dict[str, Any] = {}
    effects: list[dict[str, Any]] = []
    parts: list[Change] = []
    for i, g in enumerate(alone):
        flag = f"--part-{chr(ord('a') + i)}"
        if i == 0:  # a choice: the part's value, and a decoy value of the same flag
            values = WORDS[:3]
            own[flag], search[flag], baseline[flag] = {"choices": values}, values, "low"
            parts.append((flag, "high"))
            decoy = rng.uniform(0.02, 0.04)
            effects.append(effect({flag: "mid"}, uniform(decoy), "decoy: a small win alone"))
        else:
            own[flag], search[flag], baseline[flag] = {}, [False, True], False
            parts.append((flag, True))
        effects.append(effect(dict(parts[-1:]), uniform(g), "part: alone"))
    whole = (1 + together) / math.prod(1 + g for g in alone) - 1
    effects.append(effect(dict(parts), uniform(whole), "the parts together"))
    spoiler = "--knob-a"  # a switch that wins a little alone and spoils the parts together
    own[spoiler], search[spoiler], baseline[spoiler] = {}, [False, True], False
    effects.append(effect({spoiler: True}, uniform(rng.uniform(0.02, 0.04)), "decoy: a win"))
    effects.append(effect({**dict(parts), spoiler: True}, uniform(-0.15), "decoy: spoils"))
    for flag, g in (("--knob-b", rng.uniform(0.01, 0.02)), ("--knob-c", -rng.uniform(0.02, 0.08))):
        own[flag], search[flag], baseline[flag] = {}, [False, True], False
        effects.append(effect({flag: True}, uniform(g), "a small win" if g > 0 else "a loss"))
    flag, values = "--knob-d", WORDS[:4]
    own[flag], search[flag], baseline[flag] = {"choices": values}, values, "low"
    effects.append(effect({flag: "high"}, tilted(0.04, -0.05), "level-dependent"))
    effects.append(effect({flag: "max"}, uniform(-rng.uniform(0.03, 0.1)), "a loss"))
    profile = {
        "name": name,
        "description": f"planted: {len(parts)} changes that pay only together, and decoys",
        "hardware": "reference",
        "base_flags": list(BASE_FLAGS),
        "levels": list(LEVELS),
        "objective": {"kind": "geomean"},
        "flags": own,
        "effects": effects,
        "failures": [],
        "search": {**search, "baseline": baseline},
    }
    note = f"alone {', '.join(f'{g:+.1%}' for g in alone)}; together +{together:.0%}"
    return Space(name, profile, [Planted("interaction", tuple(parts), note)])


# ---------------------------------------------------------------------------------------------
# TOML out (the profile's few shapes: scalars, lists, inline tables, tables, arrays of tables)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_value(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML for {v!r}")


def to_toml(profile: Mapping[str, Any]) -> str:
    out = [f"# generated by benchmarks/space_generator.py: {profile['description']}"]
    for key in ("name", "description", "hardware", "base_flags", "levels"):
        out.append(f"{key} = {_value(profile[key])}")
    out += ["", "[objective]", *(f"{k} = {_value(v)}" for k, v in profile["objective"].items())]
    for flag, spec in profile["flags"].items():
        out += ["", f"[flags.{_value(flag)}]", *(f"{k} = {_value(v)}" for k, v in spec.items())]
    for kind in ("effects", "failures"):
        for item in profile[kind]:
            out += ["", f"[[{kind}]]", *(f"{k} = {_value(v)}" for k, v in item.items())]
    search = dict(profile["search"])
    baseline = search.pop("baseline")
    out += ["", "[search]", *(f"{_value(f)} = {_value(v)}" for f, v in search.items())]
    out += ["", "[search.baseline]", *(f"{_value(f)} = {_value(v)}" for f, v in baseline.items())]
    return "\n".join(out) + "\n"


def describe(space: Space) -> str:
    search = {k: v for k, v in space.profile["search"].items() if k != "baseline"}
    grid = math.prod(len(v) for v in search.values())
    obj = space.profile["objective"]
    reads = "geomean" if obj["kind"] == "geomean" else f"C={obj['level']}"
    lines = [f"{space.name}: {len(search)} flags, {grid} configurations, objective {reads}"]
    for p in space.planted:
        what = " + ".join(f"{f} {v}" for f, v in p.changes)
        lines.append(f"  {p.kind}: {what} ({p.note})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    if not 1 <= args.count <= 1000:
        print("space_generator: --count in 1..1000", file=sys.stderr)
        return 2
    for space in draw(args.count, args.seed):
        path = space.write(args.out)
        print(describe(space))
        print(f"  -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
