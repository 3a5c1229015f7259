"""run_benchmark: sweep a running server (by name) or a URL over concurrency levels or request
rates, with random prompts or a dataset's (tools/bench/datasets.py).

The result JSON goes to the run's results/<id>.json, a line to the ledger (<runs-dir>/ledger.jsonl)
and a `benchmark` event to the run's log; the model gets a compact table and the file's path. A
result whose every level failed is saved too, and answered as an error with the reason.

Each call sends prompts no earlier call sent: the prompt seed comes from the config's seed, the
run, the event the call follows and the result id - the same in a replay of the run's log (which
sends nothing), different after a resume (later events). The server's engine profile adds its
request fields (llama.cpp: cache_prompt false) and names its tokenizer endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field

from tools.base import Tool, ToolContext, ToolError, ToolInput, ToolResult
from tools.bench import results, workload_options
from tools.bench.deadlines import Deadlines
from tools.bench.energy import HostPower, launch_gpus
from tools.bench.floor import served_of, stated_physics
from tools.bench.level_traffic import requests_at_rate
from tools.bench.random_prompts import sweep_seed
from tools.bench.rate_search import START_RATE, RateSearch, find_max_rate
from tools.bench.remote import run_remote
from tools.bench.schema import ClientInfo, ServerRef, Workload, level_name
from tools.bench.sweep import (
    BenchError,
    Observer,
    SweepOutcome,
    SweepSpec,
    discover_model,
    run_sweep,
)
from tools.benchmark_outcome import BenchProgress, record
from tools.domain import engines
from tools.domain.gpus import gpus_of
from tools.domain.physics import Physics
from tools.hosts.base import HostError
from tools.learned_deadline import served_ttft_s
from tools.servers.profiles import ENGINES, Engine, ProfileError, engine_for

MAX_LEVEL = 4096


class RunBenchmarkInput(ToolInput):
    server: str | None = Field(
        default=None,
        description="Name of a server started with start_server; default: the only one running",
    )
    url: str | None = Field(
        default=None, description="Base URL of an OpenAI-compatible server, instead of `server`"
    )
    concurrency: list[int] | None = Field(
        default=None,
        min_length=1,
        description="Concurrency levels, e.g. [1, 10, 100]; default: the config's sweep",
    )
    requests_per_level: int | None = Field(
        default=None, ge=1, description="Requests per level; default max(5 x C, 10)"
    )
    input_len: int | None = Field(
        default=None, ge=1, description="Prompt tokens; default from config"
    )
    max_tokens: int | None = Field(
        default=None, ge=1, description="Output tokens; default from config"
    )
    label: str | None = Field(
        default=None,
        max_length=60,
        description="Short name for the result, e.g. 'eagle3-steps3'; 'pair-...' for a launch "
        "pair's sweep (recommend reads those)",
    )
    dataset: str | None = Field(
        default=None,
        description="Prompts: random, chat or code (built-in), sharegpt:FILE or jsonl:FILE; "
        "default from config. With a dataset the output lengths are the data's unless max_tokens "
        "is given",
    )
    request_rate: list[Annotated[float, Field(gt=0)]] | None = Field(
        default=None,
        min_length=1,
        description="Open-loop request rates (req/s), e.g. [5, 20, 80], instead of concurrency",
    )
    burstiness: Annotated[float, Field(gt=0)] | Literal["constant"] | None = Field(
        default=None, description="With request_rate: 1 = Poisson (default), <1 burstier"
    )
    duration_s: float | None = Field(default=None, gt=0, description="Seconds per level")
    slo: dict[Literal["ttft_ms", "tpot_ms", "e2el_ms"], Annotated[float, Field(gt=0)]] | None = (
        Field(
            default=None,
            description='Per-request limits for goodput, e.g. {"ttft_ms": 200, "tpot_ms": 50}',
        )
    )
    shared_prefix: int | None = Field(
        default=None,
        ge=0,
        le=100_000,
        description="Tokens of a system prompt every request shares (a prefix cache serves it)",
    )
    multi_turn: bool = Field(
        default=False,
        description="Replay the dataset's conversations turn by turn, each turn resending the "
        "history (sharegpt:FILE or jsonl:FILE with messages; concurrency levels only)",
    )
    find_max_rate: bool = Field(
        default=False,
        description="Search the highest request rate whose p99 latencies meet the SLO (`slo` or "
        "the config's), starting at request_rate[0] (default 1 req/s); the answer is the "
        "result's first note",
    )
    warmup: bool = Field(
        default=False,
        description="A warm-up pass before the first measured sweep of a fresh launch: sent as "
        "asked, then thrown away - no result, no ledger line, nothing compare, recommend or the "
        "noise floor reads",
    )


class RunBenchmark(Tool):
    name = "run_benchmark"
    Input = RunBenchmarkInput

    async def run(self, ctx: ToolContext, inp: RunBenchmarkInput) -> ToolResult:
        bench = ctx.config.bench
        if inp.concurrency and inp.request_rate:
            raise ToolError("give `concurrency` or `request_rate`, not both")
        rates = inp.request_rate or (None if inp.concurrency else bench.request_rate)
        if inp.warmup and inp.find_max_rate:
            raise ToolError("a warm-up sends fixed levels: drop find_max_rate")
        if inp.find_max_rate:
            if inp.concurrency:
                raise ToolError("find_max_rate searches request rates: drop `concurrency`")
            rates = (rates or [START_RATE])[:1]  # where the search starts
        levels = inp.concurrency or list(bench.concurrency)
        bad = [c for c in levels if c < 1 or c > MAX_LEVEL]
        if bad:
            raise ToolError(f"concurrency levels must be 1..{MAX_LEVEL}, got {bad}")
        if inp.server and inp.url:
            raise ToolError("give `server` or `url`, not both")
        server, host_name = (
            (ServerRef(url=inp.url), None) if inp.url else locate_server(ctx, inp.server)
        )
        workload = workload_of(ctx, inp, rates)
        if inp.find_max_rate and not workload.slo_ms:
            raise ToolError('find_max_rate needs an SLO: `slo` {"ttft_ms": ...} or [bench] slo')
        if rates:
            levels = [requests_at_rate(r, workload) for r in rates]
        label = inp.label or server.name or "url"
        results_dir = ctx.run.path / "results"
        result_id = results.new_id(results_dir, label)
        prompt_seed = sweep_seed(bench.seed, ctx.run.id, ctx.run.state.last_seq, result_id)
        client = ClientInfo(where="controller")
        search: RateSearch | None = None
        observer = BenchProgress(ctx, result_id, server.name or result_id, len(levels))
        try:
            if bench.client == "remote" and server.name is not None:
                timed = workload.duration_s or bench.min_level_s
                if rates or workload.dataset != "random" or timed:
                    raise ToolError(
                        "bench.client 'remote' runs the remote command's own workload: datasets, "
                        "request rates, durations and min_level_s need the built-in client"
                    )
                client = ClientInfo(
                    kind="remote-command",
                    where="remote",
                    processes=0,
                    event_loop="",
                    host=host_name or "",
                    remote_command=bench.remote_command,
                )
                outcome = await self._remote(
                    ctx, server, host_name, workload, levels, result_id, observer, prompt_seed
                )
            else:
                server.url = inp.url or await reach_server(ctx, server, host_name or "local")
                if host_name and not _is_local(ctx, host_name):
                    client.where = "forward" if bench.client == "forward" else "controller"
                engine = engine_of(ctx, server)
                workload.cache_reset = engine.cache_reset_path if engine else None
                workload.min_level_s = min_level_s(bench.min_level_s, engine)
                spec = SweepSpec(
                    url=server.url,
                    levels=levels,
                    rates=rates,
                    workload=workload,
                    prompt_seed=prompt_seed,
                    extra_body=engine.extra_body if engine else None,
                    tokenize_path=engine.tokenize_path if engine else "/tokenize",
                    metrics_path=engine.metrics_path if engine else "/metrics",
                    metrics=engine.profile.metrics if engine else None,
                    deadlines=deadlines_for(ctx, server, workload, levels, rates),
                )
                spec.power, spec.no_power = _power(ctx, server, host_name)
                spec.physics, spec.no_physics = await _physics(ctx, server, host_name, engine)
                client.connect_timeout_s, client.stall_timeout_s = (
                    spec.connect_timeout_s,
                    spec.stall_timeout_s,
                )
                client.deadlines = spec.deadlines.to_job()
                if inp.find_max_rate:
                    assert rates is not None
                    search = await find_max_rate(spec, observer, rates[0])
                    outcome = search.outcome
                    outcome.notes.insert(0, search.summary(workload.slo_ms))
                    rates = [float(p["request_rate"]) for p in outcome.points]
                    levels = [int(p["max_concurrency"]) for p in outcome.points]
                else:
                    outcome = await run_sweep(spec, observer)
                client.processes = outcome.processes
                client.event_loop = "uvloop" if outcome.processes else "asyncio"
        except BenchError as err:
            raise ToolError(str(err)) from None
        if inp.warmup:
            if outcome.interrupted:
                raise asyncio.CancelledError
            return warmed_up(server.name or server.url or "", outcome)
        workload.model, workload.dataset_digest = outcome.model, outcome.dataset_digest
        result = results.build_result(
            result_id=result_id,
            server=server,
            workload=workload,
            client=client,
            levels=levels,
            points=outcome.points,
            label=label,
            run_id=ctx.run.id,
            interrupted=outcome.interrupted,
            notes=outcome.notes,
            physics=outcome.physics,
        )
        result.prompts = outcome.prompts
        result.request_rates = list(rates or [])
        if search is not None and result.__pydantic_extra__ is not None:
            result.__pydantic_extra__["rate_search"] = {"slo_ms": workload.slo_ms, **search.data()}
        text, data = record(ctx, result, results_dir)
        if outcome.interrupted:
            raise asyncio.CancelledError  # saved; now let the interruption go on
        if result.failed:  # nothing was measured: not a result to compare or recommend
            reason = f"benchmark failed at every level: {result.failure_reason()}"
            return ToolResult(text=f"{reason}\n{text}", is_error=True, data=data)
        return ToolResult(text=text, data=data)

    async def _remote(
        self,
        ctx: ToolContext,
        server: ServerRef,
        host_name: str | None,
        workload: Workload,
        levels: list[int],
        tag: str,
        observer: Observer,
        prompt_seed: int,
    ) -> SweepOutcome:
        bench = ctx.config.bench
        if not bench.remote_command:
            raise ToolError(
                "bench.client is 'remote' but bench.remote_command is not set in the config"
            )
        if ctx.hosts is None:
            raise ToolError("bench.client is 'remote' but no host pool is available")
        port = server.port or 0
        server.url = f"http://127.0.0.1:{port}"  # as the host sees its own server
        model = workload.model
        if not model:
            try:  # ask the server through the controller's route
                url = await reach_server(ctx, server, host_name or "local")
                model = await discover_model(url, "", 15)
            except (BenchError, ToolError) as err:
                raise ToolError(f"{err}; or set server.model in the config") from None
        host = ctx.hosts.get(host_name or "local")
        return await run_remote(
            host,
            bench.remote_command,
            server.url,
            model,
            levels,
            workload.input_len,
            workload.max_tokens,
            workload.requests_per_level,
            prompt_seed,
            tag,
            observer=observer,
        )


def warmed_up(server: str, outcome: SweepOutcome) -> ToolResult:
    """A warm-up's answer: what was sent and served, and that none of it is a measurement."""
    sent = sum(int(p.get("num_prompts") or 0) for p in outcome.points)
    done = sum(int(p.get("completed") or 0) for p in outcome.points)
    levels = ", ".join(level_name(p) for p in outcome.points) or "none"
    text = (
        f"warm-up of {server} done: {levels}, {done} of {sent} requests completed; not recorded "
        "as a sweep (no result, nothing to compare) - measure now"
    )
    failed = [p["max_concurrency"] for p in outcome.points if p.get("level_failed")]
    if failed:
        text += f"\nfailed during the warm-up at C={', '.join(map(str, failed))}: read the log"
    data = {"warmup": True, "server": server, "sent": sent, "completed": done, "failed": failed}
    return ToolResult(text=text, data=data, is_error=bool(outcome.points) and done == 0)


