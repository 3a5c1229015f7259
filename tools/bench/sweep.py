"""A sweep: the levels in order against one server, each a closed loop, into flat points.

Before the first level the server is checked (reachable within the connect timeout, the model
name from /v1/models when none is given), so a wrong URL is one clear error, not a level of
failures, and the prompt length is calibrated where the server can tokenize (prompt_length.py).
A level where more than 1 % of the requests failed is kept, marked `level_failed`. Every wait
has a deadline (tools/bench/deadlines.py): each probe before the levels as a whole, each request
(head, first token, total), each level; a level cut by its deadline is kept, failed, with
`level_deadline` among its errors and a note; a closed level whose first request per stream
waited out its deadlines with no token and no success sends no more (`abandoned`), and a level
that got no token at all ends the sweep (a note names the levels not run). On
cancellation (Ctrl-C) the requests of the current level that finished become a point marked
`interrupted` and the sweep returns what it has, with `interrupted` set.

Prompts: each level draws from `prompt_seed` (default: the workload's seed); a caller that
sweeps one server more than once gives each sweep its own (random_prompts.sweep_seed), or the
server's prefix cache answers the repeats.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from dataclasses import dataclass, field
from typing import Any

import httpx

from tools.bench import datasets
from tools.bench.deadlines import ABANDONED, LEVEL_DEADLINE, WAITED_OUT, Deadlines
from tools.bench.energy import HostPower, LevelPower, joules_per_token, no_power_note
from tools.bench.floor import describe, engine_physics, with_floor
from tools.bench.http import BadURL, Target
from tools.bench.level_traffic import (
    add_samples,
    check_traffic,
    level_name,
    min_level_s,
    owed,
    pool_for,
    requests_at_rate,
    requests_for,
    reuse_note,
    traffic_keys,
)
from tools.bench.loadgen import LevelRun, connect_error
from tools.bench.metrics import DEFAULT_PERCENTILES, FAILED_SHARE, compute_point
from tools.bench.openloop import arrivals
from tools.bench.prefix import reset_cache, shared_prefix_text
from tools.bench.prompt_length import PromptLength, calibrate
from tools.bench.request_record import RequestRecord
from tools.bench.schema import Point, Workload
from tools.bench.server_metrics import Sampler
from tools.bench.server_metrics import note as metrics_note
from tools.bench.shard import ShardError, ShardPool, level_requests, run_plan
from tools.bench.timescale import point_to_model_time, server_info, time_scale_of
from tools.domain.engines import Metrics
from tools.domain.physics import Physics

SATURATED_CPU_PERCENT = 50.0  # one client process above this share of a core: add processes
# the parent's own backstop over a level's deadline (the level itself runs in a client process,
# which keeps it): time for that process to cut the level and send its records back
LEVEL_GRACE_S = 10.0
SILENT = WAITED_OUT | {ABANDONED, LEVEL_DEADLINE}  # a level that got nothing ends the sweep


class BenchError(Exception):
    """A benchmark that cannot start (bad URL, server unreachable); one line for the user."""


class Observer:
    """Progress callbacks; the default does nothing."""

    def level_start(self, level: int, requests: int) -> None: ...
    def progress(self, level: int, done: int) -> None: ...
    def level_end(self, level: int, point: dict[str, Any]) -> None: ...


@dataclass
class SweepSpec:
    url: str
    levels: list[int]  # concurrency levels; with `rates`, ignored
    workload: Workload
    rates: list[float] | None = None  # request rates (req/s): open-loop levels instead
    processes: int | None = (
        None  # client processes; None: start with one, add where it pays; 0: in-process
    )
    connect_timeout_s: float = 10.0
    stall_timeout_s: float = 300.0
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES
    slo_ms: dict[str, float] | None = None
    prompt_seed: int | None = None  # None: the workload's seed (the same prompts every time)
    extra_body: dict[str, Any] | None = None  # fields added to every request, e.g. cache_prompt
    # POSTed before each level for a cold prefix cache (the engine profile's reset path); None:
    # the workload's `cache_reset`, else no reset
    cache_reset_path: str | None = None
    tokenize_path: str | None = "/tokenize"  # None: one token per word, no calibration
    deadlines: Deadlines = field(default_factory=Deadlines)  # every wait's (deadlines.py)
    # the server's Prometheus /metrics, polled during each level (server_metrics.py); None: not
    metrics_path: str | None = "/metrics"
    # its names there (the engine profile's [metrics]); None: every built-in profile's
    metrics: Metrics | None = None
    # the server's host, for its GPUs' power (energy.py); None: only a simulator's modelled power
    power: HostPower | None = None
    # why there is no host to read, said in the note where the server models no power either
    no_power: str = "the server's host is not known here (nvidia-smi is read on that host)"
    # the box and the model as the caller knows them (agent.toml's [hardware], a CPU host's
    # probe) for each level's floor (floor.py); an engine's own /server_info "physics" wins
    physics: Physics | None = None
    # the note where neither says anything (an unknown device's line); None: no note
    no_physics: str | None = None


@dataclass
class SweepOutcome:
    model: str
    points: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    processes: int = 1
    notes: list[str] = field(default_factory=list)
    prompts: dict[str, Any] = field(default_factory=dict)  # how the prompts were made
    dataset_digest: str = ""  # a file dataset's content hash, for the result's workload
    physics: dict[str, Any] | None = None  # what each point's floor was computed from


async def discover_model(url: str, model: str, timeout: float, total_s: float = 30.0) -> str:
    """Check the server answers; return the model to request (the first of /v1/models, read
    whole within `total_s`: a trickled body is not an answer)."""
    try:
        target = Target.parse(url)
    except BadURL as err:
        raise BenchError(str(err)) from None
    try:
        conn = await target.connect(timeout)
        conn.close()
    except (OSError, TimeoutError) as err:
        raise BenchError(connect_error(target, err, timeout)) from None
    if model:
        return model
    limits = httpx.Timeout(timeout, read=30.0)
    try:
        async with asyncio.timeout(total_s), httpx.AsyncClient(timeout=limits) as client:
            resp = await client.get(f"{target.url}/v1/models")
    except TimeoutError:
        raise BenchError(
            f"{target.url}/v1/models did not answer within {total_s:g} s: pass the model name "
            "explicitly, or check the server"
        ) from None
    except httpx.HTTPError as err:
        raise BenchError(
            f"cannot read {target.url}/v1/models: {type(err).__name__}: {err}"
        ) from None
    if resp.status_code != 200:
        raise BenchError(
            f"{target.url}/v1/models answered HTTP {resp.status_code}: not an OpenAI-compatible "
            "server, or pass the model name explicitly"
        )
    try:
        data = resp.json()["data"]
        return str(data[0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        kind = resp.headers.get("content-type", "?")
        raise BenchError(
            f"{target.url}/v1/models did not list a model ({kind}): not an OpenAI-compatible "
            "server, or pass the model name explicitly"
        ) from None


@dataclass
class SweepState:
    """What every level of one sweep shares; `pool` and `used` change from level to level."""

    spec: SweepSpec
    obs: Observer
    outcome: SweepOutcome
    wl: Workload  # the spec's, with the model and the dataset's digest filled in
    data: datasets.Dataset
    seed: int
    length: PromptLength
    prefix: str
    reset: str | None
    scale: float  # the server's time scale: figures are converted to the modelled box's
    slo: dict[str, float] | None  # in wall time (the clock the levels run on)
    pool: ShardPool | None = None
    used: int = 0  # dataset samples taken so far: each level takes the next ones
    metrics: bool = True  # False once the server showed it has no usable /metrics
    power: HostPower | None = None  # the spec's, None once its host showed it has no reading
    power_said: bool = False  # the note of no power reading given (once per sweep)
    physics: Physics | None = None  # each level's floor (floor.py), None: no floor


async def run_sweep(spec: SweepSpec, observer: Observer | None = None) -> SweepOutcome:
    """The levels in order (`sweep_level` runs one); stops at a silent level or at Ctrl-C."""
    steps = _steps(spec)
    sw = await start_sweep(spec, observer or Observer())
    procs = sw.outcome.processes  # the first level's client processes
    auto = spec.processes is None and not sw.wl.multi_turn
    max_procs = max(1, (os.cpu_count() or 1) // 2) if auto else procs
    try:
        for at, step in enumerate(steps):
            point = await sweep_level(sw, step, procs)
            if _silent(point):
                rest = steps[at + 1 :]
                if rest:
                    sw.outcome.notes.append(
                        f"{point.name}: no request got a token before its deadlines; the "
                        f"levels after it were not run ({', '.join(f'{r:g}' for r in rest)})"
                    )
                break
            per_proc = (point.client_cpu_percent or 0.0) / max(procs, 1)
            if auto and per_proc > SATURATED_CPU_PERCENT and procs < max_procs:
                procs = min(procs * 2, max_procs)  # more client cores for the next levels
    except asyncio.CancelledError:
        sw.outcome.interrupted = True  # Ctrl-C: the caller gets what was measured
    finally:
        _usage_note(sw.outcome, sw.length)
        reuse_note(sw.outcome.notes, sw.data, sw.used)
        await close_sweep(sw)
    return sw.outcome


async def close_sweep(sw: SweepState) -> None:
    """The sweep's client processes ended, whatever ended the sweep (a shielded close: a
    cancellation does not leave them running)."""
    if sw.pool is not None:
        with contextlib.suppress(Exception):
            await asyncio.shield(sw.pool.close())


async def start_sweep(spec: SweepSpec, obs: Observer) -> SweepState:
    """Before the first level: the dataset, the server's model and time scale, the prompts."""
    try:
        data = datasets.load(spec.workload.dataset)
    except datasets.DatasetError as err:
        raise BenchError(str(err)) from None
    if spec.workload.multi_turn:
        _check_multi_turn(spec, data)
    probe_s = spec.deadlines.probe_s
    model = await discover_model(spec.url, spec.workload.model, spec.connect_timeout_s, probe_s)
    info = await server_info(spec.url, total_s=probe_s)
    scale = time_scale_of(info)
    wl = spec.workload.model_copy(update={"model": model, "dataset_digest": data.digest})
    length = await _length(spec, wl, data)
    auto = spec.processes is None and not wl.multi_turn
    procs = 1 if auto else int(spec.processes or 0)
    if wl.multi_turn:  # one client process: turn order needs one list dispatched in order
        procs = 1 if spec.processes is None else min(procs, 1)
    outcome = SweepOutcome(model=model, processes=procs, dataset_digest=data.digest)
    seed = wl.seed if spec.prompt_seed is None else spec.prompt_seed
    outcome.prompts = {"seed": seed, **length.info(), "extra_body": spec.extra_body or {}}
    prefix = _prefix(wl, seed, length)
    if prefix:
        outcome.prompts["shared_prefix_words"] = len(prefix.split())
    if data.samples:
        outcome.prompts.update(dataset_prompts=len(data.samples), dataset_digest=data.digest)
    if scale != 1.0:
        outcome.notes.append(
            f"the server runs {scale:g}x faster than the box it models (a "
            "simulator): every figure is converted to the modelled box's time"
        )
    slo_ms = spec.slo_ms or wl.slo_ms or None  # in model time; the clock below is the wall's
    slo = {k: v / scale for k, v in slo_ms.items()} if slo_ms else None
    reset = spec.cache_reset_path or wl.cache_reset
    sw = SweepState(spec, obs, outcome, wl, data, seed, length, prefix, reset, scale, slo)
    sw.power = spec.power
    sw.physics = engine_physics(info) or spec.physics
    if sw.physics is None:
        if spec.no_physics:
            outcome.notes.append(spec.no_physics)
    else:
        outcome.physics = sw.physics.to_json()
        outcome.notes.append(describe(sw.physics))
    return sw


