"""The report's sections on how far to trust it: failed and crashed configurations, the noise
floor (tools/domain/stats.py; docs/statistics.md), and the caveats."""

from __future__ import annotations

from agent.report.figures import NOISY_LEVEL, Figures, api_waits
from agent.report.measured import Configuration, flags_change
from agent.report.render import Block, Bullets, Heading, Para, Table
from tools.bench import results
from tools.domain import stats
from tools.domain.decision import at_level


def failed(f: Figures) -> list[Block]:
    out: list[Block] = [Heading(2, "Failed and crashed configurations")]
    rows = []
    for fail in f.m.failures:
        change = flags_change(fail.flags, f.m.base_flags) if fail.flags is not None else "-"
        excerpt = " / ".join(line.strip() for line in fail.excerpt.splitlines() if line.strip())
        rows.append([fail.name, change, fail.diagnosis, excerpt[-200:] or "-"])
    for c in f.m.configs:
        if c.failed_levels:
            levels = ",".join(map(str, c.failed_levels))
            reason = f"every request failed at C={levels}"
            rows.append([c.name, flags_change(c.flags, f.m.base_flags), reason, level_errors(c)])
    if not rows:
        return [*out, Para("None: every configuration started and every level measured.")]
    return [*out, Table(["server", "change from the baseline", "reason", "error, log"], rows)]


def level_errors(c: Configuration) -> str:
    """What the requests of its failed levels failed with: per sweep that failed, the commonest
    error and its message (BenchResult.failure_reason over the failed levels only)."""
    said = []
    for r in c.runs:
        points = [p for p in r.points if p.level_failed]
        if points:
            said.append(r.model_copy(update={"points": points}).failure_reason())
    return "; ".join(dict.fromkeys(said))[:300] or "-"


def _names(configs: list[Configuration], most: int = 4) -> str:
    names = [c.name for c in configs]
    more = len(names) - most
    return ", ".join(names[:most]) + (f" and {more} more" if more > 0 else "")


def noise(f: Figures) -> list[Block]:
    out: list[Block] = [Heading(2, "Noise floor")]
    if not f.level_floors:
        text = "Unknown: no configuration was measured twice; small differences may be noise."
        return [*out, Para(text)]
    levels = ",".join(map(str, f.versus.levels)) if f.versus else "the baseline's levels"
    out.append(
        Para(
            f"Repeated sweeps of {_names(f.repeated)} give the noise floor of the objective: "
            f"**{stats.percent(f.floor)}** (over C={levels}): a ratio to the baseline within "
            "1 ± this is not a win. Per level, twice the root mean square of the relative "
            "differences between consecutive sweeps of one configuration (docs/statistics.md):"
        )
    )
    rows = [[str(c), stats.percent(v)] for c, v in f.level_floors.items()]
    out.append(Table(["C", "noise floor at this level"], rows, right={0, 1}))
    return out


def drift_text(f: Figures) -> str | None:
    """The machine drifted: the baseline's own sweeps moved more than the noise floor - how much,
    between which sweeps, and what that means for every unpaired ratio (None: it did not)."""
    seen = f.drifted
    if seen is None:
        return None
    d = seen.drift
    where = ",".join(map(str, d.levels))
    what = "geomean output tok/s" if len(d.levels) > 1 else "output tok/s"

    def sweep(t: results.TimedSweep, value: float) -> str:
        return f"{value:,.1f} ({t.names}, finished {_clock(t.finished)})"

    return (
        f"the baseline's {what} over C={where} went from {sweep(seen.earlier, d.earlier_value)} "
        f"to {sweep(seen.later, d.later_value)}: {100 * d.change:+.1f} %; the faster of the two "
        f"is {100 * d.size:.1f} % above the slower, more than the noise floor "
        f"({stats.percent(f.floor)}). The machine drifted: {results.DRIFT_NOTE}."
    )


def _clock(ts: str) -> str:
    """A result's `created` as the reader's clock (UTC, to the second)."""
    return ts[11:19] + " UTC" if len(ts) >= 19 else ts or "?"


def drift_warning(f: Figures) -> list[Block]:
    """Near the top, after `incomplete`: a drift undermines every conclusion below it."""
    text = drift_text(f)
    return [] if text is None else [Para(f"**Drift:** {text[0].upper()}{text[1:]}")]


def incomplete(f: Figures) -> list[Block]:
    """Above everything else: a report of a run that did not finish must not read as final."""
    if f.m.status == "running":
        text = "The campaign is still running (or was interrupted): this is an interim report."
    elif f.m.status != "finished":
        text = f"The campaign ended with status `{f.m.status}`: its results may be incomplete."
    else:
        return []
    return [Para(f"**Warning:** {text} What follows is what was measured until then.")]


def caveats(f: Figures) -> list[Block]:
    items = []
    base, win = f.baseline, f.winner
    if f.m.recommendation is None and win is not None:
        items.append("No recommendation.json: the winner is the best measured geometric mean.")
    if win is not None and win is not base and win.launches < 2:
        items.append("The winner was measured on one launch only: it was not re-validated.")
    if base is not None and win is not None and win is not base:
        within = [
            c
            for c, r in f.level_ratios(win).items()
            if at_level(r, f.level_floors.get(c)) == "within noise"
        ]
        if within:
            where = ",".join(map(str, within))
            items.append(f"At C={where} the difference is within the noise floor.")
        missing = sorted(set(base.levels) - set(win.levels))
        if missing:
            items.append(f"The winner was not measured at C={','.join(map(str, missing))}.")
    if f.drifted is not None:
        size = f.drifted.drift.size
        items.append(
            f"The machine drifted ({100 * size:.1f} % between the baseline's own sweeps, above "
            "the noise floor): only paired comparisons should count (see the warning at the top)."
        )
    waits = api_waits(f.m.events)
    if waits is not None:
        gave_up = f.m.status == "model_unavailable"
        items.append(
            f"The model API was unavailable: the run {'waited' if gave_up else 'waited out'} "
            f"{waits.text()}" + (", then gave up (`agent resume` goes on)." if gave_up else ".")
        )
    items += _noise_caveats(f)
    if any(not ok for c in f.m.configs for ok in c.from_file):
        items.append("Some result files are missing (a replayed session): figures are the events'.")
    for m in f.m.state.supervisor:  # steering changes what was explored: the reader must know
        items.append(f'The supervisor said (event {m["seq"]}): "{m["text"]}".')
    return [Heading(2, "Caveats"), Bullets(items or ["None noted."])]


def _noise_caveats(f: Figures) -> list[str]:
    items = []
    for r in f.m.results:
        failed = {p.max_concurrency: p.failed for p in r.points if p.failed}
        if failed:
            where = ", ".join(f"C={c}: {n}" for c, n in sorted(failed.items()))
            name = f"{r.id} ({r.label})" if r.label else r.id
            items.append(f"{name}: {sum(failed.values())} failed requests ({where}).")
    for c, v in f.noisy_levels.items():
        items.append(
            f"The noise floor at C={c} is {stats.percent(v)} (over {NOISY_LEVEL:.0%}): "
            "a ratio at that level says little."
        )
    once = [c for c in f.m.configs if len(c.sweeps) == 1]
    if once and f.level_floors:
        items.append(
            f"{len(once)} of {len(f.m.configs)} configurations were measured by one sweep only "
            f"({_names(once)}): each of their figures has the noise of one sweep."
        )
    elif not f.level_floors:
        items.append("No configuration was measured twice: the noise floor is unknown.")
    return items