# --- where a server is (the duet tool's too) ---------------------------------------------------
def locate_server(ctx: ToolContext, name: str | None) -> tuple[ServerRef, str]:
    """A server this run started, by name (None: the only one running, else the config's), and
    its host's name."""
    servers: dict[str, dict[str, Any]] = ctx.run.state.servers
    if name is None:
        if len(servers) == 1:
            name = next(iter(servers))
        elif ctx.config.server.name in servers:
            name = ctx.config.server.name
        elif not servers:
            raise ToolError(
                "no server is running in this run: start one with start_server, or give `url`"
            )
        else:
            raise ToolError(
                f"several servers are running ({', '.join(servers)}): name one with `server`"
            )
    if name not in servers:
        running = ", ".join(servers) or "none"
        raise ToolError(
            f"no running server named {name!r} (running: {running}); start it with start_server"
        )
    s = servers[name]
    ref = ServerRef(
        name=name,
        host=s.get("host"),
        engine=s.get("engine"),
        engine_version=s.get("engine_version"),
        command=s.get("command"),
        flags=s.get("flags") or {},
        port=s.get("port"),
    )
    return ref, s.get("host") or "local"


async def reach_server(ctx: ToolContext, server: ServerRef, host_name: str) -> str:
    """The URL this process reaches `server` at: its port on loopback, the host's address, or a
    port forwarded from the host."""
    port = server.port or 0
    if not port:
        raise ToolError(
            f"server {server.name!r} has no port recorded; restart it with start_server"
        )
    if _is_local(ctx, host_name):
        return f"http://127.0.0.1:{port}"
    if ctx.config.bench.client == "local":  # straight to the host's address
        return f"http://{_ssh_hostname(ctx, host_name)}:{port}"
    if ctx.hosts is None:
        raise ToolError(
            f"host {host_name!r} is remote and no host pool is available to forward a port"
        )
    try:
        local_port = await ctx.hosts.get(host_name).forward_port(port)
    except Exception as err:
        raise ToolError(f"cannot forward port {port} from host {host_name!r}: {err}") from None
    return f"http://127.0.0.1:{local_port}"


