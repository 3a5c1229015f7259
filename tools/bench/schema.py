"""The result JSON (docs/benchmark.md): one file per benchmark under <run>/results/<id>.json.

A Point is one concurrency level with vLLM `bench serve`'s flat keys (a vLLM user reads
`output_throughput`, `mean_ttft_ms`, `p99_itl_ms`, `max_concurrency` as they know them) plus ours.
Where a vLLM key exists its meaning is vLLM's: `failed` is the number of failed requests; the
level's verdict is `level_failed` (more than 1 % of the requests failed: tools/bench/metrics.py).
`errors` is {kind: count} (vLLM keeps one string per request).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tools.domain.stats import PairedVerdict, Verdict

SCHEMA_VERSION = 1


class ServerRef(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str | None = None  # the server's name in the run (start_server), None for a bare URL
    host: str | None = None  # the host it runs on (config name)
    engine: str | None = None  # the engine profile's name, None when unknown
    engine_version: str | None = None  # as the engine printed it before the launch
    command: str | None = None  # the full launch command, None when unknown
    flags: dict[str, Any] = {}  # the flags under test (start_server's), {} when unknown
    port: int | None = None  # the server's port on its host
    url: str = ""  # what the client connected to (a forwarded port is the local end)
    gpus: int | None = None  # as given to `agent bench --gpus`; None: from the command's --tp/--dp


class Workload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    endpoint: Literal["completions", "chat"] = "completions"
    model: str = ""  # the model name sent in requests
    input_len: int = Field(default=512, ge=1)
    max_tokens: int = Field(default=512, ge=1)
    ignore_eos: bool = True
    temperature: float = 0.0
    # random: seeded word prompts of input_len tokens (random_prompts.py); chat: the built-in
    # chat dataset; sharegpt:FILE, jsonl:FILE: a file's prompts (tools/bench/datasets.py)
    dataset: str = "random"
    dataset_digest: str = ""  # a file dataset's content hash: what compare checks, not the path
    lengths: Literal["fixed", "data"] = "fixed"  # output lengths: max_tokens, or the data's
    seed: int = 0
    requests_per_level: int | None = None  # None: max(5 x C, 10) per level (the count rule)
    warmup_requests: int = 2  # per level, not measured
    traffic: Literal["concurrency", "rate"] = "concurrency"  # closed loop, or open at a rate
    # open loop: the gamma shape of the gaps (1: Poisson, <1 burstier), or evenly spaced
    burstiness: Annotated[float, Field(gt=0)] | Literal["constant"] = 1.0
    duration_s: float | None = Field(default=None, gt=0)  # a level lasts this long (model time)
    # a closed level goes on past its count until it has lasted this long (model time), up to
    # MIN_POOL_FACTOR x its count (level_traffic.py); None or 0: the count alone
    min_level_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    slo_ms: dict[str, float] = {}  # {"ttft"|"tpot"|"e2el": p99 limit in ms}: goodput
    shared_prefix: int = Field(default=0, ge=0)  # a system prompt of N tokens every request shares
    multi_turn: bool = False  # a dataset's conversations replayed turn by turn, history growing
    cache_reset: str | None = None  # the endpoint POSTed before each level (a cold prefix cache)


class ClientInfo(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str = "campaign-agent"
    kind: str = "raw-asyncio"  # raw-asyncio | vllm-bench-serve (an imported result) | ...
    where: Literal["controller", "forward", "remote"] = "controller"
    processes: int = 1
    event_loop: str = "uvloop"
    host: str = ""  # the machine the client ran on
    cpu_count: int = 0
    connect_timeout_s: float = 10.0
    stall_timeout_s: float = 300.0
    # every wait's deadline (tools/bench/deadlines.py: head_s, first_token_s, pace_tok_s,
    # floor_s, slack, level_s, probe_s); {} in results from before they existed
    deadlines: dict[str, Any] = {}
    remote_command: str | None = None


def open_rate(point: Mapping[str, Any]) -> float | None:
    """The target rate (req/s) of an open-loop level; None for a closed one ("inf", vLLM's)."""
    rate = point.get("request_rate")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate):
        return None
    return float(rate)


def level_name(point: Mapping[str, Any]) -> str:
    """'C=10' for a closed level, 'rate 5/s' for an open one (whose max_concurrency is only its
    request count)."""
    rate = open_rate(point)
    return f"C={point['max_concurrency']}" if rate is None else f"rate {rate:g}/s"


