"""The config hash: the same launch spelled differently hashes the same; what changes the
experiment changes the hash."""

from __future__ import annotations

from tools.bench.confighash import canonical_value, config_hash, flag_diff, normalize_command

WL = {
    "endpoint": "completions",
    "input_len": 512,
    "max_tokens": 512,
    "ignore_eos": True,
    "temperature": 0.0,
    "model": "m",
    "seed": 1,
    "requests_per_level": None,
}
BASE = "/venv/bin/python3.11 -m sim --tp 8 --attention-backend flashinfer --port 30000"


def test_spellings_of_one_launch_hash_alike() -> None:
    same = [
        BASE,
        "python -m sim --attention-backend=flashinfer --tp=8 --port 31111 --host 0.0.0.0",
        "/other/env/bin/python -m sim --tp 8.0 --attention_backend flashinfer",
    ]
    assert len({config_hash(c, WL) for c in same}) == 1
    # seed, request count, warm-up and levels are not part of the experiment's identity
    assert config_hash(
        BASE, {**WL, "seed": 9, "requests_per_level": 50, "warmup_requests": 0}
    ) == config_hash(BASE, WL)


def test_what_changes_the_experiment_changes_the_hash() -> None:
    h = config_hash(BASE, WL)
    assert config_hash(BASE + " --cuda-graph-max-bs 64", WL) != h
    assert config_hash(BASE.replace("--tp 8", "--tp 4"), WL) != h
    assert config_hash(BASE, {**WL, "max_tokens": 128}) != h
    assert config_hash(BASE, {**WL, "endpoint": "chat"}) != h
    assert config_hash(BASE, {**WL, "shared_prefix": 2000}) != h
    assert config_hash(BASE, {**WL, "shared_prefix": 0, "cache_reset": "/flush_cache"}) == h
    assert config_hash("vllm serve /models/a --tp 8", WL) != config_hash(
        "vllm serve /models/b --tp 8", WL
    )


def test_normalized_command() -> None:
    n = normalize_command(
        "CUDA_VISIBLE_DEVICES=0,1 vllm serve /models/llama --max-num-seqs 256 --enforce-eager "
        """--speculative-config '{"num_speculative_tokens": 3, "method": "eagle3"}' --port 8000"""
    )
    assert n["env"] == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert n["program"] == ["vllm", "serve", "/models/llama"]
    assert n["flags"] == {
        "--enforce-eager": True,
        "--max-num-seqs": 256,
        "--speculative-config": {"method": "eagle3", "num_speculative_tokens": 3},
    }
    m = normalize_command(
        "python -m sglang.launch_server --model-path /m --mem-fraction-static 0.90"
    )
    assert m["program"] == ["python", "-m", "sglang.launch_server"]
    assert m["flags"]["--mem-fraction-static"] == 0.9


def test_canonical_values_and_flag_diff() -> None:
    assert canonical_value("0.90") == canonical_value(0.9) == 0.9
    assert canonical_value("8") == 8 and canonical_value("True") is True
    assert canonical_value("-1") == -1
    diff = flag_diff({"--a": "1", "--b": True, "--c": False}, {"--a": 1, "--b": None, "--d": "x"})
    assert diff == {"--b": (True, None), "--d": (None, "x")}


def test_bare_url_results_hash_by_address() -> None:
    assert config_hash(None, WL, "http://h:8000/") == config_hash(None, WL, "http://h:8000")
    assert config_hash(None, WL, "http://h:8000") != config_hash(None, WL, "http://h:8001")


def test_llama_server_dash_m_is_its_model_not_a_python_module() -> None:
    n = normalize_command("/opt/llama/bin/llama-server -m /models/t.gguf -t 2 -fa on --port 8080")
    assert n["program"] == ["llama-server"]
    assert n["flags"] == {"--m": "/models/t.gguf", "--t": 2, "--fa": "on"}
    # another model file is another experiment; another build folder is the same one
    base = "llama-server -m /models/t.gguf --threads 2"
    assert config_hash(base, WL) != config_hash(base.replace("t.gguf", "u.gguf"), WL)
    assert config_hash("/a/bin/" + base, WL) == config_hash("/b/bin/" + base, WL)
    # python's own -m still names the module
    assert normalize_command("python3 -m sim --tp 2")["program"] == ["python", "-m", "sim"]
