"""Campaign efficiency: the autopilot's planner against exhaustive grid search, random search and
Optuna's TPE on a search space, at matched budgets counted in server launches (each a ten-minute
model load on real hardware). No servers: every method measures sim.truth times the same seeded
noise, so the study takes seconds to minutes. Run by hand:

    .venv/bin/python benchmarks/efficiency.py [--space NAME_OR_FILE] [--profile FILE] \
        [--seeds 10] [--noise 0.02] [--max-tokens 128] [--json]
    .venv/bin/python benchmarks/efficiency.py --list     # the built-in spaces
    .venv/bin/python benchmarks/efficiency.py --space generated:20[:SEED] [--seeds 10] \
        [--without-tpe]

A space is a built-in one (a shipped profile of sim/profiles/ with a [search] table; "default" is
the reference lab), a profile file with a [search] table, or a space file run on --profile;
`generated:COUNT[:SEED]` is a draw of benchmarks/space_generator.py (spaces nobody shaped the
planner on: seed 0 is the score, another seed a fresh draw), one table and the mean over the draw.

Per method it prints the mean fraction of the achievable gain reached, (f - f0) / (f* - f0) with f
the true value of the configuration the method would deploy, how often it lands within 2 % of the
optimum, and the launches it used (refused command lines and repeated configurations are not
launches; crashes are); the autopilot's also say how many of them were its end stage (the fresh
launches that re-validate the winner and measure it against the baseline in launch pairs). Needs
the `bench` extra (optuna).
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent.brains.autopilot.ask_tell import AskTell
from agent.brains.autopilot.engine_limits import engine_check
from agent.brains.autopilot.history import Objective
from agent.brains.autopilot.offline import Noise, sim_floors, sim_truth, simulate
from agent.brains.autopilot.planner import Planner, Settings
from agent.brains.autopilot.steps import SERIAL
from sim import truth as T
from sim.space import SpaceError, lab_names, load_lab
from tools.domain.objective import describe_objective
from tools.domain.space import Flags, SearchError, SearchSpace
from tools.servers.profiles import SIM
from tools.servers.speculation import speculative_flags


@dataclass
class Outcome:
    launches: int
    chosen: Flags | None
    crossover_ok: bool | None = None
    points: int = 0  # benchmark points (level x run): what benchmark time is spent on
    first_good: int | None = None  # the launch that first measured a config within 2 % of f*
    at_end: int | None = None  # the autopilot's: fresh launches re-validating and in pairs
    established: bool | None = None  # the autopilot's: a winner over the baseline, proven


class Lab:
    """The space, its truth and a noisy full sweep per launch (what a grid or TPE trial costs)."""

    def __init__(
        self, max_tokens: int, noise: float, source: str = "default", profile: str | None = None
    ) -> None:
        lab = load_lab(source, profile)
        self.name, self.base, self.levels = lab.name, lab.base, tuple(lab.levels)
        table = lab.objective or {}  # the profile's [objective]; the geomean when it has none
        self.objective = Objective(str(table.get("kind", "geomean")), table.get("level"))
        command = shlex.join(["python", "-m", "sim", *lab.base])
        self.space = SearchSpace.parse(lab.space, check=engine_check("sim", command))
        self.configs = self.space.enumerate()
        self.truth = sim_truth(max_tokens=max_tokens, base=lab.base)
        self.floors = sim_floors(max_tokens=max_tokens, base=lab.base)  # what the results carry
        self.speculative = speculative_flags(SIM, self.space.flags, self.space.requires)
        self.noise, self.max_tokens = noise, max_tokens
        self.value = {self.space.key(c): self.true_value(c) for c in self.configs}
        self.f0 = self.true_value(self.space.baseline)
        self.fstar = max(self.value.values())

    def true_value(self, config: Flags) -> float:
        per = self.truth(config, self.levels)
        return 0.0 if isinstance(per, str) else self.objective.value(per)

    def measure(self, config: Flags, rng: random.Random) -> float:
        """One launch and a full sweep: the measured objective (0 when it fails to start)."""
        per = self.truth(config, self.levels)
        if isinstance(per, str):
            return 0.0
        offset = rng.gauss(0, 0.005)
        return self.objective.value(
            {c: v * (1 + offset + rng.gauss(0, self.noise)) for c, v in per.items()}
        )

    def first_good(self, launched: list[Flags]) -> int | None:
        good = [i + 1 for i, c in enumerate(launched) if self.true_value(c) >= 0.98 * self.fstar]
        return good[0] if good else None

    def gain(self, chosen: Flags | None) -> float:
        value = self.true_value(chosen) if chosen is not None else self.f0
        return (value - self.f0) / (self.fstar - self.f0)


def autopilot(lab: Lab, seed: int, side_by_side: bool = False, floors: bool = True) -> Outcome:
    """The autopilot's campaign; `floors`: its sweeps carry the floor of each level, as
    run_benchmark's results do where the box is described (the stop signal against physics reads
    them); without, the planner never knows the floor."""
    levels = lab.levels
    settings = Settings(
        levels=levels,
        objective=lab.objective,
        side_by_side=side_by_side,
        speculative=lab.speculative,
    )
    search = AskTell(Planner(lab.space, settings))
    noise = Noise(level=lab.noise, screen=lab.noise * 1.5, launch=0.005)
    told = lab.floors if floors else None
    h, finish = simulate(search, lab.truth, seed=seed, noise=noise, floors=told)
    ok = None
    if len(finish.policy) >= 2:
        low, high = finish.policy[0].config, finish.policy[-1].config
        a = T.throughput(low, levels, max_tokens=lab.max_tokens, base=lab.base)
        b = T.throughput(high, levels, max_tokens=lab.max_tokens, base=lab.base)
        real = next((c for c in levels if b[c] >= a[c]), None)
        ok = real is not None and abs(levels.index(finish.crossover[-1]) - levels.index(real)) <= 1
    points = sum(len(m.per_level) for m in h.measurements)
    end = {m.launch for m in h.measurements if m.purpose in SERIAL}
    won = finish.best is not None and h.key(finish.best) != h.key(lab.space.baseline)
    return Outcome(
        h.launches_used(),
        finish.best,
        ok,
        points,
        lab.first_good([launch.config for launch in h.launches]),
        at_end=len(end),
        established=won and finish.established,
    )


def grid(lab: Lab, seed: int, budget: int | None = None) -> Outcome:
    """vLLM auto_tune style: every configuration once, the best measured wins."""
    rng = random.Random(seed)
    order = lab.configs[: budget or len(lab.configs)]
    measured = [(lab.measure(c, rng), c) for c in order]
    return Outcome(
        len(order), max(measured, key=lambda m: m[0])[1], first_good=lab.first_good(order)
    )


def random_search(lab: Lab, seed: int, budget: int) -> Outcome:
    """The baseline first (every method knows what it must beat), then distinct random picks."""
    rng = random.Random(seed)
    others = [c for c in lab.configs if lab.space.key(c) != lab.space.key(lab.space.baseline)]
    picks = [lab.space.baseline, *rng.sample(others, min(budget, len(lab.configs)) - 1)]
    measured = [(lab.measure(c, rng), c) for c in picks]
    return Outcome(
        len(picks), max(measured, key=lambda m: m[0])[1], first_good=lab.first_good(picks)
    )


def tpe(lab: Lab, seed: int, budget: int) -> Outcome:
    """Optuna's TPE, define-by-run (speculative parameters only with EAGLE3), the baseline as its
    first trial. Repeated suggestions are answered from a cache and refused command lines fail the
    trial: neither is a launch."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rng = random.Random(seed)
    space = lab.space
    cache: dict[str, float] = {}
    launched: list[Flags] = []
    best: tuple[float, Flags | None] = (-1.0, None)

    def objective(trial: optuna.Trial) -> float:
        nonlocal best
        config: Flags = {}
        for flag, candidates in space.flags.items():
            if not space.active(flag, config):
                config[flag] = False
                continue
            choices = [c for c in candidates]
            config[flag] = choices[trial.suggest_categorical(flag, list(range(len(choices))))]
        config = space.complete(config)
        if not space.admissible(config):
            raise optuna.TrialPruned()
        key = space.key(config)
        if key not in cache:
            launched.append(config)
            cache[key] = lab.measure(config, rng)
            if cache[key] > best[0]:
                best = (cache[key], config)
        return cache[key]

    sampler = optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    base = space.baseline
    study.enqueue_trial({f: space.flags[f].index(v) for f, v in base.items() if v is not False})
    trials = 0
    while len(cache) < budget and trials < 50 * budget:
        study.optimize(objective, n_trials=1)
        trials += 1
    return Outcome(len(cache), best[1], first_good=lab.first_good(launched))