class Point(BaseModel):
    """One level. Typed here are the keys the tools read; every other flat key is kept as is."""

    model_config = ConfigDict(extra="allow")

    max_concurrency: int
    num_prompts: int = 0
    duration: float = 0.0
    completed: int = 0
    failed: int = 0
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    request_throughput: float = 0.0
    output_throughput: float = 0.0
    total_token_throughput: float = 0.0
    mean_ttft_ms: float = 0.0
    median_ttft_ms: float = 0.0
    p99_ttft_ms: float = 0.0
    mean_tpot_ms: float = 0.0
    median_tpot_ms: float = 0.0
    p99_tpot_ms: float = 0.0
    mean_itl_ms: float = 0.0
    p99_itl_ms: float = 0.0
    achieved_concurrency: float = 0.0
    client_cpu_percent: float | None = None
    early_eos: int = 0
    errors: dict[str, int] = {}
    usage_counted: int = 0  # successes without a usage message: tokens counted from the chunks
    level_failed: bool = False
    interrupted: bool = False  # Ctrl-C during this level: the requests that finished
    # energy (tools/bench/energy.py): absent where the host reported no power (a note says why)
    power_source: Literal["simulator", "nvidia-smi"] | None = None
    power_w: float | None = None  # the mean power of the level's samples, watts
    power_samples: int | None = None
    power_gpus: str | None = None  # nvidia-smi: the GPUs summed, "0,1" or "all"
    j_per_token: float | None = None  # power_w x duration / total_output_tokens (joules)
    # against physics (tools/bench/floor.py): absent where no description of the box is known
    floor_step_ms: float | None = None  # the shortest decode step the memory bandwidth allows
    floor_tok_s: float | None = None  # the floor of the batch: C / floor step (output tok/s)
    floor_share: float | None = None  # output_throughput / floor_tok_s (above 1: speculation)
    # which bound the floor is: "memory" (bandwidth), "compute" (peak FLOPs) or "interconnect"
    floor_bound: str | None = None

    @property
    def rate(self) -> float | None:
        """An open level's target rate (req/s), None for a closed level."""
        return open_rate(self.__pydantic_extra__ or {})

    @property
    def name(self) -> str:
        return level_name(
            {**(self.__pydantic_extra__ or {}), "max_concurrency": self.max_concurrency}
        )


