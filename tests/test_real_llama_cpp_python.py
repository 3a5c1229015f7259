"""Against llama-cpp-python's own server (`python -m llama_cpp.server`, 0.3.36's FastAPI app), run
on the shared libraries of the one llama.cpp build (.ci/build-llama-server) - marked real_engine,
run by .ci/run's real-engine stage after `pip install -e '.[llamacpp-python]'`. The server sends
no usage message: the benchmark counts the tokens from the chunks and says so; a stream the server
cuts short (its default when another request waits) is a failed request, not an early EOS; a
server that cannot be measured at all ends a campaign with "no recommendation", exit 0 and the
reason; with its own profile (`llama-cpp-python`) the prompts are input_len tokens by its count."""

from __future__ import annotations

import importlib.util
import random
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.real_engine import call, local_run
from tests.ssh_fixtures import free_port
from tools.base import ToolContext
from tools.bench.random_prompts import bodies, level_seed, make_prompt
from tools.domain.config_toml import to_toml
from tools.servers.llama_cpp.build import cached_build
from tools.servers.llama_cpp.tiny_model import make_models

pytestmark = pytest.mark.real_engine
SERVER_DEPS = ("fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")


@pytest.fixture(scope="module")
def python_path() -> Path:
    """The cached build's llama_cpp package (its lib/ holds that build's libllama.so)."""
    out = cached_build()
    if out is None:
        pytest.fail("no llama.cpp build in the cache: run .ci/build-llama-server first")
    missing = [m for m in SERVER_DEPS if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(f"{missing[0]} is not installed: pip install -e '.[llamacpp-python]'")
    return out / "python"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_models(tmp_path_factory.mktemp("models"))[0]


def server_command(python_path: Path, model: Path, *more: str) -> str:
    # PYTHONPATH: llama-cpp-python's package from the sdist, no compile of its own
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), *more]
    return f"PYTHONPATH={shlex.quote(str(python_path))} {shlex.join(argv)}"


@pytest.fixture(params=["false"], ids=["whole-streams"])
async def ctx(
    request: pytest.FixtureRequest, tmp_path: Path, python_path: Path, model: Path
) -> AsyncIterator[ToolContext]:
    """--interrupt_requests false: by default the server ends a stream as soon as another request
    waits for the model (it serves one at a time), which no benchmark at C > 1 survives. The
    generic openai profile: nothing about this server is built in."""
    more = ["--n_ctx", "512", "--interrupt_requests", request.param]
    command = server_command(python_path, model, *more)
    async with local_run(tmp_path, "openai", command) as context:
        yield context


async def test_the_benchmark_counts_tokens_from_the_chunks_and_says_so(ctx: ToolContext) -> None:
    text, is_error, _ = await call(ctx, "start_server", flags={"--n_threads": 1})
    assert not is_error, text
    text, is_error, data = await call(
        ctx, "run_benchmark", concurrency=[1, 2, 3, 4], input_len=16, max_tokens=16,
        requests_per_level=8, label="llama-cpp-python",
    )  # fmt: skip
    assert not is_error, text
    saved = orjson.loads(Path(data["path"]).read_bytes())
    points = saved["points"]
    assert [p["max_concurrency"] for p in points] == [1, 2, 3, 4]
    assert [p["failed"] for p in points] == [0, 0, 0, 0], [p["errors"] for p in points]
    for p in points:
        # every answer counted from its chunks: no usage message came, and none was taken as 0
        assert p["usage_counted"] == p["completed"] >= 8  # the count, then the 5 s minimum
        assert p["total_output_tokens"] > 0 and p["output_throughput"] > 0
    (note,) = [n for n in saved["notes"] if n.startswith("usage: counted from chunks")]
    assert note.startswith("usage: counted from chunks at C=1, C=2, C=3, C=4"), note
    assert "throughput is approximate" in note and note in text  # the agent reads it too


@pytest.mark.parametrize("ctx", ["true"], ids=["interrupting"], indirect=True)
async def test_streams_the_server_cuts_short_are_failed_requests(ctx: ToolContext) -> None:
    """The server's default: a stream ends with `[DONE]` and no finish reason once another request
    waits. Counted from its chunks it would pass for an early EOS of one or two tokens and a
    throughput of nothing real; it is a failed request, and the level a failed measurement."""
    text, is_error, _ = await call(ctx, "start_server", flags={"--n_threads": 1})
    assert not is_error, text
    text, is_error, data = await call(
        ctx, "run_benchmark", concurrency=[1, 3], input_len=16, max_tokens=16,
        requests_per_level=6, label="interrupting",
    )  # fmt: skip
    assert not is_error, text  # C=1 is measured: nothing waits, nothing is cut
    one, three = orjson.loads(Path(data["path"]).read_bytes())["points"]
    assert one["failed"] == 0 and not one["level_failed"]
    assert three["level_failed"] and three["errors"].get("truncated", 0) >= 3, three["errors"]
    assert "the server cut it short" in str(three["error_samples"])
    assert "C=3:" in text and "truncated" in text