async def sweep_level(sw: SweepState, step: float, procs: int) -> Point:
    """One level: its client processes, its job, its attempt, its point recorded in the outcome
    (model time) with the notes a reader must see."""
    spec, wl, outcome = sw.spec, sw.wl, sw.outcome
    if procs > 0 and (sw.pool is None or sw.pool.n != procs):
        if sw.pool is not None:
            await sw.pool.close()
        sw.pool = ShardPool(procs)
        await sw.pool.start()
    rate = float(step) if spec.rates else None
    n = requests_at_rate(step, wl) if rate is not None else pool_for(int(step), wl)
    level = n if rate is not None else int(step)  # an open level: no cap but n
    count = n if rate is not None else requests_for(level, wl)  # the count rule
    sw.obs.level_start(level, count)
    job = _job(spec, wl, level, n, sw.seed, sw.length, sw.scale)
    if rate is None and (least := min_level_s(wl)) is not None:
        job["count"], job["min_s"] = count, least / sw.scale  # the clock below is the wall's
    job["prefix"], job["prefix_tokens"] = sw.prefix, wl.shared_prefix
    if sw.reset:
        failed = await reset_cache(
            spec.url, sw.reset, spec.connect_timeout_s, spec.deadlines.probe_s
        )
        if failed and failed not in outcome.notes:
            outcome.notes.append(failed)
    sw.used = add_samples(job, sw.data, wl, sw.seed, sw.used)
    if rate is not None:
        wall_rate = rate * sw.scale  # the target is in the modelled box's time
        job["send_at"] = arrivals(n, wall_rate, wl.burstiness, f"{sw.seed}/{level}/arrivals")
    job["level_s"] = _level_s(spec, wl, job, sw.scale)
    sampler = _sampler(sw)
    try:
        run = await _attempt(sw, job, rate)
    finally:
        series = await sampler.stop() if sampler is not None else None
        _metrics_problem(sw, sampler)
    measured = compute_point(
        run.records,
        run.duration,
        level,
        wl.max_tokens,
        spec.percentiles,
        sw.slo,
        run.cpu_seconds,
    )
    point = _model_point(measured, rate, wl, run, sw.scale, processes=max(procs, 1))
    point = with_floor(point, sw.physics, wl)
    if series is not None:
        point = point.model_copy(update={"server_metrics": series})
    if sampler is not None:
        point = _energy(sw, point, sampler.power, run)
    elif not sw.power_said:
        sw.power_said = True
        outcome.notes.append(no_power_note(spec.no_power))
    row = _record(sw, point)
    outcome.processes = max(outcome.processes, procs)
    _check(point, level, procs, outcome.notes)
    check_traffic(point, rate, wl, n, outcome.notes)
    sw.obs.level_end(level, row)
    return point