def workload_of(ctx: ToolContext, inp: RunBenchmarkInput, rates: list[float] | None) -> Workload:
    """The call's workload: its own options over the config's [bench] section."""
    bench = ctx.config.bench
    try:
        dataset = workload_options.dataset(inp.dataset or bench.dataset)
    except workload_options.OptionError as err:
        raise ToolError(str(err)) from None
    lengths = "fixed" if inp.max_tokens else bench.lengths
    slo = inp.slo if inp.slo is not None else bench.slo
    return Workload(
        endpoint=bench.endpoint,
        model=getattr(ctx.config.server, "model", None) or "",
        input_len=inp.input_len or bench.input_len,
        max_tokens=inp.max_tokens or bench.max_tokens,
        dataset=dataset,
        lengths=lengths or ("fixed" if dataset == "random" else "data"),
        seed=bench.seed,
        requests_per_level=inp.requests_per_level or bench.requests_per_level,
        warmup_requests=bench.warmup_requests,
        traffic="rate" if rates else "concurrency",
        burstiness=inp.burstiness or bench.burstiness,
        duration_s=inp.duration_s or bench.duration_s,
        slo_ms={workload_options.SLO_KEYS[k]: v for k, v in slo.items()},
        shared_prefix=bench.shared_prefix if inp.shared_prefix is None else inp.shared_prefix,
        # the config's multi_turn goes with the config's dataset; a call naming a dataset decides
        multi_turn=inp.multi_turn or (bench.multi_turn and inp.dataset is None and not rates),
    )