class BenchResult(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    id: str
    created: str  # UTC ISO-8601
    label: str = ""
    run_id: str | None = None
    config_hash: str
    server: ServerRef
    workload: Workload
    client: ClientInfo
    levels: list[int]  # the levels asked for, in order (open loop: each level's request count)
    request_rates: list[float] = []  # open loop: the rates asked for (req/s), in order
    points: list[Point]  # one per level measured (a failed level is kept, marked level_failed)
    interrupted: bool = False  # stopped before every level was measured
    notes: list[str] = []
    # how the prompts were made: seed, length ("tokenizer" | "words"), words, expected_tokens,
    # length_detail, extra_body (tools/bench/sweep.py); {} in results from before it existed
    prompts: dict[str, Any] = {}
    # the description the floor of each point was computed from (tools/domain/physics.py's
    # Physics.to_json), None where none was known
    physics: dict[str, Any] | None = None

    def summary(self) -> dict[str, float]:
        """{"<level>": output_throughput} - the `benchmark` event's summary; a failed level is 0
        (whatever its successes streamed), as every reader of a summary counts it. Not rounded:
        the autopilot reads its sweeps from here and recommend from the file, one set of numbers."""
        return {
            str(p.max_concurrency): 0.0 if p.level_failed else p.output_throughput
            for p in self.points
        }

    @property
    def failed(self) -> bool:
        """Nothing measured: every level failed (an interrupted result is not a failure)."""
        return bool(self.points) and all(p.level_failed for p in self.points)

    def failure_reason(self) -> str:
        """One line: why every level failed, from the commonest error kind's sample message."""
        counts: dict[str, int] = {}
        sample: dict[str, str] = {}
        for p in self.points:
            for kind, n in p.errors.items():
                counts[kind] = counts.get(kind, 0) + n
            for kind, text in (getattr(p, "error_samples", None) or {}).items():
                sample.setdefault(kind, str(text))
        if not counts:
            return "no request completed"
        kind = max(counts, key=lambda k: counts[k])
        total = sum(p.num_prompts for p in self.points)
        return f"{counts[kind]} of {total} requests failed with {kind}: {sample.get(kind, '')}"

    def point(self, level: int) -> Point | None:
        return next((p for p in self.points if p.max_concurrency == level), None)

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


# --- recommendation.json -----------------------------------------------------------------------
# The campaign's conclusion, as tools/recommend.py writes it in the run folder (and in its
# result's data) and the report, the deploy files and the live views read it: one typed record,
# parsed once (`Recommendation.model_validate_json`). Every field has a default and extra keys are
# kept, so that a recommendation.json of an older run still loads; the writer dumps only the
# fields it set (`dump`), in the order declared here - the keys and values it always wrote.


class Record(BaseModel):
    """A part of recommendation.json: unknown keys kept (an older or newer writer's)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def dump(self) -> dict[str, Any]:
        """As written: the fields set, in declared order, then any extra keys."""
        return self.model_dump(mode="json", exclude_unset=True, by_alias=True)


class RecommendedObjective(Record):
    """The objective the figures are of (the [objective] config's fields; those beyond kind and
    level - the SLO limits, the precision - are kept as they came)."""

    kind: str = "geomean"
    level: int | None = None


class PolicyServerRecord(Record):
    """One range of a concurrency policy: its levels (to None: and above), its configuration,
    its launch command (its own port) and, with a [cost] price, what it costs over its levels."""

    from_concurrency: int = 1
    to_concurrency: int | None = None
    config: dict[str, Any] | None = None
    command: str = ""
    usd_per_hour: float | None = None
    usd_per_mtok: dict[str, float] | None = None


class Deployment(Record):
    """A configuration with its launch command and policy: what was asked (`candidate`)."""

    config: dict[str, Any] | None = None
    command: str = ""
    policy: list[PolicyServerRecord] = []
    crossover: list[int] = []


class PairedRecord(Record):
    """The configuration against the baseline in launch pairs (stats.Paired): the verdict's
    figure. `needs`: what it would take, when the pairs do not establish a win."""

    ratio: float | None = None
    interval: list[float] | None = None
    pairs: int = 0
    ratios: list[float] = []
    verdict: PairedVerdict | None = None
    stated: str = ""
    needs: str | None = None
    unit: str = "launch pair"  # what one ratio is: "launch pair", or "duet round" (a duet's)


class DriftSide(Record):
    """One sweep of the baseline's drift: its results, when it finished, its objective."""

    results: list[str] = []
    finished: str = ""
    value: float | None = None


class DriftRecord(Record):
    """The baseline's own sweeps moved beyond the noise floor (results.SeenDrift.record)."""

    change: float = 0.0
    size: float = 0.0
    noise_floor: float | None = None
    levels: list[int] = []
    earlier: DriftSide = Field(default_factory=DriftSide, alias="from")
    later: DriftSide = Field(default_factory=DriftSide, alias="to")
    note: str = ""


# recommend's verdict: the comparison's, "baseline" (the baseline was asked for), or "not
# established" (the means say win and the launch pairs do not, or there are no pairs and the
# baseline drifted enough to make the gain by itself: stats.Drift.explains)
RecommendedVerdict = Verdict | PairedVerdict | Literal["baseline"]


class Recommendation(Record):
    """recommendation.json (tools/recommend.py's docstring says each field). `config`,
    `command`, `policy` and `crossover` are what to deploy: the candidate's on a win, else the
    baseline's; `value`, `gain` and `geomean_ratio` are always the candidate's."""

    objective: RecommendedObjective | None = None
    config: dict[str, Any] | None = None
    command: str = ""
    policy: list[PolicyServerRecord] = []
    crossover: list[int] = []
    verdict: RecommendedVerdict | None = None
    candidate: Deployment | None = None
    value: float | None = None
    baseline_value: float | None = None
    gain: float | None = None
    geomean_ratio: float | None = None
    noise_floor: float | None = None
    levels: list[int] = []
    per_level: dict[str, float] = {}
    baseline_per_level: dict[str, float] = {}
    results: list[str] = []
    baseline_results: list[str] = []
    reason: str = ""
    notes: list[str] = []
    usd_per_hour: float | None = None
    usd_per_mtok: dict[str, float] | None = None
    # against physics: {level: share of the level's bandwidth floor} of the deployed
    # configuration and of the baseline (the points' floor_share, tools/domain/physics.py); set
    # only where the results carry floors
    floor_share: dict[str, float] | None = None
    baseline_floor_share: dict[str, float] | None = None
    # what is left to gain against physics (tools/domain/physics.py headroom_of): {level:
    # {"bound", "best_share" of any configuration measured, "flags", "kernels": what each family
    # could still add, None where the level is not memory-bound}}; flags_done: what flags could
    # still add is under the noise floor at every memory-bound level (None: cannot be said)
    headroom: dict[str, dict[str, Any]] | None = None
    flags_done: bool | None = None
    paired: PairedRecord | None = None
    drift: DriftRecord | None = None