def _sampler(sw: SweepState) -> Sampler | None:
    """The level's sampler of /metrics and power, started; None where it samples neither."""
    path = sw.spec.metrics_path
    url = Target.parse(sw.spec.url).url + path if path and sw.metrics else None
    if url is None and sw.power is None:
        return None
    sampler = Sampler(url, sw.scale, power=sw.power, names=sw.spec.metrics)
    sampler.start()
    return sampler


def _energy(sw: SweepState, point: Point, power: LevelPower, run: LevelRun) -> Point:
    """The level's mean power over its samples between its first dispatch and its last
    completion, and its joules per output token (energy.joules_per_token, over the point's
    duration in the modelled box's time: its tok/s's); without a reading, the note why."""
    if power.problem is not None:
        sw.power = None  # the host has no reading: not asked again in this sweep
    done = run.done
    start = min((r.start for r in done), default=0.0)
    samples = power.during(start, max((r.end for r in done), default=float("inf")))
    if not samples:
        if power.problem is not None or sw.power is None:
            why = power.problem or sw.spec.no_power
            if not sw.power_said:
                sw.power_said = True
                sw.outcome.notes.append(no_power_note(why))
        elif power.missed:
            sw.outcome.notes.append(
                no_power_note(f"{point.name}: every nvidia-smi call ran past its deadline")
            )
        return point
    mean = round(sum(samples) / len(samples), 2)  # as stored: the point's figures agree
    update: dict[str, Any] = {
        "power_source": power.source,
        "power_w": mean,
        "power_samples": len(samples),
    }
    if power.gpus:
        update["power_gpus"] = power.gpus
    jpt = joules_per_token(mean, point.duration, point.total_output_tokens)
    if jpt is not None:
        update["j_per_token"] = round(jpt, 6)
    return point.model_copy(update=update)


