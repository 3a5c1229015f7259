"""The client as a configured remote command (bench.client = "remote"): a `vllm bench serve`
stand-in runs on the host once per level, its vLLM-format JSON is read back into points."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from state.run import Run
from tools.base import ToolBox, ToolContext
from tools.domain.config import lab_config
from tools.run_benchmark import RunBenchmark

FAKE_VLLM = r"""
import argparse, json, sys
ap = argparse.ArgumentParser()
ap.add_argument("--base-url"); ap.add_argument("--model")
ap.add_argument("--max-concurrency", type=int)
ap.add_argument("--num-prompts", type=int); ap.add_argument("--random-output-len", type=int)
ap.add_argument("--result-filename")
a = ap.parse_args()
if a.max_concurrency == 8:
    print("RuntimeError: CUDA error: an illegal memory access", file=sys.stderr); sys.exit(1)
n, c = a.num_prompts, a.max_concurrency
json.dump({"date": "x", "backend": "openai", "model_id": a.model, "base_url": a.base_url,
           "max_concurrency": c, "num_prompts": n, "duration": 10.0, "completed": n - 1,
           "failed": 1, "total_input_tokens": 512 * (n - 1), "total_output_tokens": 100 * c,
           "output_throughput": 10.0 * c, "request_throughput": 0.1 * n, "mean_ttft_ms": 40.0,
           "median_ttft_ms": 39.0, "p99_ttft_ms": 80.0, "mean_e2el_ms": 1000.0,
           "itls": [[0.01] * 5] * n, "output_lens": [a.random_output_len] * (n - 2) + [3, 0],
           "errors": [""] * (n - 1) + ["Never received a valid chunk to calculate TTFT."]},
          open(a.result_filename, "w"))
"""


class LocalHost:
    """Stands in for an SSH host: runs commands with bash in its work folder."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.commands: list[str] = []

    async def run(self, command: str, timeout: float) -> tuple[int, str, str, float]:
        self.commands.append(command)
        proc = await asyncio.create_subprocess_shell(
            command,
            cwd=self.workdir,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
        return proc.returncode or 0, out.decode(), err.decode(), 0.0


class SftpHost(LocalHost):
    """A host that can also fetch files (the SSH host does it over SFTP)."""

    async def get(self, remote_path: str, local_path: str) -> int:
        data = (self.workdir / remote_path).read_bytes()
        Path(local_path).write_bytes(data)
        return len(data)


class Pool:
    def __init__(self, host: LocalHost) -> None:
        self.host = host

    def get(self, name: str) -> LocalHost:
        return self.host


@pytest.mark.parametrize("host_kind", [LocalHost, SftpHost])
async def test_remote_command_per_level_read_back(
    tmp_path: Path, host_kind: type[LocalHost]
) -> None:
    (tmp_path / "fake_vllm.py").write_text(FAKE_VLLM)
    template = (
        f"{sys.executable} fake_vllm.py --base-url {{url}} --model {{model}} "
        "--max-concurrency {concurrency} --num-prompts {num_prompts} "
        "--random-output-len {max_tokens} --result-filename {out}"
    )
    config = lab_config()
    config.bench = config.bench.model_copy(update={"client": "remote", "remote_command": template})
    config.server = config.server.model_copy(update={"model": "kimi"})
    run = Run.create(tmp_path / "runs", "r")
    run.append(
        "server_started",
        name="server",
        host="local",
        engine="sglang",
        pid=1,
        pgid=1,
        port=30000,
        command="python -m sglang.launch_server --model-path /m --port 30000",
        flags={},
        log="x",
    )
    host = host_kind(tmp_path)
    ctx = ToolContext(run=run, config=config, hosts=Pool(host))
    res, _ = await ToolBox([RunBenchmark()]).call(
        ctx, "run_benchmark", {"concurrency": [2, 8], "requests_per_level": 10, "max_tokens": 64}
    )
    # C=2 lost 1 of 10 requests (over 1 %) and C=8 crashed: nothing measured, an error result
    assert res.is_error and res.text.startswith("benchmark failed at every level: ")
    assert "--max-concurrency 2 --num-prompts 10" in host.commands[0]
    assert "--base-url http://127.0.0.1:30000 --model kimi" in host.commands[0]
    saved: dict[str, Any] = json.loads(Path(res.data["path"]).read_text())
    assert saved["client"]["kind"] == "remote-command" and saved["client"]["where"] == "remote"
    ok, bad = saved["points"]
    assert ok["output_throughput"] == 20.0 and ok["completed"] == 9 and ok["failed"] == 1
    assert ok["level_failed"] and saved["notes"]
    assert ok["early_eos"] == 1  # one request stopped at 3 tokens; the failed one (0) is not EOS
    assert ok["achieved_concurrency"] == 0.9  # mean e2el 1 s x 9 completed / 10 s
    assert ok["errors"] == {"vllm: Never received a valid": 1}
    assert "itls" not in ok
    assert bad["level_failed"] and "illegal memory access" in bad["error_samples"]["remote_command"]
    assert "C=8" in res.text and "FAILED" in res.text


async def test_remote_command_must_name_its_output(tmp_path: Path) -> None:
    config = lab_config()
    config.bench = config.bench.model_copy(
        update={"client": "remote", "remote_command": "vllm bench serve {nope}"}
    )
    config.server = config.server.model_copy(update={"model": "kimi"})
    run = Run.create(tmp_path / "runs", "r")
    run.append(
        "server_started",
        name="server",
        host="local",
        engine="vllm",
        pid=1,
        pgid=1,
        port=8000,
        command="vllm serve m",
        flags={},
        log="x",
    )
    ctx = ToolContext(run=run, config=config, hosts=Pool(LocalHost(tmp_path)))
    res, _ = await ToolBox([RunBenchmark()]).call(ctx, "run_benchmark", {"concurrency": [1]})
    assert res.is_error and "bad placeholder 'nope'" in res.text