def deadlines_for(
    ctx: ToolContext,
    server: ServerRef,
    workload: Workload,
    levels: list[int],
    rates: list[float] | None,
) -> Deadlines:
    """[bench.deadlines], the first-token deadline tightened where this server or the baseline
    served every level before (tools/learned_deadline.py); an open loop's levels: as given."""
    deadlines = Deadlines.from_job(ctx.config.bench.deadlines.given())
    baseline = ctx.config.search.get("baseline")
    ttft_s = (
        None
        if rates
        else served_ttft_s(
            ctx.run.state.results,
            server,
            workload,
            levels,
            baseline if isinstance(baseline, dict) else None,
        )
    )
    return deadlines if ttft_s is None else deadlines.served(ttft_s)


def trial_deadlines(
    ctx: ToolContext, flags: dict[str, Any], groups: list[tuple[list[int], Workload]]
) -> list[Deadlines]:
    """A fleet trial's deadlines, one per group of levels: as deadlines_for, with every earlier
    trial of these flags (each launch has a name of its own) and the baseline's."""
    baseline = ctx.config.search.get("baseline")
    static = Deadlines.from_job(ctx.config.bench.deadlines.given())
    out = []
    for levels, workload in groups:
        ttft_s = served_ttft_s(
            ctx.run.state.results,
            ServerRef(name="trial", flags=flags),
            workload,
            levels,
            baseline if isinstance(baseline, dict) else None,
            any_name=True,
        )
        out.append(static if ttft_s is None else static.served(ttft_s))
    return out