def _metrics_problem(sw: SweepState, sampler: Sampler | None) -> None:
    """A server without usable /metrics: one note, and no more sampling in this sweep."""
    if sampler is not None and sampler.problem is not None:
        sw.metrics = False
        sw.outcome.notes.append(metrics_note(sampler.problem))


async def _attempt(sw: SweepState, job: dict[str, Any], rate: float | None) -> LevelRun:
    """The level's requests under its deadline. Returns what it measured, a level cut by the
    deadline included (its unfinished requests failed). On Ctrl-C the requests that finished
    are recorded as an `interrupted` point before the cancellation goes on."""
    level, n = job["level"], job["num_prompts"]
    run = LevelRun()
    try:
        async with asyncio.timeout(job["level_s"] + LEVEL_GRACE_S):
            if sw.pool is not None:
                await sw.pool.run_level(job, functools.partial(sw.obs.progress, level), run)
            else:
                plan = level_requests(job, 0, 1)
                await run_plan(job, plan, run, functools.partial(sw.obs.progress, level))
    except TimeoutError:  # the client process did not cut the level itself: we do
        owes = n if rate is not None else owed(level, sw.wl)
        _cut(run, owes, job["level_s"])
        if sw.pool is not None:
            await sw.pool.close()
            sw.pool = None
    except asyncio.CancelledError:
        done = [r for r in run.done if r.error_kind != "cancelled"]
        if done:  # the requests of this level that finished before Ctrl-C
            measured = compute_point(
                done,
                run.duration,
                level,
                sw.wl.max_tokens,
                sw.spec.percentiles,
                sw.slo,
                run.cpu_seconds or None,
            )
            measured.interrupted = True
            row = _record(sw, _model_point(measured, rate, sw.wl, run, sw.scale))
            sw.obs.level_end(level, row)
        raise
    except ShardError as err:
        raise BenchError(str(err)) from None
    return run


