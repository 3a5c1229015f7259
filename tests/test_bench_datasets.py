"""Datasets (ShareGPT, JSONL, the built-in chat), the workload options' parsing, the open-loop
schedule, and the workload key that keeps compare from mixing workloads."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

import pytest

from tools.bench import datasets, workload_options
from tools.bench.confighash import config_hash, workload_key
from tools.bench.openloop import arrivals
from tools.bench.sample import estimate_tokens
from tools.bench.schema import Workload


def sharegpt(path: Path, n: int) -> Path:
    rows = [
        {
            "id": str(k),
            "conversations": [
                {"from": "system", "value": "be nice"},
                {"from": "human", "value": f"question {k} " + "why " * k},
                {"from": "gpt", "value": "yes " * (10 * k)},
                {"from": "human", "value": "and a second turn, ignored"},
            ],
        }
        for k in range(1, n + 1)
    ]
    rows.append({"conversations": [{"from": "gpt", "value": "no human turn: skipped"}]})
    path.write_text(json.dumps(rows))
    return path


def test_sharegpt_first_human_turn_is_the_prompt_and_the_reply_its_length(
    tmp_path: Path,
) -> None:
    ds = datasets.load(f"sharegpt:{sharegpt(tmp_path / 'sg.json', 5)}")
    assert ds.kind == "sharegpt" and len(ds.samples) == 5 and len(ds.digest) == 16
    by_prompt = {s.prompt: s for s in ds.samples}
    third = by_prompt["question 3 " + "why " * 3]
    assert third.output_len == 30 and third.prompt_tokens == estimate_tokens(third.prompt) == 5


def test_jsonl_prompts_and_messages(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = [
        {"prompt": "hello there", "output_len": 7},
        {"prompt": "no length given"},
        {
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": "a b c"},
                {"role": "user", "content": "the last user message"},
                {"role": "assistant", "content": "one two three four"},
            ]
        },
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    samples = datasets.load(f"jsonl:{path}").samples
    assert [(s.prompt, s.output_len) for s in samples] == [
        ("hello there", 7),
        ("no length given", None),
        ("the last user message", 4),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"prompt": "ok"}\nnot json\n', "t.jsonl:2 is not a JSON object"),
        ('{"text": "x"}\n', "t.jsonl:1: needs a 'prompt' string or a 'messages' list"),
        ('{"prompt": "x", "output_len": 0}\n', "t.jsonl:1: output_len must be a positive"),
        ('{"messages": [{"role": "assistant", "content": "x"}]}\n', "no user message"),
        ("", "has no usable prompt"),
    ],
)
def test_a_bad_jsonl_line_is_named(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(content)
    with pytest.raises(datasets.DatasetError, match=message):
        datasets.load(f"jsonl:{path}")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("sonnet", "unknown dataset 'sonnet': random, chat, code, sharegpt:FILE or jsonl:FILE"),
        ("sharegpt:", "dataset sharegpt needs a file"),
        ("chat:x", "dataset chat takes no file"),
        ("sharegpt:/no/such/file.json", "cannot read dataset /no/such/file.json"),
    ],
)
def test_bad_dataset_specs_are_one_line(spec: str, message: str) -> None:
    with pytest.raises(datasets.DatasetError, match=message):
        datasets.load(spec)


def test_levels_take_disjoint_slices_and_each_seed_its_own_order(tmp_path: Path) -> None:
    ds = datasets.load(f"sharegpt:{sharegpt(tmp_path / 'sg.json', 40)}")
    first = datasets.level_samples(ds, 7, 0, 10)
    second = datasets.level_samples(ds, 7, 10, 10)
    assert not {s.prompt for s in first} & {s.prompt for s in second}
    assert datasets.level_samples(ds, 7, 0, 10) == first  # the same seed, the same prompts
    assert datasets.level_samples(ds, 8, 0, 10) != first
    wrapped = datasets.level_samples(ds, 7, 35, 10)  # past the end: reused in order
    assert wrapped[5:] == datasets.level_samples(ds, 7, 0, 5)


def test_chat_is_deterministic_endless_and_realistically_long() -> None:
    ds = datasets.load("chat")
    samples = datasets.level_samples(ds, 1, 0, 2000)
    assert samples[:50] == datasets.level_samples(ds, 1, 0, 50)
    assert not {s.prompt for s in samples[:50]} & {
        s.prompt for s in datasets.level_samples(ds, 2, 0, 50)
    }
    prompts = [s.prompt_tokens for s in samples]
    answers = [s.output_len or 0 for s in samples]
    assert 60 < statistics.median(prompts) < 140 and max(prompts) > 600  # a long tail
    assert 130 < statistics.median(answers) < 240 and min(answers) >= 8
    words = " ".join(s.prompt for s in samples[:200]).split()
    assert len(set(words)) < len(words) / 20  # repetitive, as chat traffic is
    assert samples[0].prompt[0].isupper() and samples[0].prompt.rstrip()[-1] in ".?"


def test_workload_options_parse_and_explain() -> None:
    assert workload_options.rates("5, 20,80") == [5.0, 20.0, 80.0]
    assert workload_options.burstiness("0.5") == 0.5
    assert workload_options.burstiness("constant") == "constant"
    assert workload_options.slo("ttft_ms=200,e2el_ms=3000") == {"ttft": 200.0, "e2el": 3000.0}
    for parse, text, message in [
        (workload_options.rates, "5,x", "comma-separated numbers"),
        (workload_options.rates, "0,5", "positive numbers"),
        (workload_options.burstiness, "-1", "positive number or 'constant'"),
        (workload_options.slo, "ttft=200", "KEY=MS with KEY one of ttft_ms, tpot_ms, e2el_ms"),
        (workload_options.slo, "tpot_ms=fast", "needs a number of ms"),
        (workload_options.dataset, "hf:foo", "unknown dataset"),
    ]:
        with pytest.raises(workload_options.OptionError, match=message):
            parse(text)


def test_poisson_gamma_and_constant_schedules() -> None:
    poisson = arrivals(400, 20.0, 1.0, "s")
    assert poisson[0] == 0.0 and poisson[-1] == pytest.approx(399 / 20)
    assert poisson == sorted(poisson) and poisson == arrivals(400, 20.0, 1.0, "s")

    def gap_cv(times: list[float]) -> float:
        gaps = [b - a for a, b in itertools.pairwise(times)]
        return statistics.pstdev(gaps) / statistics.fmean(gaps)

    assert 0.85 < gap_cv(poisson) < 1.15  # exponential gaps: CV 1
    assert gap_cv(arrivals(400, 20.0, 0.25, "s")) > 1.6  # burstier: CV 1/sqrt(B) = 2
    assert gap_cv(arrivals(400, 20.0, 16.0, "s")) < 0.4  # steadier: CV 0.25
    assert arrivals(4, 2.0, "constant", "s") == [0.0, 0.5, 1.0, 1.5]


def test_the_workload_key_sees_traffic_and_data_but_keeps_old_hashes(tmp_path: Path) -> None:
    plain = Workload(model="m").model_dump()
    assert set(workload_key(plain)) == {
        "endpoint",
        "input_len",
        "max_tokens",
        "ignore_eos",
        "temperature",
        "model",
    }  # a default workload hashes as before the traffic fields existed
    rate = Workload(model="m", traffic="rate", duration_s=20).model_dump()
    assert workload_key(rate)["traffic"] == "rate" and workload_key(rate)["duration_s"] == 20
    assert config_hash(None, plain, "http://h:1") != config_hash(None, rate, "http://h:1")
    a = Workload(model="m", dataset="sharegpt:/a/x.json", dataset_digest="d1").model_dump()
    b = Workload(model="m", dataset="sharegpt:/b/y.json", dataset_digest="d1").model_dump()
    c = Workload(model="m", dataset="sharegpt:/a/x.json", dataset_digest="d2").model_dump()
    assert workload_key(a) == workload_key(b) != workload_key(c)  # the content, not the path
