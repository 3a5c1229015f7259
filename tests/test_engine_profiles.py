"""Engine profiles as data: the shipped ones, a user's own file, a bad file's one-line error, the
llama.cpp diagnoses, the pre-launch flag check from a captured `--help`, speculation flags, and
the version and help probes against a real (scripted) program on the local host."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tools.domain.config import BUILTIN_ENGINES, ConfigError, HostConfig, load_config
from tools.hosts.local import LocalHost
from tools.servers.diagnose import diagnose
from tools.servers.flagcheck import help_check, help_flags, launch_words, parser_check
from tools.servers.probe import UNKNOWN, engine_version, known_check, probe, templates
from tools.servers.profiles import ENGINES, LLAMA_CPP, SGLANG, SIM, ProfileError, engine_for
from tools.servers.profiles import load_profile as load
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
