"""Prompt lengths against llama-cpp-python's server: the words the benchmark sends for input_len
with the `llama-cpp-python` profile (calibrated on /extras/tokenize) and with the generic `openai`
one (one token per word assumed), and what the server counts for 32 such prompts
(usage.prompt_tokens of a completion with max_tokens 1) - docs/engines.md.

    .venv/bin/python benchmarks/prompt_length_llama_cpp_python.py [--input-len 32 64 256]

Needs the cached llama.cpp build (.ci/build-llama-server) and the `llamacpp-python` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.bench.prompt_length import calibrate  # noqa: E402
from tools.bench.random_prompts import make_prompt  # noqa: E402
from tools.servers.llama_cpp.build import python_path  # noqa: E402
from tools.servers.llama_cpp.tiny_model import make_models  # noqa: E402
from tools.servers.profiles import ENGINES  # noqa: E402

PROMPTS = 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input-len", type=int, nargs="+", default=[32, 64, 256])
    parser.add_argument("--port", type=int, default=18931)
    args = parser.parse_args()
    model = make_models(Path(tempfile.mkdtemp(prefix="prompt-length-")))[0]
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--n_ctx", "1024"]
    argv += ["--n_threads", "1", "--port", str(args.port)]
    env = dict(os.environ, PYTHONPATH=str(python_path()))
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{args.port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url + "/v1/models").raise_for_status()
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    sys.exit("llama_cpp.server did not start")
                time.sleep(0.1)
        print("| input_len | profile | words sent | usage.prompt_tokens, mean (min-max) |")
        print("|---:|---|---:|---|")
        for input_len in args.input_len:
            for name in ("llama-cpp-python", "openai"):
                path = ENGINES[name].tokenize_path
                length = asyncio.run(calibrate(url, "m", input_len, path))
                rng = random.Random(1)
                counts = [
                    httpx.post(
                        url + "/v1/completions",
                        json={"prompt": make_prompt(rng, length.words), "max_tokens": 1},
                        timeout=60,
                    ).json()["usage"]["prompt_tokens"]
                    for _ in range(PROMPTS)
                ]
                mean = sum(counts) / len(counts)
                print(
                    f"| {input_len} | `{name}` | {length.words} | {mean:.1f} "
                    f"({min(counts)}-{max(counts)}) |"
                )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


if __name__ == "__main__":
    main()
