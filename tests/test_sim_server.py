"""The simulator as a real process: the OpenAI API, health, metrics, speculative counters."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from sim.space import DEFAULT_BASE_FLAGS

ROOT = Path(__file__).resolve().parent.parent
FAST = ["--time-scale", "50", "--seed", "1", "--port", "0"]


@dataclass
class Sim:
    proc: subprocess.Popen[bytes]
    log: Path
    gpu_dir: Path
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.text())
            if m:
                return m
            if self.proc.poll() is not None:
                m = re.search(pattern, self.text())
                if m:
                    return m
                raise AssertionError(
                    f"exited {self.proc.returncode} before {pattern!r}:\n{self.text()}"
                )
            time.sleep(0.02)
        raise AssertionError(f"no {pattern!r} within {timeout} s:\n{self.text()}")

    def wait_ready(self) -> Sim:
        self.port = int(self.wait_for(r"Uvicorn running on http://[^:]+:(\d+)").group(1))
        self.wait_for("fired up and ready to roll")
        return self

    def group(self) -> list[int]:
        """Live (not zombie) processes of the server's process group."""
        out = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.proc.pid and fields[0] != "Z":
                out.append(int(stat.parent.name))
        return out

    def gpus(self) -> list[dict[str, object]]:
        out = subprocess.run(
            [sys.executable, "-m", "sim", "gpus", "--json"],
            capture_output=True,
            text=True,
            check=True,
            env=dict(os.environ, SIM_GPU_DIR=str(self.gpu_dir)),
            timeout=30,
        )
        return json.loads(out.stdout)

    def kill_group(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while self.group() and time.monotonic() < deadline:
            time.sleep(0.02)


def launch(tmp_path: Path, *flags: str, base: bool = True, name: str = "sim") -> Sim:
    log = tmp_path / f"{name}.log"
    gpu_dir = tmp_path / "gpus"
    argv = [sys.executable, "-m", "sim", *(DEFAULT_BASE_FLAGS if base else []), *FAST, *flags]
    env = dict(os.environ, SIM_GPU_DIR=str(gpu_dir), SIM_ZOMBIE_TTL_S="120")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
    return Sim(proc, log, gpu_dir)


def tracked() -> Iterator[list[Sim]]:
    """Servers started by a test; every process group is killed at teardown."""
    started: list[Sim] = []
    yield started
    for s in started:
        s.kill_group()
        assert not s.group(), "the process group outlived killpg"


@pytest.fixture
def sims() -> Iterator[list[Sim]]:
    yield from tracked()


@pytest.fixture
def server(tmp_path: Path, sims: list[Sim]) -> Sim:
    # time scale 5: a decode step (~2 ms real) is long enough to go out as its own chunk
    sim = launch(
        tmp_path,
        "--load-seconds",
        "0.2",
        "--enable-flashinfer-allreduce-fusion",
        "--time-scale",
        "5",
    )
    sims.append(sim)
    return sim.wait_ready()


def stream(url: str, path: str, body: dict[str, object]) -> list[dict[str, object]]:
    frames: list[dict[str, object]] = []
    with httpx.stream("POST", url + path, json=body, timeout=30) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                frames.append(json.loads(line[6:]))
            elif line == "data: [DONE]":
                frames.append({"done": True})
    return frames


def test_health_goes_503_then_200(tmp_path: Path, sims: list[Sim]) -> None:
    # 3 s of load: the first look lands in it even when a loaded machine notices the bind late
    sim = launch(tmp_path, "--load-seconds", "3")
    sims.append(sim)
    sim.port = int(sim.wait_for(r"bound http://[^:]+:(\d+)").group(1))
    seen = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and 200 not in seen:
        seen.append(httpx.get(sim.url + "/health", timeout=5).status_code)
        time.sleep(0.05)
    assert seen[0] == 503 and seen[-1] == 200
    assert "Loading safetensors checkpoint shards" in sim.text()
    assert "fired up and ready to roll" in sim.text()
    assert httpx.get(sim.url + "/health_generate", timeout=10).status_code == 200


def test_streaming_completion_usage_and_chunks(server: Sim) -> None:
    body = {
        "prompt": "one two three four five six seven",
        "max_tokens": 40,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    frames = stream(server.url, "/v1/completions", body)
    assert frames[-1] == {"done": True}
    usage = frames[-2]["usage"]
    assert usage == {"prompt_tokens": 7, "completion_tokens": 40, "total_tokens": 47}
    choices = [f["choices"][0] for f in frames[:-2]]  # type: ignore[index]
    # one token per decode step; a late wake-up may coalesce a few steps into one chunk
    assert 20 <= len(choices) <= 40
    assert choices[-1]["finish_reason"] == "length"
    assert all(c["finish_reason"] is None for c in choices[:-1])
    text = "".join(c["text"] for c in choices)
    assert len(text.split()) == 40
    again = stream(server.url, "/v1/completions", body)  # temperature 0: same text
    assert "".join(f["choices"][0]["text"] for f in again[:-2]) == text  # type: ignore[index]


def test_non_streaming_chat_and_eos(server: Sim) -> None:
    r = httpx.post(
        server.url + "/v1/completions",
        timeout=30,
        json={"prompt": [1, 2, 3, 4, 5], "max_tokens": 12, "ignore_eos": True},
    )
    out = r.json()
    assert out["usage"] == {"prompt_tokens": 5, "completion_tokens": 12, "total_tokens": 17}
    assert out["choices"][0]["finish_reason"] == "length"
    body = {
        "messages": [{"role": "user", "content": "hello there"}],
        "max_tokens": 6,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    frames = stream(server.url, "/v1/chat/completions", body)
    assert frames[0]["choices"][0]["delta"]["role"] == "assistant"  # type: ignore[index]
    assert frames[-2]["usage"]["completion_tokens"] == 6  # type: ignore[index]
    assert frames[-2]["usage"]["prompt_tokens"] == 2 + 4 + 2  # type: ignore[index]

    # without ignore_eos the model stops on its own: early, with finish_reason "stop"
    def ask(i: int) -> dict[str, Any]:
        body = {"prompt": f"prompt {i}", "max_tokens": 2000, "temperature": 0}
        return httpx.post(server.url + "/v1/completions", json=body, timeout=60).json()

    with ThreadPoolExecutor(8) as pool:
        stops = list(pool.map(ask, range(8)))
    ends = [(s["usage"]["completion_tokens"], s["choices"][0]["finish_reason"]) for s in stops]
    assert any(reason == "stop" and n < 2000 for n, reason in ends)
    assert all(reason == "length" for n, reason in ends if n == 2000)


def test_bad_requests_get_clear_errors(server: Sim) -> None:
    r = httpx.post(server.url + "/v1/completions", content=b"{nope", timeout=10)
    assert r.status_code == 400 and "not valid JSON" in r.json()["message"]
    r = httpx.post(
        server.url + "/v1/completions", json={"prompt": "x", "model": "gpt-9"}, timeout=10
    )
    assert r.status_code == 404 and "does not exist" in r.json()["message"]
    r = httpx.post(
        server.url + "/v1/completions", json={"prompt": "x", "max_tokens": 10**6}, timeout=10
    )
    assert r.status_code == 400 and "maximum context length" in r.json()["message"]
    models = httpx.get(server.url + "/v1/models", timeout=10).json()
    assert models["data"][0]["id"] == DEFAULT_BASE_FLAGS[1]


def test_metrics_and_server_info_with_eagle3(tmp_path: Path, sims: list[Sim]) -> None:
    sim = launch(
        tmp_path,
        "--load-seconds",
        "0.1",
        "--enable-flashinfer-allreduce-fusion",
        "--speculative-algorithm",
        "EAGLE3",
        "--time-scale",
        "100",
    )
    sims.append(sim)
    sim.wait_ready()
    body = {
        "prompt": "a b c",
        "max_tokens": 300,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    frames = stream(sim.url, "/v1/completions", body)
    assert frames[-2]["usage"]["completion_tokens"] == 300  # type: ignore[index]
    assert len(frames) - 2 < 300  # several accepted tokens per chunk
    metrics = httpx.get(sim.url + "/metrics", timeout=10).text
    counters = dict(re.findall(r"^(vllm:spec_decode_\w+)\{[^}]*\} (\d+)", metrics, re.M))
    drafts = int(counters["vllm:spec_decode_num_drafts_total"])
    accepted = int(counters["vllm:spec_decode_num_accepted_tokens_total"])
    assert drafts > 0 and int(counters["vllm:spec_decode_num_draft_tokens_total"]) == 3 * drafts
    assert re.search(r"^sglang:num_requests_total\{.*\} [1-9]", metrics, re.M)
    info = httpx.get(sim.url + "/server_info", timeout=10).json()
    tau = info["internal_states"][0]["avg_spec_accept_length"]
    assert tau == pytest.approx(1 + accepted / drafts, rel=1e-3)
    assert 1.6 < tau < 2.8  # the model's 2.18, sampled
    assert info["max_running_requests"] == 48 and info["tp_size"] == 8
