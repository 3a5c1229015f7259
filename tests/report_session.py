"""A recorded campaign for the report tests, shaped like the reference one: the baseline twice
(the noise floor), a screened candidate, a full sweep that wins slightly at high concurrency,
EAGLE-3 that wins at one stream only (a crossover between C=1 and C=2), a configuration that
fails to start, and a recommendation with a concurrency policy.

`write_session(folder, files=True)`: events.jsonl always (benchmark events as run_benchmark
writes them, compact per-level points included); with files, also results/*.json (real result
files) and recommendation.json - without them it is a session replayed elsewhere, which the
report must still render from the events. `noisy`: the A/A pair disagrees wildly at C=250.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from state.events import EventLog
from tools.bench.results import build_result, repeats, save, sweep_of
from tools.bench.schema import BenchResult, ClientInfo, ServerRef, Workload
from tools.benchmark_outcome import compact_points
from tools.domain import stats

LEVELS = [1, 2, 5, 10, 30, 70, 100, 250]
BASE: dict[str, Any] = {
    "--attention-backend": "flashinfer",
    "--cuda-graph-max-bs": 128,
    "--enable-flashinfer-allreduce-fusion": True,
    "--speculative-algorithm": False,
}
EAGLE: dict[str, Any] = {
    "--speculative-algorithm": "EAGLE3",
    "--speculative-num-steps": 3,
    "--speculative-eagle-topk": 1,
    "--speculative-num-draft-tokens": 4,
}
COMMAND = (
    "python -m sim --model-path moonshotai/Kimi-K2-Thinking --tp 8 --disable-custom-all-reduce"
)
FAILED_REQUESTS = {("triton", 10): 3}  # (config, level) -> failed requests, the level served
TPUT: dict[str, list[float | None]] = {
    "base": [92.6, 160.0, 285.0, 385.0, 500.0, 548.0, 560.0, 551.0],
    "cg256": [92.9, 160.5, 286.0, 386.0, 502.0, 551.0, 566.0, 590.0],
    "eagle": [96.1, 146.0, 214.0, 254.0, 289.0, 297.0, 297.0, 297.0],
    "triton": [85.0, None, None, 356.0, None, None, 522.0, None],
}


def flags_of(name: str) -> dict[str, Any]:
    return {
        "base": dict(BASE),
        "cg256": {**BASE, "--cuda-graph-max-bs": 256},
        "eagle": {**BASE, **EAGLE},
        "triton": {**BASE, "--attention-backend": "triton"},
        "eagle64": {**BASE, **EAGLE, "--cuda-graph-max-bs": 64},
    }[name]


def command_of(flags: dict[str, Any], port: int = 30000) -> str:
    argv = shlex.split(COMMAND)
    for k, v in flags.items():
        if v is True:
            argv.append(k)
        elif v is not False:
            argv += [k, str(v)]
    return shlex.join([*argv, "--port", str(port)])


class Session:
    def __init__(self, folder: Path, files: bool) -> None:
        self.folder, self.files, self.n = folder, files, 0
        self.ids: dict[str, list[str]] = {}  # config -> its result ids
        self.results: dict[str, list[BenchResult]] = {}
        (folder / "results").mkdir(parents=True, exist_ok=True)
        self.log = EventLog(folder / "events.jsonl")

    def add(self, type_: str, **data: Any) -> None:
        self.log.append(type_, **data)

    def turn(self, name: str, inp: dict[str, Any], text: str, seconds: float = 1.0) -> str:
        self.n += 1
        usage = {"input_tokens": 3000, "output_tokens": 150, "cache_read_input_tokens": 1000}
        tool_id = f"toolu_{self.n}"
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        content.append({"type": "tool_use", "id": tool_id, "name": name, "input": inp})
        self.add("message", role="assistant", content=content, stop_reason="tool_use",
                 usage=usage, cost_usd=0.02, model="autopilot")  # fmt: skip
        self.add("tool_call", id=tool_id, name=name, input=inp)
        self.pending = (tool_id, name, seconds)
        return tool_id

    def result(self, text: str, data: dict[str, Any] | None = None, error: bool = False) -> None:
        tool_id, name, seconds = self.pending
        self.add("tool_result", id=tool_id, name=name, text=text, is_error=error,
                 data=data or {}, duration_s=seconds)  # fmt: skip

    def launch(self, name: str, config: str) -> None:
        flags = flags_of(config)
        self.turn("start_server", {"name": name, "flags": flags}, f"Starting {name}.", 30.0)
        self.add("server_started", name=name, host="local", engine="sim", pid=1000 + self.n,
                 pgid=1000 + self.n, port=30000, command=command_of(flags), flags=flags,
                 log=f"logs/{name}.log")  # fmt: skip

    def bench(
        self, name: str, config: str, label: str, scale: dict[int, float] | float = 1.0
    ) -> None:
        bench_id = f"b{self.n + 1:03d}"
        self.ids.setdefault(config, []).append(bench_id)
        levels = [c for c, v in zip(LEVELS, TPUT[config], strict=True) if v is not None]
        inp = {"server": name, "concurrency": levels, "label": label}
        self.turn("run_benchmark", inp, f"Benchmarking {label}.", seconds=45.0)
        points = []
        for c, v in zip(LEVELS, TPUT[config], strict=True):
            if v is None:
                continue
            tput = round(v * (scale.get(c, 1.0) if isinstance(scale, dict) else scale), 2)
            tpot = round(1000 * c / tput, 2)
            point = {"max_concurrency": c, "output_throughput": tput, "completed": 5 * c,
                     "failed": FAILED_REQUESTS.get((config, c), 0), "median_ttft_ms": 60.0 + c,
                     "p99_ttft_ms": 90.0 + 2 * c, "median_tpot_ms": tpot,
                     "p99_tpot_ms": round(tpot * 1.2, 2)}  # fmt: skip
            points.append(point)
        flags = flags_of(config)
        result = build_result(
            result_id=bench_id,
            server=ServerRef(name=name, engine="sim", command=command_of(flags), flags=flags),
            workload=Workload(model="sim", input_len=512, max_tokens=128),
            client=ClientInfo(),
            levels=levels,
            points=points,
            label=label,
            run_id=self.folder.name,
        )
        self.results.setdefault(config, []).append(result)
        path = f"results/{bench_id}.json"
        if self.files:
            save(result, self.folder / "results")
        self.add("benchmark", id=bench_id, path=path, config_hash=result.config_hash, server=name,
                 command=result.server.command, flags=flags, label=label,
                 workload=result.workload.model_dump(), summary=result.summary(),
                 points=compact_points(result), url="", failed_levels=[],
                 interrupted=False)  # fmt: skip
        self.result(f"{label}: " + ", ".join(f"C={c} {v}" for c, v in result.summary().items()))

    def kill(self, name: str) -> None:
        self.turn("kill_server", {"name": name}, f"Killing {name}.", 2.0)
        self.add("server_killed", name=name, killed=[1], verified=True)
        self.result(f"killed {name}")


def recommendation(s: Session) -> dict[str, Any]:
    """As tools/recommend.py writes it, its figures from the statistics."""
    ours = stats.mean_sweep(sweep_of(r) for r in s.results["cg256"])
    theirs = stats.mean_sweep(sweep_of(r) for r in s.results["base"])
    vs = stats.versus(ours, theirs, repeats([r for rs in s.results.values() for r in rs]))
    value, base_value = stats.geomean(ours.values()), stats.geomean(theirs.values())
    return {
        "objective": {"kind": "geomean", "level": None, "ttft_p99_ms": None, "tpot_p99_ms": None},
        "config": flags_of("cg256"),
        "command": command_of(flags_of("cg256")),
        "verdict": vs.verdict,
        "value": round(value, 3),
        "baseline_value": round(base_value, 3),
        "gain": round(value / base_value - 1, 5),
        "geomean_ratio": vs.ratio,
        "noise_floor": vs.floor,
        "policy": [  # one server per range, consecutive ports (tools/recommend.py)
            {
                "from_concurrency": 1,
                "to_concurrency": 1,
                "config": flags_of("eagle"),
                "command": command_of(flags_of("eagle"), 30000),
            },
            {
                "from_concurrency": 2,
                "to_concurrency": None,
                "config": flags_of("cg256"),
                "command": command_of(flags_of("cg256"), 30001),
            },
        ],
        "crossover": [2],
        "results": s.ids["cg256"],
        "baseline_results": s.ids["base"],
    }


def write_session(folder: Path, files: bool = True, noisy: bool = False) -> Path:
    from tools.domain.config import lab_config

    config = lab_config(port=30000).model_dump(mode="json")
    s = Session(folder, files)
    s.add("run_started", run_id=folder.name, goal="beat baseline", brain="autopilot",
          model="autopilot", limits={"max_steps": 300, "max_usd": 25, "max_minutes": 60},
          config=config)  # fmt: skip
    todos = [{"id": "t1", "content": "sweep the baseline", "status": "completed",
              "priority": "high"}]  # fmt: skip
    s.add("todo", todos=todos, changes={})
    second: dict[int, float] | float = {250: 0.4} if noisy else 1.004
    for i, scale in enumerate((1.0, second)):  # the A/A pair: 0.4 % apart
        s.launch(f"baseline-{i + 1}", "base")
        s.add("server_ready", name=f"baseline-{i + 1}", seconds=9.0)
        s.result("ready")
        s.bench(f"baseline-{i + 1}", "base", "baseline", scale)
        s.kill(f"baseline-{i + 1}")
    for name in ("triton", "eagle", "cg256"):
        s.launch(name, name)
        s.add("server_ready", name=name, seconds=9.0)
        s.result("ready")
        s.bench(name, name, name)
        s.kill(name)
    s.launch("eagle-cg64", "eagle64")
    excerpt = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    s.add("server_failed", name="eagle-cg64", diagnosis="out of memory while capturing CUDA "
          "graphs", log_excerpt="Capturing batches (bs=64)\n" + excerpt)  # fmt: skip
    s.result("eagle-cg64 failed: out of memory", error=True)
    s.launch("cg256-again", "cg256")  # the winner, re-validated on a fresh launch
    s.add("server_ready", name="cg256-again", seconds=9.0)
    s.result("ready")
    s.bench("cg256-again", "cg256", "cg256", 0.995)
    s.kill("cg256-again")
    rec = recommendation(s)
    s.turn("recommend", {"config": rec["config"]}, "Recommending.", 0.1)
    s.result("recommended", data={"recommendation": rec})
    if files:
        (folder / "recommendation.json").write_text(json.dumps(rec))
    s.add("message", role="assistant", content=[{"type": "text", "text": "Done."}],
          stop_reason="end_turn", usage={"input_tokens": 100, "output_tokens": 10},
          cost_usd=0.01, model="autopilot")  # fmt: skip
    s.add("run_finished", status="finished", exit_code=0, reason="Done.", session_minutes=4.2)
    s.log.close()
    return folder


def bench_in_run(
    run: Any,
    rid: str,
    flags: dict[str, Any],
    summary: dict[int, float],
    label: str | None = None,
    extra: dict[int, dict[str, Any]] | None = None,
    notes: list[str] | None = None,
) -> None:
    """A real result file in a live Run and the `benchmark` event run_benchmark appends for it
    (`label`: the sweep it belongs to, as the autopilot cuts one sweep into several results;
    `extra`: more keys of a level's point, e.g. its server_metrics; `notes`: the result's)."""
    points = [
        {"max_concurrency": c, "output_throughput": v, "completed": 5 * c,
         "achieved_concurrency": float(c), "median_ttft_ms": 40.0 + c, "p99_ttft_ms": 50.0 + c,
         "median_tpot_ms": 15.0 + c / 10, "p99_tpot_ms": 20.0, **(extra or {}).get(c, {})}
        for c, v in summary.items()
    ]  # fmt: skip
    label = label or rid
    result = build_result(
        result_id=rid,
        server=ServerRef(name=rid, engine="sim", command=command_of(flags), flags=flags),
        workload=Workload(model="sim", input_len=512, max_tokens=128),
        client=ClientInfo(),
        levels=list(summary),
        points=points,
        label=label,
        run_id=run.id,
        notes=notes or [],
    )
    path = save(result, run.path / "results")
    run.append("benchmark", id=rid, path=str(path), config_hash=result.config_hash, server=rid,
               command=result.server.command, flags=flags, label=label,
               workload=result.workload.model_dump(), summary=result.summary(),
               points=compact_points(result), url="", failed_levels=[],
               interrupted=False)  # fmt: skip
