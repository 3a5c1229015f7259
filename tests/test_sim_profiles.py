"""Simulator physics from profile files (sim/profiles/*.toml): the reference box restated as data,
profile flags, effects and interaction terms, start-failure rules, the built-in spaces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim import cli
from sim import profile as profiles
from sim.flags import FlagError, parse_server_args
from sim.space import DEFAULT_BASE_FLAGS, SpaceError, default_space, lab_names, load_lab
from sim.truth import baseline_of, enumerate_space, model_of, throughput
from tools.domain.lab_truth import config_value, optimum

LEVELS = [1, 2, 5, 10, 30, 70, 100, 250]


def test_the_reference_profile_is_todays_box_exactly() -> None:
    """Every configuration of the lab's space has the same truth, bit for bit, with
    --profile reference as with the built-in box, and the file's space is the lab's."""
    with_file = ["--profile", "reference", *DEFAULT_BASE_FLAGS]
    for config in enumerate_space(default_space()):
        assert throughput(config, LEVELS, base=with_file) == throughput(config, LEVELS)
        assert model_of(config, with_file).failure == model_of(config).failure
    lab = load_lab("reference")
    assert lab.space == default_space() and lab.levels == LEVELS


def test_the_shipped_spaces_are_listed_and_each_has_a_valid_baseline() -> None:
    names = lab_names()
    assert {
        "reference",
        "interactions",
        "speculative",
        "llamacpp-cpu",
        "triple",
        "single-level",
    } <= set(names)
    for name in names:
        lab = load_lab(name)
        configs = enumerate_space(lab.space, lab.base)
        assert baseline_of(lab.space) in configs, name
        assert config_value(baseline_of(lab.space), lab.levels, base=lab.base) > 0, name


def test_interactions_profile_a_pair_gains_much_more_than_its_parts() -> None:
    lab = load_lab("interactions")
    base = baseline_of(lab.space)

    def value(**flags: object) -> float:
        config = {**base, **{f"--enable-{k.replace('_', '-')}": v for k, v in flags.items()}}
        return config_value(config, lab.levels, max_tokens=128, base=lab.base)

    v0 = value()
    tbo, dp = value(two_batch_overlap=True) / v0, value(dp_attention=True) / v0
    pair = value(two_batch_overlap=True, dp_attention=True) / v0
    assert tbo < 1.01 and dp < 1.01, "each part gains little alone"
    assert pair > 1.08 and pair > 4 * (tbo * dp - 1) + 1, "together much more"
    best, _ = optimum(lab.space, lab.levels, max_tokens=128, base=lab.base)
    assert best["--enable-two-batch-overlap"] and best["--enable-dp-attention"]


def test_speculation_wins_widely_on_the_speculative_profile() -> None:
    lab = load_lab("speculative")
    base = baseline_of(lab.space)
    eagle = {
        **base,
        "--speculative-algorithm": "EAGLE3",
        "--speculative-num-steps": 3,
        "--speculative-eagle-topk": 1,
        "--speculative-num-draft-tokens": 4,
    }
    plain = throughput(base, lab.levels, max_tokens=128, base=lab.base)
    spec = throughput(eagle, lab.levels, max_tokens=128, base=lab.base)
    wins = [c for c in lab.levels if spec[c] > plain[c]]
    assert wins == lab.levels[: len(wins)] and len(wins) >= 7, "up to C=100"
    # on the reference box it wins at one or two streams only: the profile changed the physics
    ref = throughput(eagle, lab.levels, max_tokens=128)
    ref_plain = throughput(base, lab.levels, max_tokens=128)
    assert sum(ref[c] > ref_plain[c] for c in lab.levels) <= 2


def test_cpu_profile_slots_flash_attention_and_a_start_failure_rule() -> None:
    lab = load_lab("llamacpp-cpu")
    base = baseline_of(lab.space)
    assert model_of({**base, "--parallel": 4}, lab.base).max_running == 4
    assert model_of(base, lab.base).max_running == 1  # the flag's default
    q4_off = model_of({**base, "--cache-type-v": "q4_0"}, lab.base)
    assert q4_off.failure is not None and "requires flash_attn" in q4_off.failure.message
    q4_on = model_of({**base, "--cache-type-v": "q4_0", "--flash-attn": "on"}, lab.base)
    assert q4_on.failure is None
    # flash attention pays more with more slots: an interaction the physics carries
    par = throughput({**base, "--parallel": 4}, lab.levels, max_tokens=128, base=lab.base)
    both = throughput(
        {**base, "--parallel": 4, "--flash-attn": "on"}, lab.levels, max_tokens=128, base=lab.base
    )
    fa = throughput({**base, "--flash-attn": "on"}, lab.levels, max_tokens=128, base=lab.base)
    one = throughput(base, lab.levels, max_tokens=128, base=lab.base)
    assert both[8] / par[8] > fa[8] / one[8] + 0.05


def test_a_profile_flag_is_refused_without_its_profile_and_bad_values_are_one_line() -> None:
    with pytest.raises(FlagError):
        parse_server_args(["--flash-attn", "on"])
    with pytest.raises(FlagError, match="invalid choice"):
        parse_server_args(["--profile", "llamacpp-cpu", "--flash-attn", "maybe"])
    args = parse_server_args(["--profile=llamacpp-cpu", "--parallel", "8"])
    assert dict(args.extra)["--parallel"] == 8 and dict(args.extra)["--flash-attn"] == "off"


def test_bad_profiles_fail_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(FlagError, match=r"cannot read profile 'nope'.*shipped: "):
        parse_server_args(["--profile", "nope"])
    cases = {
        "unknown.toml": 'colour = "red"',
        "constant.toml": "[constants]\nwarp_ms = 3.0",
        "effect.toml": '[[effects]]\nwhen = {"--tp" = 8}\nspeed = 2.0',
        "when.toml": "[[effects]]\nfixed = 0.9",
        "malformed.toml": "[constants\n",
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(FlagError) as err:
            parse_server_args(["--profile", str(path)])
        assert "\n" not in str(err.value) and name in str(err.value), name
    with pytest.raises(SpaceError, match="no \\[search\\] table"):
        (tmp_path / "bare.toml").write_text('hardware = "reference"\n')
        load_lab(str(tmp_path / "bare.toml"))


def test_a_profile_file_of_ones_own_changes_the_truth(tmp_path: Path) -> None:
    path = tmp_path / "fast.toml"
    path.write_text(
        'hardware = "reference"\n[constants]\na_ms = 4.0\n'
        '[flags."--turbo"]\n[[effects]]\nwhen = {"--turbo" = true}\nfixed = 0.5\n'
        '[[failures]]\nwhen = {"--turbo" = true, "--attention-backend" = "triton"}\n'
        'message = "turbo needs flashinfer"\n'
    )
    base = ["--profile", str(path), *DEFAULT_BASE_FLAGS]
    plain = throughput({}, [1], base=base)[1]
    assert plain > 1.5 * throughput({}, [1])[1]
    assert throughput({"--turbo": True}, [1], base=base)[1] > 1.3 * plain
    failed = model_of({"--turbo": True, "--attention-backend": "triton"}, base).failure
    assert failed is not None and failed.message == "turbo needs flashinfer"
    assert profiles.load(str(path)).name == "fast"


def test_truth_cli_takes_a_profile(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["truth", "--no-base", "--profile", "llamacpp-cpu", "--concurrency", "1,8", "--json"]
    assert cli.main([*argv, "--parallel", "8", "--flash-attn", "on"]) == 0
    fast = json.loads(capsys.readouterr().out)
    assert cli.main([*argv, "--cache-type-v", "q4_0"]) == 0
    assert json.loads(capsys.readouterr().out) == {"1": 0.0, "8": 0.0}  # does not start
    assert fast["8"] > fast["1"] > 0


def test_the_server_process_fails_to_start_by_the_profiles_rule() -> None:
    argv = [sys.executable, "-m", "sim", "--profile", "llamacpp-cpu", "--tp", "1"]
    argv += ["--cache-type-v", "q4_0", "--load-seconds", "0", "--port", "0"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "V cache quantization requires flash_attn" in out.stdout + out.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "sim", "--profile", "nope", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "cannot read profile 'nope'" in bad.stderr


def test_triple_profile_needs_all_three_parts_each_a_small_loss_alone() -> None:
    """The k >= 3 class: each part loses 1-2.5 % alone (inside the noise), any two lose more, all
    three gain; a neutral switch is there too, as a screen cannot tell it from a part."""
    lab = load_lab("triple")
    base = baseline_of(lab.space)
    parts = ["--enable-dp-attention", "--enable-two-batch-overlap", "--enable-deepep-moe"]

    def ratio(*flags: str) -> float:
        config = {**base, **dict.fromkeys(flags, True)}
        v0 = config_value(base, lab.levels, max_tokens=128, base=lab.base)
        return config_value(config, lab.levels, max_tokens=128, base=lab.base) / v0

    for part in parts:
        assert 0.975 < ratio(part) < 0.99, part
    assert ratio(parts[0], parts[1]) < ratio(parts[0])
    assert ratio(*parts) > 1.05
    assert abs(ratio("--enable-dp-lm-head") - 1) < 1e-9
    best, _ = optimum(lab.space, lab.levels, max_tokens=128, base=lab.base)
    assert all(best[p] for p in parts) and not best["--enable-dp-lm-head"]


def test_single_level_profile_reads_c1_and_small_wins_crash_the_next_move() -> None:
    lab = load_lab("single-level")
    assert lab.objective == {"kind": "level", "level": 1}
    base = baseline_of(lab.space)
    compiled = {**base, "--enable-torch-compile": True}
    eagle = {
        "--speculative-algorithm": "EAGLE3",
        "--speculative-num-steps": 1,
        "--speculative-eagle-topk": 1,
        "--speculative-num-draft-tokens": 2,
    }
    v0 = throughput(base, [1], base=lab.base)[1]
    assert throughput(compiled, [1], base=lab.base)[1] > v0  # a small win alone
    failure = model_of({**compiled, **eagle}, lab.base).failure
    assert failure is not None and "out of memory" in failure.message
    assert model_of({**base, **eagle}, lab.base).failure is None
    assert throughput({**base, **eagle}, [1], base=lab.base)[1] > 1.05 * v0
    graphs = model_of({**compiled, "--cuda-graph-max-bs": 256}, lab.base).failure
    assert graphs is not None and "out of memory" in graphs.message


def test_a_profile_objective_must_name_its_kind() -> None:
    with pytest.raises(profiles.ProfileError, match="objective must be a table"):
        profiles.parse({"objective": {"level": 1}})
    assert profiles.parse({"objective": {"kind": "level", "level": 1}}).objective == {
        "kind": "level",
        "level": 1,
    }
