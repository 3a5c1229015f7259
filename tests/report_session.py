"""A recorded campaign for the report tests, shaped like the reference one: the baseline twice
(the noise floor), a screened candidate, a full sweep that wins slightly at high concurrency,
EAGLE-3 that wins at one stream only (a crossover between C=1 and C=2), a configuration that
fails to start, and a recommendation with a concurrency policy.

`write_session(folder, files=True)`: events.jsonl always; with files, also results/*.json (the
full results, vLLM's flat keys) and recommendation.json - without them it is a session replayed
elsewhere, which the report must still render from the events.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from state.events import EventLog

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


def command_of(flags: dict[str, Any]) -> str:
    argv = shlex.split(COMMAND)
    for k, v in flags.items():
        if v is True:
            argv.append(k)
        elif v is not False:
            argv += [k, str(v)]
    return shlex.join([*argv, "--port", "30000"])


class Session:
    def __init__(self, folder: Path, files: bool) -> None:
        self.folder, self.files, self.n = folder, files, 0
        self.ids: dict[str, list[str]] = {}  # config -> its result ids
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

    def bench(self, name: str, config: str, label: str, scale: float = 1.0) -> None:
        bench_id = f"b{self.n + 1:03d}"
        self.ids.setdefault(config, []).append(bench_id)
        levels = [c for c, v in zip(LEVELS, TPUT[config], strict=True) if v is not None]
        inp = {"server": name, "concurrency": levels, "label": label}
        self.turn("run_benchmark", inp, f"Benchmarking {label}.", seconds=45.0)
        per: dict[str, dict[str, float]] = {}
        points = []
        for c, v in zip(LEVELS, TPUT[config], strict=True):
            if v is None:
                continue
            tput = round(v * scale, 2)
            tpot = round(1000 * c / tput, 2)
            m = {"output_throughput": tput, "ttft_p50": 60.0 + c, "ttft_p99": 90.0 + 2 * c,
                 "tpot_p50": tpot, "tpot_p99": round(tpot * 1.2, 2)}  # fmt: skip
            per[str(c)] = m
            points.append({"max_concurrency": c, "output_throughput": tput,
                           "median_ttft_ms": m["ttft_p50"], "p99_ttft_ms": m["ttft_p99"],
                           "median_tpot_ms": tpot, "p99_tpot_ms": m["tpot_p99"],
                           "failed": False})  # fmt: skip
        flags = flags_of(config)
        workload = {"input_len": 512, "max_tokens": 128, "endpoint": "completions"}
        path = f"results/{bench_id}.json"
        if self.files:  # the full result carries the vLLM keys; the event only the summary
            body = {"id": bench_id, "workload": workload, "points": points}
            (self.folder / path).write_text(json.dumps(body))
        summary = {c: m["output_throughput"] for c, m in per.items()}
        self.add("benchmark", id=bench_id, path=path, config_hash=f"h-{config}", server=name,
                 command=command_of(flags), flags=flags, label=label, workload=workload,
                 summary=summary, levels=None if self.files else per)  # fmt: skip
        self.result(f"{label}: " + ", ".join(f"C={c} {v}" for c, v in summary.items()))

    def kill(self, name: str) -> None:
        self.turn("kill_server", {"name": name}, f"Killing {name}.", 2.0)
        self.add("server_killed", name=name, killed=[1], verified=True)
        self.result(f"killed {name}")


def recommendation(s: Session) -> dict[str, Any]:
    """As tools/recommend.py writes it."""
    return {
        "objective": {"kind": "geomean", "level": None, "ttft_p99_ms": None, "tpot_p99_ms": None},
        "config": flags_of("cg256"),
        "command": command_of(flags_of("cg256")),
        "value": 288.0,
        "baseline_value": 284.0,
        "gain": 0.014,
        "policy": [
            {"from_concurrency": 1, "to_concurrency": 1, "config": flags_of("eagle")},
            {"from_concurrency": 2, "to_concurrency": None, "config": flags_of("cg256")},
        ],
        "crossover": [2],
        "results": s.ids["cg256"],
        "baseline_results": s.ids["base"],
    }


def write_session(folder: Path, files: bool = True) -> Path:
    from tools.domain.config import lab_config

    config = lab_config(port=30000).model_dump(mode="json")
    s = Session(folder, files)
    s.add("run_started", run_id=folder.name, goal="beat baseline", brain="autopilot",
          model="autopilot", limits={"max_steps": 300, "max_usd": 25, "max_minutes": 60},
          config=config)  # fmt: skip
    todos = [{"id": "t1", "content": "sweep the baseline", "status": "completed",
              "priority": "high"}]  # fmt: skip
    s.add("todo", todos=todos, changes={})
    for i, scale in enumerate((1.0, 1.012)):  # the A/A pair: 1.2 % apart
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
