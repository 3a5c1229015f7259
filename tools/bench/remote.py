"""The client as a configured remote command (config bench.client = "remote"): for instance
`vllm bench serve ... --save-result --result-filename {out}` run on the GPU box, one invocation
per level, its vLLM-format JSON read back (`cat` over the host's channel) into our points.

Placeholders in bench.remote_command: {url} (the server as the host sees it), {model},
{concurrency}, {num_prompts}, {input_len}, {max_tokens}, {seed}, {out} (the result file).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import tempfile
from pathlib import Path
from typing import Any

import orjson

from tools.bench.level_traffic import requests_for
from tools.bench.sweep import BenchError, Observer, SweepOutcome
from tools.bench.vllm_format import point_from_vllm

PLACEHOLDERS = (
    "url",
    "model",
    "concurrency",
    "num_prompts",
    "input_len",
    "max_tokens",
    "seed",
    "out",
)


async def host_run(host: Any, command: str, timeout: float) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) from a Host's run(), whichever shape its result has."""
    res = await host.run(command, timeout=timeout)
    if isinstance(res, tuple):
        return int(res[0]), str(res[1]), str(res[2])
    if getattr(res, "timed_out", False):
        return 124, str(res.stdout), f"timed out after {timeout:g} s"
    code = getattr(res, "exit_code", 1)
    return int(code if code is not None else 1), str(res.stdout), str(res.stderr)


async def fetch(host: Any, path: str) -> str:
    """The result file's text: over SFTP when the host can (no size limit), else with cat."""
    if hasattr(host, "get"):
        with tempfile.TemporaryDirectory(prefix="bench-remote-") as tmp:
            local = os.path.join(tmp, "result.json")
            await host.get(path, local)
            return Path(local).read_text()
    code, text, stderr = await host_run(host, f"cat {shlex.quote(path)}", 60)
    if code != 0:
        raise OSError(stderr.strip()[:200] or f"cat exited {code}")
    return text


def check_template(template: str) -> None:
    try:
        template.format(**dict.fromkeys(PLACEHOLDERS, "x"))
    except (KeyError, IndexError, ValueError) as err:
        raise BenchError(
            f"bench.remote_command: bad placeholder {err}; known: "
            + ", ".join("{" + p + "}" for p in PLACEHOLDERS)
        ) from None
    if "{out}" not in template:
        raise BenchError(
            "bench.remote_command must write its result to {out} (--result-filename {out})"
        )


async def run_remote(
    host: Any,
    template: str,
    url: str,
    model: str,
    levels: list[int],
    input_len: int,
    max_tokens: int,
    requests_per_level: int | None,
    seed: int,
    tag: str,
    timeout_s: float = 3600,
    observer: Observer | None = None,
) -> SweepOutcome:
    check_template(template)
    obs = observer or Observer()
    outcome = SweepOutcome(model=model, processes=0)
    for level in levels:
        from tools.bench.schema import Workload

        n = requests_for(level, Workload(requests_per_level=requests_per_level))
        out = f".campaign-bench/{tag}-c{level}.json"
        values = {
            "url": url,
            "model": model,
            "concurrency": level,
            "num_prompts": n,
            "input_len": input_len,
            "max_tokens": max_tokens,
            "seed": seed,
            "out": out,
        }
        command = template.format(**{k: shlex.quote(str(v)) for k, v in values.items()})
        obs.level_start(level, n)
        try:
            code, _, stderr = await host_run(
                host, f"mkdir -p .campaign-bench && {command}", timeout_s
            )
            if code != 0:
                tail = stderr.strip().splitlines()[-1:] or ["(no stderr)"]
                point = _failed(level, n, "remote_command", f"exit {code}: {tail[0][:200]}")
            else:
                point = await _read_point(host, out, level, n, max_tokens)
        except asyncio.CancelledError:
            outcome.interrupted = True
            break
        outcome.points.append(point)
        if point["level_failed"]:
            outcome.notes.append(f"C={level}: {next(iter(point['error_samples'].values()), '')}")
        obs.level_end(level, point)
    return outcome


async def _read_point(host: Any, out: str, level: int, n: int, max_tokens: int) -> dict[str, Any]:
    try:
        text = await fetch(host, out)
    except Exception as err:  # whatever the host says (SFTP, cat), it is one line
        return _failed(level, n, "remote_command", f"no result file {out}: {err}")
    try:
        return point_from_vllm(orjson.loads(text), level, max_tokens)
    except (orjson.JSONDecodeError, TypeError, ValueError) as err:
        return _failed(level, n, "remote_command", f"unreadable {out}: {err}")


def _failed(level: int, n: int, kind: str, message: str) -> dict[str, Any]:
    return {
        "max_concurrency": level,
        "num_prompts": n,
        "completed": 0,
        "failed": n,
        "errors": {kind: n},
        "error_samples": {kind: message},
        "level_failed": True,
    }