def _model_point(
    point: Point,
    rate: float | None,
    wl: Workload,
    run: LevelRun,
    scale: float,
    processes: int | None = None,
) -> Point:
    """The measured point with what the level adds (its client processes, its traffic keys),
    in the modelled box's time."""
    if processes is not None:
        point = point.model_copy(update={"client_processes": processes})
    return point_to_model_time(traffic_keys(point, rate, wl, run), scale)


def _record(sw: SweepState, point: Point) -> dict[str, Any]:
    """The one place a level's Point becomes the outcome's flat dict (what results, the trial
    outcome over Ray and the observers read): the keys measured, no defaults added."""
    row = point.model_dump(exclude_unset=True)
    sw.outcome.points.append(row)
    return row


def _check_multi_turn(spec: SweepSpec, data: datasets.Dataset) -> None:
    if not data.conversations:
        raise BenchError(
            "multi-turn replay needs a dataset of conversations: sharegpt:FILE or jsonl:FILE"
        )
    if spec.rates:
        raise BenchError(
            "multi-turn replay runs closed loops (--concurrency): an open loop would send a "
            "turn before the answer to the one before it"
        )


def _steps(spec: SweepSpec) -> list[float]:
    if spec.rates is not None:
        if not spec.rates or any(not r > 0 for r in spec.rates):
            raise BenchError(f"request rates must be positive numbers, got {spec.rates}")
        return list(spec.rates)
    if not spec.levels or any(c < 1 for c in spec.levels):
        raise BenchError(f"concurrency levels must be positive integers, got {spec.levels}")
    return [float(c) for c in spec.levels]


async def _length(spec: SweepSpec, wl: Workload, data: datasets.Dataset) -> PromptLength:
    """Random prompts are calibrated on the server's tokenizer; a dataset's lengths are its own."""
    if data.kind != "random":
        return PromptLength(0, 0, "words", f"{data.kind}: each prompt's words and punctuation")
    url = Target.parse(spec.url).url
    return await calibrate(
        url,
        wl.model,
        wl.input_len,
        spec.tokenize_path,
        spec.connect_timeout_s,
        spec.deadlines.probe_s,
    )


def _prefix(wl: Workload, seed: int, length: PromptLength) -> str:
    """The shared system prompt: the calibrated words per token where the server tokenized."""
    per_token = length.words / length.tokens if length.tokens and length.words else 1.0
    return shared_prefix_text(seed, wl.shared_prefix, per_token)


def _job(
    spec: SweepSpec,
    wl: Workload,
    level: int,
    n: int,
    seed: int,
    length: PromptLength,
    scale: float,
) -> dict[str, Any]:
    return {
        "url": spec.url,
        "endpoint": wl.endpoint,
        "model": wl.model,
        "words": length.words,
        "prompt_tokens": length.tokens,
        "max_tokens": wl.max_tokens,
        "ignore_eos": wl.ignore_eos,
        "temperature": wl.temperature,
        "extra_body": spec.extra_body,
        "seed": seed,
        "level": level,
        "num_prompts": n,
        "warmup": wl.warmup_requests,
        "concurrency": level,
        "deadline_s": None if wl.duration_s is None else wl.duration_s / scale,
        "connect_timeout": spec.connect_timeout_s,
        "stall_s": spec.stall_timeout_s,
        "deadlines": spec.deadlines.to_job(),
    }