def test_a_server_that_cannot_be_measured_ends_with_no_recommendation(
    tmp_path: Path, python_path: Path, model: Path
) -> None:
    """A 32-token context: the readiness check's short completion is answered, every benchmark
    prompt (64 words) is refused - the real server starts, and no request can be measured."""
    command = server_command(python_path, model, "--n_ctx", "32")
    config = tmp_path / "agent.toml"
    body = {
        "server": {
            "engine": "openai",
            "command": command,
            "port": free_port(),
            "ready_timeout_s": 60.0,
            "kill_timeout_s": 10.0,
        },
        "bench": {"concurrency": [1, 2], "input_len": 64, "max_tokens": 8, "warmup_requests": 1},
        "budget": {"max_minutes": 5.0},
        "search": {"--n_threads": [1, 2], "baseline": {"--n_threads": 1}},
    }
    config.write_text(to_toml(body))
    runs = tmp_path / "runs"
    argv = [
        *(sys.executable, "-m", "agent.cli", "run", "--config", str(config)),
        *("--goal", "beat baseline", "--model", "autopilot", "--runs-dir", str(runs)),
        *("--run-id", "r"),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout + done.stderr
    assert "no recommendation - the baseline does not start or cannot be measured" in out, out
    assert "benchmark failed at every level" in out
    run = runs / "r"
    results = sorted((run / "results").glob("*.json"))
    assert results  # the failed measurements are kept, for the record
    for path in results:
        assert all(p["level_failed"] for p in orjson.loads(path.read_bytes())["points"])
    recommendation = run / "recommendation.json"
    if recommendation.exists():  # never a recommended value of 0
        assert orjson.loads(recommendation.read_bytes()).get("value") is None


def prompt_tokens(url: str, prompts: list[str]) -> list[int]:
    """The server's own count of each prompt: usage.prompt_tokens of a non-streamed completion,
    checked against /extras/tokenize."""
    counts = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for prompt in prompts:
            body = {"prompt": prompt, "max_tokens": 1, "temperature": 0}
            usage = client.post("/v1/completions", json=body).raise_for_status().json()["usage"]
            tokens = client.post("/extras/tokenize", json={"input": prompt}).json()["tokens"]
            assert usage["prompt_tokens"] == len(tokens), prompt
            counts.append(int(usage["prompt_tokens"]))
    return counts


async def test_its_profile_makes_prompts_input_len_tokens_by_the_servers_count(
    tmp_path: Path, python_path: Path, model: Path
) -> None:
    """engine = "llama-cpp-python" (its flags checked on its --help, its version read): the word
    count is calibrated on /extras/tokenize, so the prompts the benchmark sent are input_len
    tokens by the server's usage (on average: word prompts vary around it); one word per token
    (the openai profile) is far off on this vocabulary."""
    input_len, levels, n = 48, [1, 2], 12
    command = server_command(python_path, model, "--n_ctx", "512", "--interrupt_requests", "false")
    async with local_run(tmp_path, "llama-cpp-python", command) as ctx:
        text, is_error, _ = await call(ctx, "start_server", flags={"--bogus_flag": 1})
        assert is_error and "refused before launch" in text, text  # its --help was read
        text, is_error, data = await call(ctx, "start_server", flags={"--n_threads": 1})
        assert not is_error, text
        assert data["engine"] == "llama-cpp-python" and data["engine_version"] == "0.3.36"
        text, is_error, data = await call(
            ctx, "run_benchmark", concurrency=levels, input_len=input_len, max_tokens=4,
            requests_per_level=n, label="lengths",
        )  # fmt: skip
        assert not is_error, text
        saved = orjson.loads(Path(data["path"]).read_bytes())
        how = saved["prompts"]
        assert how["length"] == "tokenizer" and "/extras/tokenize" in how["length_detail"], how
        assert abs(how["expected_tokens"] - input_len) <= 1, how
        assert all(p["failed"] == 0 for p in saved["points"])
        assert all(set(p["input_lens"]) == {how["expected_tokens"]} for p in saved["points"])
        # the very prompts sent: each level's measured bodies, from the result's seed
        words = how["words"]  # (the model name is not in the prompt)
        sent = [
            orjson.loads(body)["prompt"]
            for level in levels
            for body in bodies(n, level_seed(how["seed"], level, "measured"), "m", words, 4)
        ]
        url = saved["server"]["url"]
        counted = prompt_tokens(url, sent)
        mean = sum(counted) / len(counted)
        assert abs(mean - input_len) <= 0.1 * input_len, (mean, counted, how)
        rng = random.Random(0)
        by_words = prompt_tokens(url, [make_prompt(rng, input_len) for _ in range(n)])
        assert sum(by_words) / n > 1.2 * input_len, by_words  # what the calibration corrects