def stats_of(lab: Lab, outcomes: list[Outcome]) -> dict[str, Any]:
    """What --json prints per method."""
    gains = [lab.gain(o.chosen) for o in outcomes]
    within = sum(lab.true_value(o.chosen) >= 0.98 * lab.fstar for o in outcomes if o.chosen)
    return {
        "launches_mean": round(statistics.mean(o.launches for o in outcomes), 2),
        **({"at_end_mean": round(statistics.mean(ends), 2)} if (ends := at_end(outcomes)) else {}),
        "gain_mean": round(statistics.mean(gains), 4),
        "gain_worst": round(min(gains), 4),
        "within_2pct": within,
        **({"established": sum(proven)} if (proven := established(outcomes)) else {}),
        "seeds": len(outcomes),
    }


def at_end(outcomes: list[Outcome]) -> list[int]:
    """The launches of the end stage (re-validation and launch pairs), where counted."""
    return [o.at_end for o in outcomes if o.at_end is not None]


def established(outcomes: list[Outcome]) -> list[bool]:
    """Whether each campaign ended on a winner it proved over the baseline, where told (the
    autopilot's; the searches without a proof say nothing)."""
    return [o.established for o in outcomes if o.established is not None]


def row(name: str, lab: Lab, outcomes: list[Outcome]) -> str:
    gains = [lab.gain(o.chosen) for o in outcomes]
    within = sum(lab.true_value(o.chosen) >= 0.98 * lab.fstar for o in outcomes if o.chosen)
    launches = statistics.mean(o.launches for o in outcomes)
    ends = at_end(outcomes)
    end = f" ({statistics.mean(ends):.1f} at the end)" if ends else ""
    firsts = [o.first_good for o in outcomes if o.first_good is not None]
    first = f"{statistics.mean(firsts):.1f} ({len(firsts)}/{len(outcomes)})" if firsts else "-"
    proven = established(outcomes)
    shown = f"{sum(proven)}/{len(proven)}" if proven else "-"
    return (
        f"| {name} | {launches:.1f}{end} | {launches / len(lab.configs):.0%} | "
        f"{statistics.mean(gains):.3f} | {min(gains):.3f} | {within}/{len(outcomes)} | "
        f"{first} | {shown} |"
    )


