"""Engine profiles as data: the shipped ones, a user's own file, a bad file's one-line error, the
llama.cpp diagnoses, the pre-launch flag check from a captured `--help`, speculation flags, and
the version and help probes against a real (scripted) program on the local host."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from agent.report.deploy import Plan, Server, readme
from tools.base import ToolContext
from tools.bench.confighash import normalize_command
from tools.bench.server_metrics import MetricsError, Sampler, read
from tools.domain.config import BUILTIN_ENGINES, ConfigError, HostConfig, load_config
from tools.domain.gpus import gpus_of
from tools.domain.space import Flags
from tools.guard import Context, decide
from tools.guard.context import BUILTIN
from tools.guarded import engine_programs
from tools.hosts.local import LocalHost
from tools.servers.command import build_command, public_bind
from tools.servers.diagnose import diagnose
from tools.servers.flagcheck import help_check, help_flags, launch_words, parser_check
from tools.servers.probe import UNKNOWN, engine_version, known_check, probe, templates
from tools.servers.profiles import ENGINES, LLAMA_CPP, SGLANG, SIM, ProfileError, engine_for
from tools.servers.profiles import load_profile as load
from tools.servers.readiness import Watch, wait_ready
from tools.servers.speculation import speculation_on, speculative_flags

HELP = (Path(__file__).parent / "data" / "llama_server_help.txt").read_text()


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_the_shipped_profiles_are_the_engines_the_config_accepts() -> None:
    assert set(ENGINES) == set(BUILTIN_ENGINES)
    assert LLAMA_CPP.extra_body == {"cache_prompt": False} and LLAMA_CPP.cache_reset_path is None
    assert SGLANG.cache_reset_path == "/flush_cache" and ENGINES["vllm"].loopback
    assert LLAMA_CPP.tokenize_path == "/tokenize" and ENGINES["openai"].tokenize_path is None
    assert [p.pattern for p in SIM.ready_lines] == [p.pattern for p in SGLANG.ready_lines]
    # a profile's own failures come first, then the ones it inherits
    assert LLAMA_CPP.failures[0][0].pattern.startswith("error: invalid argument")
    assert LLAMA_CPP.failures[-1][1] == ENGINES["openai"].failures[-1][1]


def test_a_users_profile_file_inherits_and_overrides(tmp_path: Path) -> None:
    write(
        tmp_path / "tgi.toml",
        'name = "tgi"\ninherits = "openai"\nworkers = ["text-generation-router"]\n'
        '[readiness]\nhealth_path = "/health"\nready_lines = ["Connected"]\n'
        '[[failures]]\npattern = "Shard (\\\\d+) failed"\ndiagnosis = "shard {match} failed"\n',
    )
    config = write(
        tmp_path / "agent.toml",
        '[server]\nprofile = "tgi.toml"\ncommand = "text-generation-launcher"\n',
    )
    engine = engine_for(load_config(config))
    assert engine.name == "tgi" and engine.health_path == "/health"
    assert engine.profile.readiness.completion  # inherited from openai
    assert engine.workers == ("text-generation-router",)
    d = diagnose(engine, "boot\nShard 3 failed to start\n", 80, 1)
    assert d.text == "shard 3 failed"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('name = "x"\n[readines]\nhealth_path = "/h"\n', "unknown key 'readines' (did you mean"),
        ('name = "x"\n[readiness]\nready_lines = ["(oops"]\n', "readiness.ready_lines"),
        ('name = "x"\ninherits = "tgi"\n', "inherits 'tgi', not a built-in profile"),
        ('name = "x"\n[prefix_cache]\nreset = "post"\n', 'reset = "post" needs path'),
        ('name = "x"\n[[failures]]\npattern = "a"\ndiagnosis = "{pid}"\n', "uses {pid}"),
        ('name = "x"\n[version]\npattern = "v.*"\n', "needs a group"),
        ("name = x\n", "malformed TOML"),
    ],
)
def test_a_bad_profile_file_is_one_line_naming_the_problem(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = write(tmp_path / f"p{abs(hash(text))}.toml", text)
    with pytest.raises(ProfileError) as err:
        load(path)
    message = str(err.value)
    assert expected in message and "\n" not in message and str(path) in message


def test_unknown_engines_and_missing_profile_files_are_config_errors(tmp_path: Path) -> None:
    config = write(tmp_path / "a.toml", '[server]\nengine = "llamacpp"\ncommand = "x"\n')
    with pytest.raises(ConfigError, match=r"did you mean 'llama\.cpp'"):
        load_config(config)
    write(config, '[server]\nprofile = "nope.toml"\ncommand = "x"\n')
    with pytest.raises(ConfigError, match=r"engine profile .*nope.toml not found"):
        load_config(config)


@pytest.mark.parametrize(
    ("log", "diagnosis"),
    [
        ("error: invalid argument: --bogus\n", "does not know the flag --bogus"),
        (
            'error while handling argument "--draft-max": the argument has been removed.\n',
            "refused the value of --draft-max",
        ),
        (
            "gguf_init_from_file: failed to open GGUF file '/m/none.gguf' (No such file)\n",
            "model file not found or unreadable: /m/none.gguf",
        ),
        ("srv couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080\n", "port 8080"),
        (
            "llama_init_from_model: quantized V cache requires flash_attn to be enabled\n",
            "needs flash attention",
        ),
        ("ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer\n", "out of memory"),
    ],
)
def test_llama_cpp_failures_have_one_line_diagnoses(log: str, diagnosis: str) -> None:
    d = diagnose(LLAMA_CPP, "build: 1 (0c1e570)\n" + log, 8080, 1)
    assert diagnosis in d.text and "\n" not in d.text


def test_flags_and_their_values_from_a_captured_help() -> None:
    known = help_flags(HELP)
    assert known["--flash-attn"] == ("on", "off", "auto")
    assert "ngram-mod" in (known["--spec-type"] or ())
    assert {"--threads", "-t", "--parallel", "--no-cont-batching", "--model-draft"} <= set(known)
    check = help_check("llama.cpp", HELP, "0.5.0")
    assert check({"--threads": 2, "--flash-attn": "on", "--cache_type_v": "q8_0"}) is None
    assert check({"--spec-type": "ngram-mod,draft-simple", "--no-webui": True}) is None
    assert check({"--bogus": 1, "--never-given": False}) == (
        "llama.cpp 0.5.0 does not know --bogus (not in its --help)"
    )
    assert "takes one of on|off|auto, not 'yes'" in (check({"--flash-attn": "yes"}) or "")


def test_the_simulators_own_parser_is_its_pre_launch_check() -> None:
    check = parser_check("sim.flags:parse_server_args", ["--model-path", "m", "--tp", "8"])
    assert check({"--cuda-graph-max-bs": 64}) is None
    assert "--noise" in (check({"--noise": 0.9}) or "")


def test_launch_words_and_probe_templates() -> None:
    assert launch_words("A=1 /v/python3 -m sim --tp 8") == (
        ["A=1", "/v/python3", "-m", "sim"],
        ["--tp", "8"],
    )
    assert launch_words("llama-server -m t.gguf -t 2")[0] == ["llama-server"]
    assert templates("vllm serve /m --tp 2") == {"exe": "vllm", "launcher": "vllm serve /m"}


def test_speculation_is_the_profiles_property() -> None:
    space = ["--threads", "--spec-type", "--spec-draft-n-max", "--spec-draft-model", "--x"]
    gated = {"--x": {"--spec-type": "ngram-mod"}}
    assert speculative_flags(LLAMA_CPP, space) == tuple(space[1:4])
    assert speculative_flags(LLAMA_CPP, space, gated) == tuple(space[1:])
    assert speculative_flags(SGLANG, ["--speculative-algorithm", "--tp"]) == (
        "--speculative-algorithm",
    )
    assert speculation_on(LLAMA_CPP, {"--model-draft": "d.gguf"})
    assert not speculation_on(LLAMA_CPP, {"--spec-type": "none", "--threads": 2})


async def test_version_and_help_are_asked_once_per_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAMPAIGN_CACHE", str(tmp_path / "cache"))
    calls = tmp_path / "calls"
    exe = write(
        tmp_path / "llama-server",
        f'#!/bin/sh\necho "$1" >> {calls}\n'
        'if [ "$1" = --version ]; then echo "version: 42 (abc123)" >&2; exit 0; fi\n'
        f"cat {Path(__file__).parent / 'data' / 'llama_server_help.txt'}\n",
    )
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    host = LocalHost(HostConfig(name="local", workdir=str(tmp_path)))
    command = f"{exe} -m model.gguf --port 9"
    facts = await probe(host, LLAMA_CPP, command)
    assert facts.version == "42 (abc123)" and facts.check is not None
    assert facts.check({"--bogus": 1}) and facts.check({"--threads": 1}) is None
    again = await probe(host, LLAMA_CPP, command)
    assert again.version == facts.version
    assert calls.read_text().split() == ["--version", "--help"]  # cached: asked once
    assert await engine_version(host, ENGINES["openai"], command) == UNKNOWN


async def test_planners_get_the_check_without_io_once_a_launch_probed_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAMPAIGN_CACHE", str(tmp_path / "cache"))
    exe = write(
        tmp_path / "llama-server",
        '#!/bin/sh\n[ "$1" = --version ] && { echo "version: 7 (beef)"; exit 0; }\n'
        f"cat {Path(__file__).parent / 'data' / 'llama_server_help.txt'}\n",
    )
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    command = f"{exe} -m model.gguf"
    assert known_check(LLAMA_CPP, command) is None  # nothing probed yet
    await probe(LocalHost(HostConfig(name="local", workdir=str(tmp_path))), LLAMA_CPP, command)
    check = known_check(LLAMA_CPP, command)
    assert check is not None and check({"--bogus": 1}) and check({"--parallel": 2}) is None
    sim = known_check(SIM, "python -m sim --model-path m --tp 8")  # its parser: no probe needed
    assert sim is not None and sim({"--noise": 0.9})


# vLLM 0.32.0 (CPU build), `--speculative-config '{"method": "bogus", ...}'`: the tail of its log
VLLM_BAD_SPECULATIVE_CONFIG = """\
    return SpeculativeConfig(**self.speculative_config)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/pydantic/_internal/_dataclasses.py", line 121
    s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)
pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig
method
  Input should be 'ngram', 'medusa', 'mlp_speculator', 'draft_model', 'suffix', 'eagle', 'eagle3'
    For further information visit https://errors.pydantic.dev/2.14/v/literal_error
"""


def test_a_vllm_config_validation_error_names_the_setting_and_what_it_takes() -> None:
    """The exception line alone ("1 validation error for SpeculativeConfig") does not say which
    field nor what it takes; the lines after it do."""
    d = diagnose(ENGINES["vllm"], VLLM_BAD_SPECULATIVE_CONFIG, 8000, 1)
    assert d.text.startswith("vLLM refused its configuration: SpeculativeConfig"), d.text
    assert "method: Input should be 'ngram'" in d.text and "\n" not in d.text
    assert "errors.pydantic.dev" not in d.text


# ---------------------------------------------- TensorRT-LLM: a new engine is one profile file


TRTLLM = ENGINES["trtllm"]

# what trtllm-serve's /prometheus/metrics serves (names from NVIDIA/TensorRT-LLM
# tensorrt_llm/metrics/collector.py; labels as its MetricsCollector puts them)
TRTLLM_PROMETHEUS = """\
# HELP trtllm_num_requests_running Number of active requests
# TYPE trtllm_num_requests_running gauge
trtllm_num_requests_running{engine_type="trtllm",model_name="m"} 6.0
# HELP trtllm_num_requests_waiting Number of queued requests
# TYPE trtllm_num_requests_waiting gauge
trtllm_num_requests_waiting{engine_type="trtllm",model_name="m"} 2.0
# HELP trtllm_kv_cache_utilization KV cache utilization
# TYPE trtllm_kv_cache_utilization gauge
trtllm_kv_cache_utilization{engine_type="trtllm",model_name="m"} 0.375
# HELP trtllm_spec_decode_acceptance_length Acceptance length in speculative decoding
# TYPE trtllm_spec_decode_acceptance_length gauge
trtllm_spec_decode_acceptance_length{engine_type="trtllm",model_name="m"} 2.5
# HELP trtllm_spec_decode_num_draft_tokens_total Total number of draft tokens
# TYPE trtllm_spec_decode_num_draft_tokens_total counter
trtllm_spec_decode_num_draft_tokens_total{engine_type="trtllm",model_name="m"} 300.0
"""


def test_trtllm_is_a_built_in_engine_from_its_profile_file_alone() -> None:
    assert "trtllm" in BUILTIN_ENGINES and TRTLLM.source == "built-in"
    assert TRTLLM.name == "trtllm" and TRTLLM.port_flag == "--port"
    # readiness: /health once the model is loaded (it listens only then), no ready line, a
    # real completion
    assert TRTLLM.health_path == "/health" and TRTLLM.ready_lines == ()
    assert TRTLLM.profile.readiness.completion
    assert TRTLLM.cache_reset_path is None and TRTLLM.extra_body == {}  # fresh prompts
    assert TRTLLM.metrics_path == "/prometheus/metrics"  # its /metrics is JSON
    assert TRTLLM.workers == ("mpi4py.futures.server",)
    assert TRTLLM.profile.file_flags == ["--extra_llm_api_options", "--config"]
    # failures: its own click error first, then openai's
    d = diagnose(TRTLLM, "Usage: trtllm-serve serve [OPTIONS] MODEL\nError: No such option: "
                 "--tp-sizee Did you mean --tp_size?\n", 8000, 2)  # fmt: skip
    assert d.text.startswith("trtllm-serve does not know the flag --tp-sizee"), d.text
    # its bind error (serve.py launch_server): the port in use is typed port_busy, not another
    busy = (
        "RuntimeError: Failed to bind socket to localhost:8000: [Errno 98] Address already in use"
    )
    d = diagnose(TRTLLM, busy + "\n", 8000, 1)
    said = "trtllm-serve could not listen on localhost:8000: the port is in use"
    assert d.cause == "port_busy" and d.text.startswith(said), d.text
    other = "RuntimeError: Failed to bind socket to 10.9.9.9:8000: [Errno 99] Cannot assign"
    d = diagnose(TRTLLM, other + "\n", 8000, 1)
    assert d.cause == "" and d.text.startswith("trtllm-serve could not listen on 10.9.9.9:8000: ")


@pytest.mark.parametrize(
    ("flags", "gpus"),
    [
        ({"--tp_size": "8"}, 8),
        ({"--tp_size": 4, "--pp_size": 2}, 8),
        ({"--tensor_parallel_size": 2, "--pipeline_parallel_size": 2}, 4),
        ({"--tp_size": 2, "--cp_size": 2}, 4),  # context parallel: its own GPUs
        ({"--tp_size": 8, "--ep_size": 4}, 8),  # experts over the TP GPUs
        ({"--tp_size": 8, "--ep_size": 2, "--cluster_size": 2}, 8),  # clusters too (mapping.py)
        ({"--max_batch_size": 64}, 1),
    ],
)
def test_trtllm_gpu_count_is_its_profiles_parallelism(flags: dict[str, object], gpus: int) -> None:
    assert gpus_of(flags, "trtllm") == gpus
    assert gpus_of(flags, TRTLLM.profile.parallelism) == gpus
    assert gpus_of(flags) == gpus  # an engine not named: every profile's spellings
    # a result's command, normalized (`--tp_size` -> `--tp-size`), counts the same
    words = " ".join(f"{k} {v}" for k, v in flags.items())
    assert gpus_of(normalize_command(f"trtllm-serve /m {words}")["flags"], "trtllm") == gpus


def test_an_engines_own_spellings_are_its_profiles() -> None:
    """vLLM's profile does not spell tensor parallelism --tp_size; nor does TensorRT-LLM's
    spell it --tensor-parallel-size (its own: --tensor_parallel_size, the same with `_`)."""
    assert gpus_of({"--tp_size": 8}, "vllm") == 1
    assert gpus_of({"--tensor-parallel-size": 2, "-pp": 2}, "vllm") == 4
    assert gpus_of({"--tp-size": 2, "--dp": 2}, "sglang") == 4
    assert gpus_of({"--tp": 4}, "llama.cpp") == 4  # a profile with none: every profile's


def test_trtllm_launch_command_is_built_and_judged_from_its_profile() -> None:
    flags = {"--tp_size": 4, "--pp_size": 2, "--extra_llm_api_options": "extra.yaml"}
    command = build_command("trtllm-serve /models/llama", flags, TRTLLM, 8000)
    # no --host added: it binds localhost unless told otherwise
    assert command == (
        "trtllm-serve /models/llama --tp_size 4 --pp_size 2 --extra_llm_api_options extra.yaml "
        "--port 8000"
    )
    assert public_bind(command) is None
    assert "trtllm-serve" in BUILTIN.executables  # from its [processes], no code tuple
    assert {"trtllm-serve", "mpi4py.futures.server"} <= set(BUILTIN.names)
    d = decide(command)
    assert d.action == "sandbox" and "start_server" in (d.reason or ""), d
    # its launcher tells the guard a bash line starts a server: a public address is refused
    public = decide("trtllm-serve /models/llama --host 0.0.0.0 --port 8000")
    assert public.action == "refuse" and "--host 0.0.0.0" in (public.reason or ""), public


def test_trtllm_metrics_are_read_by_its_profiles_names() -> None:
    reading = read(TRTLLM_PROMETHEUS, TRTLLM.profile.metrics)
    assert (reading.source, reading.running, reading.waiting) == ("trtllm", 6.0, 2.0)
    assert reading.kv_cache == 0.375 and reading.accept_gauge == 2.5
    assert reading.spec is None  # its counters count draft tokens, not drafts
    assert read(TRTLLM_PROMETHEUS).running == 6.0  # told no engine: every profile's names
    with pytest.raises(MetricsError):  # vLLM's names do not name TensorRT-LLM's gauges
        read(TRTLLM_PROMETHEUS, ENGINES["vllm"].profile.metrics)


def test_a_users_profile_brings_its_own_parallelism_and_metrics(tmp_path: Path) -> None:
    path = write(
        tmp_path / "tgi.toml",
        'name = "tgi"\ninherits = "openai"\n'
        '[parallelism]\ntensor = ["--num-shard"]\n'
        '[metrics]\nrunning = ["tgi_batch_current_size"]\nwaiting = ["tgi_queue_size"]\n'
        '[processes]\nlaunchers = ["text-generation-launcher"]\n',
    )
    engine = load(path)
    assert gpus_of({"--num-shard": 4}, engine.profile.parallelism) == 4
    reading = read("tgi_batch_current_size 3\ntgi_queue_size 1\n", engine.profile.metrics)
    assert (reading.source, reading.running, reading.waiting) == ("tgi", 3.0, 1.0)
    # the guard knows a user's engine's launcher and workers as it knows a built-in one's:
    # tools/guarded.py adds the run's profile to every decision's context
    shard = write(
        tmp_path / "shard.toml",
        'name = "shard"\ninherits = "openai"\nworkers = ["shard-worker"]\n'
        '[processes]\nlaunchers = ["shard-serve"]\n',
    )
    server = SimpleNamespace(profile=str(shard), engine="openai", ready_line=None, health_path=None)
    run = cast(ToolContext, SimpleNamespace(config=SimpleNamespace(server=server)))
    ours = Context(engines=engine_programs(run))
    assert decide("pkill -f shard-worker", context=ours).action == "allow"
    assert decide("pkill -f shard-worker").action == "sandbox"  # the built-ins' only
    launch = decide("shard-serve --model m --port 8000", context=ours)
    assert "an engine started from bash" in (launch.reason or ""), launch
    assert "not a command the rules know" in (decide("shard-serve --model m").reason or "")
    bad = write(tmp_path / "bad.toml", 'name = "x"\n[parallelism]\ntensor = ["tp"]\n')
    with pytest.raises(ProfileError, match=r"parallelism\.tensor"):
        load(bad)
    bad = write(tmp_path / "bad2.toml", 'name = "x"\n[processes]\nlaunchers = ["python x.py"]\n')
    with pytest.raises(ProfileError, match=r"processes\.launchers"):
        load(bad)


async def test_trtllm_version_is_its_python_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "pkgs" / "tensorrt_llm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        'print("[TensorRT-LLM] TensorRT-LLM version: 1.3.0rc5")\n__version__ = "1.3.0rc5"\n'
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "pkgs"))
    host = LocalHost(HostConfig(name="local", workdir=str(tmp_path)))
    assert await engine_version(host, TRTLLM, "trtllm-serve /m --tp_size 8") == "1.3.0rc5"


class FakeTrtllm:
    """trtllm-serve's routes as its openai_server.py registers them, on loopback: nothing listens
    until the model is 'loaded' (it builds the LLM before it binds), then /health 200,
    /v1/models, a streamed /v1/completions, /metrics as JSON iteration stats and the
    Prometheus text at /prometheus/metrics."""

    def __init__(self) -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        self.server: asyncio.Server | None = None

    async def load(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self.server = await asyncio.start_server(self.answer, "127.0.0.1", self.port)

    async def answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        method, path = head.split()[:2]
        lengths = [h for h in head.split("\r\n") if h.lower().startswith("content-length")]
        size = int(lengths[0].split(":")[1]) if lengths else 0
        await reader.readexactly(size)
        kind, body = "application/json", b""
        if path == "/health":
            body = b""
        elif path == "/v1/models":
            body = b'{"object": "list", "data": [{"id": "m", "object": "model"}]}'
        elif path == "/metrics":
            body = b'[{"numActiveRequests": 0}]'
        elif path == "/prometheus/metrics":
            kind, body = "text/plain; version=0.0.4", TRTLLM_PROMETHEUS.encode()
        elif method == "POST" and path == "/v1/completions":
            chunk = '{"id": "c", "choices": [{"index": 0, "text": "hi", "finish_reason": null}]}'
            kind, body = "text/event-stream", f"data: {chunk}\n\ndata: [DONE]\n\n".encode()
        status = "200 OK" if path != "/nowhere" else "404 Not Found"
        writer.write(
            f"HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


async def test_trtllm_is_ready_on_health_and_sampled_at_its_prometheus_path(tmp_path: Path) -> None:
    fake = FakeTrtllm()
    log = write(tmp_path / "server.log", "[TensorRT-LLM] loading the model\n")
    host = LocalHost(HostConfig(name="local", workdir=str(tmp_path)))
    loading = asyncio.create_task(fake.load(0.6))
    try:
        watch = Watch(host, TRTLLM, os.getpid(), str(log), fake.port, timeout=30)
        ready = await wait_ready(watch)
        assert ready.model == "m" and ready.seconds >= 0.5 and ready.ready_line is None
        base = f"http://127.0.0.1:{fake.port}"
        sampler = Sampler(base + TRTLLM.metrics_path, names=TRTLLM.profile.metrics)
        sampler.start()
        await asyncio.sleep(0.6)
        series = await sampler.stop()
        assert sampler.problem is None and series is not None, sampler.problem
        assert series["source"] == "trtllm" and series["running"][0] == 6.0
        assert series["kv_cache"][0] == 0.375 and series["spec_acceptance"][0] == 2.5
        plain = Sampler(base + "/metrics")  # its /metrics is JSON: not what the sampler reads
        plain.start()
        await asyncio.sleep(0.3)
        assert await plain.stop() is None
        assert plain.problem is not None and "not Prometheus text" in plain.problem
    finally:
        await loading
        await fake.stop()


def test_the_deploy_readme_names_the_files_its_flags_read() -> None:
    """A flag whose value is a file (the profile's file_flags) names a file of the tuning host
    that the deployed server reads too."""
    argv = "trtllm-serve /m --tp_size 8 --extra_llm_api_options /srv/extra.yaml --port 8000"
    server = Server("best", "best", "", argv.split(), 8000, gpus_of({"--tp_size": 8}, "trtllm"))
    text = readme(Plan([server], TRTLLM, TRTLLM.profile.image, 600, "", "r1"))
    assert "(`--extra_llm_api_options /srv/extra.yaml`)" in text and "8 GPUs" in text
    vllm = Server("best", "best", "", ["vllm", "serve", "/m"], 8000, 1)
    assert "Files its flags name" not in readme(Plan([vllm], ENGINES["vllm"], "i", 600, "", "r"))


@pytest.mark.parametrize(
    ("server", "profile", "shard"),
    [
        ('engine = "trtllm"\ncommand = "trtllm-serve /models/m"\n', "", "--tp_size"),
        # a user's own profile: a spelling no built-in profile has
        (
            'profile = "tgi.toml"\ncommand = "text-generation-launcher"\n',
            'name = "tgi"\ninherits = "openai"\n[parallelism]\ntensor = ["--num-shard"]\n',
            "--num-shard",
        ),
    ],
)
def test_the_planner_counts_gpus_by_the_runs_engine_profile(
    tmp_path: Path, server: str, profile: str, shard: str
) -> None:
    """The planner's "fewer GPUs at the same value" (Reading.simpler) reads the run engine's
    [parallelism], as run_planner builds the planner for one box and the fleet alike: a change to
    8 GPUs is not simpler than two flags changed on one GPU."""
    from agent.brains.autopilot.history import History
    from agent.brains.autopilot.planner import Planner
    from agent.brains.autopilot.run_planner import run_planner
    from agent.brains.autopilot.steps import Settings
    from state.fold import RunState

    if profile:
        write(tmp_path / "tgi.toml", profile)
    config = load_config(
        write(
            tmp_path / "agent.toml",
            f"[server]\n{server}"
            f'[search]\n"{shard}" = [1, 8]\n"--max_batch_size" = [64, 128]\n"--tokens" = [1, 2]\n'
            f'[search.baseline]\n"{shard}" = 1\n"--max_batch_size" = 64\n"--tokens" = 1\n',
        )
    )
    planner = run_planner(RunState(), config).planner
    assert planner.settings.parallelism == engine_for(config).profile.parallelism
    wide: Flags = {shard: 8, "--max_batch_size": 64, "--tokens": 1}  # one flag changed, 8 GPUs
    two: Flags = {shard: 1, "--max_batch_size": 128, "--tokens": 2}  # two changed, 1 GPU
    reading = planner.read(History(planner.space))
    assert reading.simpler(two, wide) and not reading.simpler(wide, two)
    if profile:  # told no engine, the built-in spellings miss the user's: 8 GPUs counted as 1
        blind = Planner(planner.space, Settings(levels=planner.settings.levels))
        assert blind.read(History(planner.space)).simpler(wide, two)


def test_a_results_gpus_are_counted_by_the_runs_engine_profile(tmp_path: Path) -> None:
    """The per-GPU chart and the $ per hour of a per-GPU price (results.gpus_used): by the run
    engine's profile, a user's file's too (recorded_engine, as the report reads the run's
    config), else by the engine the result names."""
    from tools.bench.results import gpus_used
    from tools.bench.schema import BenchResult, ClientInfo, ServerRef, Workload
    from tools.servers.profiles import recorded_engine

    def result(command: str, engine: str | None) -> BenchResult:
        server = ServerRef(command=command, engine=engine)
        return BenchResult(id="b001", created="2026-01-01T00:00:00Z", config_hash="x",
                           server=server, workload=Workload(), client=ClientInfo(), levels=[],
                           points=[])  # fmt: skip

    trt = result("trtllm-serve /m --tp_size 4 --pp_size 2", "trtllm")
    assert gpus_used(trt) == 8
    assert gpus_used(trt, ENGINES["vllm"].profile.parallelism) == 1  # not vLLM's spelling
    write(tmp_path / "tgi.toml", 'name = "tgi"\n[parallelism]\ntensor = ["--num-shard"]\n')
    tgi = result("text-generation-launcher --num-shard 4", "tgi")
    assert gpus_used(tgi) == 1  # a name no built-in profile has: its spelling is unknown
    engine = recorded_engine({"engine": "sim", "profile": str(tmp_path / "tgi.toml")})
    assert engine.name == "tgi" and gpus_used(tgi, engine.profile.parallelism) == 4
    assert recorded_engine({"engine": "trtllm"}).name == "trtllm"
    # a profile file gone since the run: the built-in engine it names
    assert (
        recorded_engine({"engine": "vllm", "profile": str(tmp_path / "gone.toml")}).name == "vllm"
    )


def test_no_code_names_trtllm_its_profile_file_is_the_whole_engine() -> None:
    """Issue 45's proof that a new engine is a profile file: no string in the code (docstrings
    aside) names TensorRT-LLM - its launcher, flags, gauges and processes live in trtllm.toml."""
    import ast

    root = Path(__file__).resolve().parent.parent
    named = []
    for folder in ("agent", "tools", "state", "sim"):
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            docs = {
                id(node.body[0].value)
                for node in ast.walk(tree)
                if isinstance(
                    node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
                )
                and node.body
                and isinstance(node.body[0], ast.Expr)
                and isinstance(node.body[0].value, ast.Constant)
            }
            named += [
                f"{path.relative_to(root)}:{node.lineno}"
                for node in ast.walk(tree)
                if isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docs
                and re.search(r"trtllm|tensorrt|--[tpce]p_size|extra_llm_api", node.value, re.I)
            ]
    assert named == []
