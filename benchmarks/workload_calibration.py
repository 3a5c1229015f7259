"""EAGLE-3 vs baseline on random, chat and code-like prompts, and a shared prefix's TTFT: the
simulator's truth against what `agent bench` measures on the served process (docs/sim.md).

    .venv/bin/python benchmarks/workload_calibration.py [--time-scale 10] [--requests 24]
                                                         [--max-tokens 128] [--noise 0.02]

Acceptance: per dataset, both configurations at C=1 with fixed outputs; truth = sim.truth at the
mean predictability score and mean prompt length of the prompts sent (the same seed). Prefix:
`--shared-prefix 2000` at C=1, first request after a /flush_cache (cold) vs the rest (warm),
against the cache model's prefill(2000).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from sim_client import EAGLE3, REFERENCE_FLAGS, start_server  # noqa: E402

from agent.cli.bench import main as bench_main  # noqa: E402
from sim import predictability  # noqa: E402
from sim.flags import parse_server_args  # noqa: E402
from sim.model import Model  # noqa: E402
from sim.truth import latency, level_throughput  # noqa: E402
from tools.bench import datasets  # noqa: E402

DATASETS = ("random", "chat", "code")


def bench(port: int, argv: list[str]) -> dict[str, Any]:
    out = Path(tempfile.mkstemp(suffix=".json")[1])
    with contextlib.redirect_stdout(io.StringIO()):
        code = bench_main(["--url", f"http://127.0.0.1:{port}", *argv, "--json", str(out)])
    assert code == 0, argv
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def sent(kind: str, n: int, input_len: int) -> tuple[float, float]:
    """Mean predictability score and prompt words of the first n prompts of seed 0."""
    if kind == "random":
        return 0.0, float(input_len)
    samples = datasets.level_samples(datasets.load(kind), 0, 0, n)
    score = sum(predictability.score(s.prompt) for s in samples) / n
    return score, sum(len(s.prompt.split()) for s in samples) / n


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--time-scale", type=float, default=10.0)
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--noise", type=float, default=0.02)
    ns = p.parse_args()
    common = ["--time-scale", f"{ns.time_scale:g}", "--noise", f"{ns.noise:g}", "--seed", "1"]
    configs = {"baseline": REFERENCE_FLAGS, "EAGLE-3": [*REFERENCE_FLAGS, *EAGLE3]}
    rows: dict[str, dict[str, float]] = {}
    for name, flags in configs.items():
        model = Model(parse_server_args([*flags, *common]))
        server = start_server([*flags, *common])
        try:
            for kind in DATASETS:
                argv = ["--concurrency", "1", "--requests-per-level", str(ns.requests)]
                argv += ["--dataset", kind, "--max-tokens", str(ns.max_tokens), "--warmup", "0"]
                point = bench(server.port, argv)["points"][0]
                score, words = sent(kind, ns.requests, 512)
                truth = level_throughput(model, 1, round(words), ns.max_tokens, text_score=score)
                rows.setdefault(kind, {"score": score})
                rows[kind][f"{name} truth"] = truth
                rows[kind][f"{name} measured"] = point["output_throughput"]
                rows[kind][f"{name} tau"] = model.tau(0.0, score) if model.args.spec else 1.0
            if name == "baseline":
                prefix(server.port, model)
        finally:
            server.stop()
    print(f"\nC=1, {ns.max_tokens} output tokens, {ns.requests} requests, noise {ns.noise:g}")
    print(
        "| data | score | tau | baseline tok/s truth / measured | EAGLE-3 truth / measured "
        "| EAGLE-3 / baseline truth / measured |"
    )
    print("|---|---|---|---|---|---|")
    for kind, r in rows.items():
        bt, bm = r["baseline truth"], r["baseline measured"]
        et, em = r["EAGLE-3 truth"], r["EAGLE-3 measured"]
        print(
            f"| {kind} | {r['score']:.2f} | {r['EAGLE-3 tau']:.2f} | {bt:.1f} / {bm:.1f} "
            f"| {et:.1f} / {em:.1f} | {et / bt:.3f} / {em / bm:.3f} |"
        )


def prefix(port: int, model: Model) -> None:
    argv = ["--concurrency", "1,1", "--requests-per-level", "4", "--warmup", "0"]
    argv += ["--input-len", "512", "--max-tokens", "16", "--shared-prefix", "2000"]
    reset = bench(port, [*argv, "--cache-reset", "/flush_cache"])
    kept = bench(port, [*argv, "--seed", "1"])  # new prompts (seed 0's are all cached now)
    cold_truth = latency(model, 1, 2512, 16)["ttft_ms"]
    warm_truth = latency(model, 1, 2512, 16, cached_tokens=2000)["ttft_ms"]
    print(
        f"shared prefix 2000 + 512 tokens, C=1: truth TTFT cold {cold_truth:.0f} ms, warm "
        f"{warm_truth:.0f} ms (saves prefill(2000) = {model.prefill_ms(2000):.0f} ms)"
    )
    for name, result in (("with --cache-reset", reset), ("without reset", kept)):
        for i, point in enumerate(result["points"]):
            ttfts = ", ".join(f"{1000 * t:.0f}" for t in point["ttfts"])
            print(f"  {name}, level {i + 1}: TTFT per request {ttfts} ms")


if __name__ == "__main__":
    main()