def study(lab: Lab, args: argparse.Namespace) -> None:
    """One space: the JSON object (--json) or the table."""
    seeds = range(args.seeds)
    ours = [autopilot(lab, s, args.side_by_side) for s in seeds]
    blind = [autopilot(lab, s, args.side_by_side, floors=False) for s in seeds]
    budgets = [o.launches for o in ours]
    if args.json:
        methods = {
            "autopilot": stats_of(lab, ours),
            "autopilot_without_floor": stats_of(lab, blind),
            "tpe": stats_of(lab, [tpe(lab, s, b) for s, b in zip(seeds, budgets, strict=True)]),
            "random": stats_of(
                lab, [random_search(lab, s, b) for s, b in zip(seeds, budgets, strict=True)]
            ),
            "grid": stats_of(lab, [grid(lab, s) for s in seeds]),
        }
        print(json.dumps({"space": lab.name, "noise": args.noise, "methods": methods}))
        return
    table: list[tuple[str, Callable[[int, int], Outcome]]] = [
        ("random search, same launches", lambda s, b: random_search(lab, s, b)),
        ("Optuna TPE, same launches", lambda s, b: tpe(lab, s, b)),
        ("Optuna TPE, 2x the launches", lambda s, b: tpe(lab, s, 2 * b)),
    ]
    print(
        f"space {lab.name}: {len(lab.configs)} configurations; f0 (baseline) {lab.f0:.1f}, "
        f"f* {lab.fstar:.1f} tok/s ({describe_objective(lab.objective.kind, lab.objective.level)}, "
        f"{args.max_tokens}-token answers); "
        f"noise {args.noise:.1%} per point; {args.seeds} seeds"
    )
    print(
        "| method | launches (mean) | of the grid | gain reached (mean) | worst | deployed "
        "within 2 % of f* | first launch within 2 % (found in) | winner established |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print(row("autopilot", lab, ours))
    print(row("autopilot, the floor unknown (no stop signal)", lab, blind))
    for name, run in table:
        print(row(name, lab, [run(s, b) for s, b in zip(seeds, budgets, strict=True)]))
    print(row("exhaustive grid", lab, [grid(lab, s) for s in seeds]))
    crossings = [o.crossover_ok for o in ours if o.crossover_ok is not None]
    print(
        f"autopilot policy crossover within one level of the truth: {sum(crossings)}/"
        f"{len(crossings)} seeds with a policy ({len(ours) - len(crossings)} without)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--space",
        default="default",
        help="a built-in space (--list), all of them (all), a file, or generated:COUNT[:SEED]",
    )
    parser.add_argument("--profile", help="the box a space file runs on (sim/profiles/ or a file)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--noise", type=float, default=0.02, help="relative sigma per point")
    parser.add_argument("--max-tokens", type=int, default=128, help="the lab's workload")
    parser.add_argument("--json", action="store_true", help="one JSON object, no table")
    parser.add_argument(
        "--side-by-side",
        action="store_true",
        help="the box runs two servers at once: the winner is proven in a duet",
    )
    parser.add_argument("--list", action="store_true", help="name the built-in spaces")
    parser.add_argument(
        "--without-tpe",
        action="store_true",
        help="a generated draw without Optuna's TPE (the slow method: most of a draw's time)",
    )
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(lab_names()))  # "default" is the reference lab too
        return 0
    if args.seeds < 1 or not 0 <= args.noise < 0.5 or args.max_tokens < 1:
        print("efficiency: --seeds >= 1, --noise in [0, 0.5), --max-tokens >= 1", file=sys.stderr)
        return 2
    if args.space == "all" and args.profile:
        print(
            "efficiency: --space all runs each built-in space on its own box: no --profile",
            file=sys.stderr,
        )
        return 2
    if args.space.startswith("generated:"):
        return generated(args)
    names = lab_names() if args.space == "all" else [args.space]
    try:
        labs = [Lab(args.max_tokens, args.noise, name, args.profile) for name in names]
    except (SpaceError, SearchError, ValueError) as err:
        print(f"efficiency: {err}", file=sys.stderr)
        return 2
    for lab in labs:
        study(lab, args)
    return 0