def min_level_s(configured: float | None, engine: Engine | None) -> float | None:
    """The least a closed level lasts (Engine.level_minimum); for a bare URL, whose engine is
    not known, [bench] min_level_s alone."""
    if engine is None:
        return configured or None
    return engine.level_minimum(configured)


def engine_of(ctx: ToolContext, server: ServerRef) -> Engine | None:
    """The engine profile of a server started in this run; None for a bare URL."""
    if server.name is None:
        return None
    try:
        if server.name == ctx.config.server.name:
            return engine_for(ctx.config)
    except ProfileError:
        pass
    return ENGINES.get(server.engine or "")


def _power(
    ctx: ToolContext, server: ServerRef, host_name: str | None
) -> tuple[HostPower | None, str]:
    """Where the server's GPUs' power is read: nvidia-smi on its host, over the GPUs its launch
    was given (CUDA_VISIBLE_DEVICES), else all; else why not (a simulator models its own)."""
    if host_name is None:
        return None, "a bare URL: the server's host is not known, so there is no nvidia-smi to read"
    if ctx.hosts is None:
        return None, "no host pool in this run to read the server's host's nvidia-smi"
    try:
        host = ctx.hosts.get(host_name)
    except HostError as err:
        return None, f"host {host_name!r}: {err}"
    return HostPower(host, launch_gpus(server.command)), ""


async def _physics(
    ctx: ToolContext, server: ServerRef, host_name: str | None, engine: Engine | None
) -> tuple[Physics | None, str | None]:
    """What agent.toml's [hardware] states of the server's box and model (tools/bench/floor.py;
    an engine's own /server_info wins in the sweep), over the GPUs its flags ask for, in the
    dtypes its command and flags serve in."""
    hardware = ctx.config.hardware
    if hardware is None:
        return None, None
    devices = gpus_of(server.flags, engine.profile.parallelism if engine else None)
    host = None
    if host_name is not None and ctx.hosts is not None:
        with contextlib.suppress(HostError):
            host = ctx.hosts.get(host_name)
    precision = engine.profile.precision if engine else engines.precision(server.engine)
    served = served_of(precision, server.command, server.flags)
    return await stated_physics(hardware, devices, host, served=served)


def _is_local(ctx: ToolContext, host_name: str) -> bool:
    try:
        return bool(ctx.config.host(host_name).address == "local")
    except KeyError:
        return host_name == "local"


def _ssh_hostname(ctx: ToolContext, host_name: str) -> str:
    address = ctx.config.host(host_name).address
    return urlsplit(address).hostname or address