def _level_s(spec: SweepSpec, wl: Workload, job: dict[str, Any], scale: float) -> float:
    """The level's deadline (deadlines.py): the spec's, or derived from the level's shape."""
    dl, n, connect = spec.deadlines, job["num_prompts"], spec.connect_timeout_s
    if job.get("send_at"):  # an open level: the schedule's last send, then its answer
        return dl.level_deadline(n, 1, wl.max_tokens, connect, job["send_at"][-1])
    streams = max(1, min(job["concurrency"], n))
    full = dl.level_deadline(n, streams, wl.max_tokens, connect)
    if wl.duration_s is not None and dl.level_s is None:  # a timed level ends sooner
        return min(full, connect + wl.duration_s / scale + 2 * dl.request_s(wl.max_tokens))
    if job.get("min_s") is not None and dl.level_s is None:
        return dl.minimum_level_deadline(
            full, job["count"], streams, wl.max_tokens, connect, job["min_s"]
        )
    return full


def _silent(point: Point) -> bool:
    """Nothing of the level came: every request waited out a deadline with no token (or was not
    sent for it). Higher levels of the same server would wait the same way."""
    return not point.completed and bool(point.errors) and set(point.errors) <= SILENT


def _cut(run: LevelRun, n: int, level_s: float) -> None:
    """The parent's backstop: the level's records as far as they came back, the rest of its `n`
    failed (0 for a timed level: what it did not send is not part of it)."""
    message = f"the level ran past its deadline of {level_s:g} s"
    for rec in run.records:
        if rec.end == 0 or rec.error_kind == "cancelled":
            rec.success, rec.error_kind, rec.error = False, LEVEL_DEADLINE, message
    for _ in range(max(0, n - len(run.records))):
        rec = RequestRecord()
        rec.fail(LEVEL_DEADLINE, message)
        run.records.append(rec)


def _check(point: Point, level: int, procs: int, notes: list[str]) -> None:
    """Notes a reader of the result must see: failures, a client-bound level, early EOS."""
    name = point.name
    kinds = ", ".join(f"{k} x{v}" for k, v in point.errors.items())
    if point.level_failed and not point.completed:
        notes.append(f"{name}: every request failed ({kinds})")
    elif point.level_failed:
        notes.append(
            f"{name}: {point.failed} of {point.num_prompts} requests failed ({kinds}), "
            f"more than {100 * FAILED_SHARE:g} %: a failed measurement"
        )
    elif point.failed:
        notes.append(f"{name}: {point.failed} of {point.num_prompts} requests failed")
    cpu = point.client_cpu_percent
    if cpu is not None and cpu / max(procs, 1) > 80:
        notes.append(
            f"{name}: the client used {cpu / max(procs, 1):.0f}% of a core per process; "
            "figures may be client-bound"
        )
    if point.early_eos:
        notes.append(f"{name}: {point.early_eos} requests stopped before max_tokens (early EOS)")
    closed = (point.model_extra or {}).get("request_rate") == "inf"
    if closed and not point.level_failed and point.achieved_concurrency < 0.8 * level:
        notes.append(
            f"{name}: achieved concurrency {point.achieved_concurrency:.1f} - the server "
            "admits fewer requests at once, or the level was too short to fill"
        )


def _usage_note(outcome: SweepOutcome, length: PromptLength) -> None:
    """Say so where the tokens were counted from the chunks: never a silent 0 or a silent guess."""
    counted = [p for p in outcome.points if p.get("usage_counted")]
    if not counted:
        return
    levels = ", ".join(level_name(p) for p in counted)
    outcome.notes.append(
        f"usage: counted from chunks at {levels} - the server sent no usage message, so each "
        "text chunk is taken as one token (max_tokens where the server says it stopped at the "
        f"length) and each prompt as {length.tokens} tokens "
        f"({length.method}); throughput is approximate"
    )