def generated(args: argparse.Namespace) -> int:
    """`--space generated:COUNT[:SEED]`: a draw of the space generator (seed 0: the score; any
    other: a fresh draw), every method at the autopilot's launches per seed, one table, then the
    mean over the draw."""
    try:
        from benchmarks import space_generator
    except ModuleNotFoundError:  # run as a script: benchmarks/ itself is on the path
        import space_generator  # type: ignore[no-redef]

    try:
        _, count_text, *rest = args.space.split(":")
        count, seed = int(count_text), int(rest[0]) if rest else 0
        if len(rest) > 1 or not 1 <= count <= 1000 or args.profile:
            raise ValueError
    except ValueError:
        print(
            "efficiency: --space generated:COUNT[:SEED] (COUNT 1-1000, no --profile)",
            file=sys.stderr,
        )
        return 2
    spaces = space_generator.draw(count, seed)
    labs = [Lab(args.max_tokens, args.noise, str(s.write())) for s in spaces]
    seeds = range(args.seeds)
    every = ("autopilot", "random search, same launches", "Optuna TPE, same launches")
    methods: tuple[str, ...] = every[:2] if args.without_tpe else every
    per: dict[str, list[tuple[Lab, list[Outcome]]]] = {m: [] for m in methods}
    if not args.json:
        print(
            f"generated draw {seed}: {count} spaces (benchmarks/space_generator.py); noise "
            f"{args.noise:.1%} per point; {args.seeds} seeds; {args.max_tokens}-token answers"
        )
        print(
            "| space | configurations | f*/f0 | method | launches (mean) | gain reached (mean) "
            "| worst | deployed within 2 % of f* |"
        )
        print("|---|---|---|---|---|---|---|---|")
    for space, lab in zip(spaces, labs, strict=True):
        ours = [autopilot(lab, s, args.side_by_side) for s in seeds]
        budgets = [o.launches for o in ours]
        runs = {
            methods[0]: ours,
            methods[1]: [random_search(lab, s, b) for s, b in zip(seeds, budgets, strict=True)],
        }
        if not args.without_tpe:
            runs[methods[2]] = [tpe(lab, s, b) for s, b in zip(seeds, budgets, strict=True)]
        for name, outcomes in runs.items():
            per[name].append((lab, outcomes))
            if not args.json:
                s = stats_of(lab, outcomes)
                print(
                    f"| {space.name} | {len(lab.configs)} | {lab.fstar / lab.f0:.2f} | {name} | "
                    f"{s['launches_mean']:.1f} | {s['gain_mean']:.3f} | {s['gain_worst']:.3f} | "
                    f"{s['within_2pct']}/{s['seeds']} |",
                    flush=True,
                )
    means = {name: draw_mean(rows) for name, rows in per.items()}
    if args.json:
        print(json.dumps({"space": args.space, "noise": args.noise, "methods": means}))
        return 0
    print()
    print(f"mean over the {count} spaces of draw {seed}:")
    print(
        "| method | launches (mean) | gain reached (mean) | worst space (its mean) | worst seed "
        "| deployed within 2 % of f* | spaces at or above the others' best - 0.01 |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, m in means.items():
        print(
            f"| {name} | {m['launches_mean']:.1f} | {m['gain_mean']:.3f} | "
            f"{m['worst_space']:.3f} | {m['gain_worst']:.3f} | {m['within_2pct']} | "
            f"{sum(ahead(per, name, i) for i in range(count))}/{count} |"
        )
    return 0


def draw_mean(rows: list[tuple[Lab, list[Outcome]]]) -> dict[str, Any]:
    """A method over a draw: the mean of its per-space means, the worst space and seed."""
    each = [stats_of(lab, outcomes) for lab, outcomes in rows]
    return {
        "launches_mean": round(statistics.mean(s["launches_mean"] for s in each), 2),
        "gain_mean": round(statistics.mean(s["gain_mean"] for s in each), 4),
        "worst_space": round(min(s["gain_mean"] for s in each), 4),
        "gain_worst": round(min(s["gain_worst"] for s in each), 4),
        "within_2pct": f"{sum(s['within_2pct'] for s in each)}/{sum(s['seeds'] for s in each)}",
        "per_space": [s["gain_mean"] for s in each],
    }


def ahead(per: dict[str, list[tuple[Lab, list[Outcome]]]], name: str, i: int) -> bool:
    """Whether `name`'s mean gain on space i is at least every other method's - 0.01."""
    mine = statistics.mean(per[name][i][0].gain(o.chosen) for o in per[name][i][1])
    others = [
        statistics.mean(rows[i][0].gain(o.chosen) for o in rows[i][1])
        for other, rows in per.items()
        if other != name
    ]
    return mine >= max(others) - 0.01


if __name__ == "__main__":
    sys.exit(main())
