"""The benchmark against servers nobody here wrote (tests/foreign_server.py mimics them): zero
failed requests where llama-server closes after each stream and splits its last CRLF off, or a
response comes a byte at a time; tokens counted from the chunks where no usage message comes;
prompt lengths calibrated with the server's tokenizer; no sweep re-sending an earlier one's
prompts, across a resume too; a server that cannot be measured is an error result."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from state.run import Run
from tests.foreign_server import ForeignServer, toy_tokens
from tools.base import ToolBox, ToolContext
from tools.bench.schema import Workload
from tools.bench.sweep import SweepSpec, run_sweep
from tools.domain.config import lab_config
from tools.run_benchmark import RunBenchmark


@pytest.fixture
async def llama() -> AsyncIterator[tuple[ForeignServer, str]]:
    server = ForeignServer("llama")
    url = await server.start()
    yield server, url
    await server.stop()


def sweep(url: str, levels: list[int], processes: int = 0, **kw: Any) -> SweepSpec:
    wl = Workload(
        input_len=kw.pop("input_len", 16),
        max_tokens=kw.pop("max_tokens", 8),
        requests_per_level=kw.pop("n", None),
        warmup_requests=1,
    )
    return SweepSpec(url=url, levels=levels, workload=wl, processes=processes, **kw)


@pytest.mark.parametrize("processes", [0, 1])
async def test_llama_server_closing_after_each_stream_loses_no_request(
    llama: tuple[ForeignServer, str], processes: int
) -> None:
    server, url = llama
    out = await run_sweep(sweep(url, [1, 2, 4, 8], processes))
    for p in out.points:
        n = max(5 * p["max_concurrency"], 10)
        assert (p["completed"], p["failed"], p["errors"]) == (n, 0, {}), p["max_concurrency"]
        assert p["total_output_tokens"] == 8 * n and not p["level_failed"]
    assert not any("failed" in note for note in out.notes)
    # the server closed after every response, so every request had a connection of its own
    assert server.connections >= len(server.bodies)


async def test_a_response_written_one_byte_at_a_time_arrives_whole() -> None:
    server = ForeignServer("bytewise")
    url = await server.start()
    try:
        out = await run_sweep(sweep(url, [2], n=4, max_tokens=3))
    finally:
        await server.stop()
    p = out.points[0]
    assert (p["completed"], p["failed"], p["total_output_tokens"]) == (4, 0, 12)
    assert p["chunks"] == 12 and p["usage_counted"] == 0


async def test_prompt_length_is_calibrated_with_the_servers_tokenizer(
    llama: tuple[ForeignServer, str],
) -> None:
    _, url = llama
    words = await run_sweep(sweep(url, [2], input_len=64, tokenize_path=None))
    assert words.prompts["length"] == "words" and words.prompts["words"] == 64
    by_words = words.points[0]["total_input_tokens"] / words.points[0]["completed"]
    assert by_words > 1.2 * 64  # the toy vocabulary: not one token per word
    tok = await run_sweep(sweep(url, [2], input_len=64))
    assert tok.prompts["length"] == "tokenizer" and tok.prompts["words"] < 64
    lens = tok.points[0]["input_lens"]
    assert abs(sum(lens) / len(lens) - 64) <= 0.03 * 64, lens
    assert "/tokenize" in tok.prompts["length_detail"]


async def test_a_stream_without_usage_is_counted_from_its_chunks() -> None:
    server = ForeignServer("nousage")
    url = await server.start()
    try:
        out = await run_sweep(sweep(url, [1, 3], input_len=32, max_tokens=6))
    finally:
        await server.stop()
    for p in out.points:
        assert p["failed"] == 0 and p["usage_counted"] == p["completed"] > 0
        assert p["total_output_tokens"] == 6 * p["completed"]  # the empty last chunk is no token
        assert p["early_eos"] == 0 and p["output_throughput"] > 0
        assert set(p["input_lens"]) == {out.prompts["expected_tokens"]}
    assert abs(out.prompts["expected_tokens"] - 32) <= 1
    assert any(n.startswith("usage: counted from chunks at C=1, C=3") for n in out.notes)


async def test_extra_body_fields_go_into_every_request(llama: tuple[ForeignServer, str]) -> None:
    server, url = llama
    await run_sweep(sweep(url, [2], n=4, extra_body={"cache_prompt": False}))
    assert len(server.bodies) == 5  # one warm-up, four measured
    assert all(b["cache_prompt"] is False for b in server.bodies)


async def test_the_same_prompt_seed_sends_the_same_prompts(
    llama: tuple[ForeignServer, str],
) -> None:
    server, url = llama
    await run_sweep(sweep(url, [2, 3], n=4, prompt_seed=42))
    first = list(server.prompts)
    server.bodies.clear()
    await run_sweep(sweep(url, [2, 3], n=4, prompt_seed=42))
    assert sorted(server.prompts) == sorted(first)  # reproducible
    server.bodies.clear()
    await run_sweep(sweep(url, [2, 3], n=4, prompt_seed=43))
    assert not set(server.prompts) & set(first)  # another sweep: other prompts
    assert toy_tokens(first[0]) > 16  # (the words path: 16 toy words are more tokens)


def context(run: Run) -> ToolContext:
    config = lab_config()
    config.bench = config.bench.model_copy(update={"requests_per_level": 4, "warmup_requests": 1})
    return ToolContext(run=run, config=config)


async def test_no_sweep_of_a_run_resends_an_earlier_sweeps_prompts(
    tmp_path: Path, llama: tuple[ForeignServer, str]
) -> None:
    server, url = llama
    box = ToolBox([RunBenchmark()])
    inp = {"url": url, "concurrency": [1, 2], "input_len": 16, "max_tokens": 4}
    run = Run.create(tmp_path / "runs", "r1")
    for label in ("baseline", "baseline"):  # an A/A pair: the same configuration twice
        res, _ = await box.call(context(run), "run_benchmark", {**inp, "label": label})
        assert not res.is_error, res.text
    run.close()
    resumed = Run.open(tmp_path / "runs" / "r1")  # `agent resume`: the log goes on
    res, _ = await box.call(context(resumed), "run_benchmark", inp)
    assert not res.is_error, res.text
    prompts = server.prompts
    assert len(prompts) == 3 * (4 + 4 + 2)  # three sweeps of two levels: measured and warm-ups
    assert len(set(prompts)) == len(prompts), "a prompt was sent twice"
    saved = json.loads(Path(res.data["path"]).read_text())
    assert saved["prompts"]["length"] == "tokenizer" and saved["prompts"]["seed"] > 0


async def test_a_server_that_cannot_be_measured_is_an_error_result(tmp_path: Path) -> None:
    server = ForeignServer("broken")
    url = await server.start()
    try:
        run = Run.create(tmp_path / "runs", "r1")
        res, _ = await ToolBox([RunBenchmark()]).call(
            context(run), "run_benchmark", {"url": url, "concurrency": [1, 2], "max_tokens": 4}
        )
    finally:
        await server.stop()
    assert res.is_error
    first = res.text.splitlines()[0]
    assert first.startswith("benchmark failed at every level: 8 of 8 requests failed with")
    assert "http_500" in first and "the model is broken" in first
    saved = json.loads(Path(res.data["path"]).read_text())  # kept, for the record
    assert all(p["level_failed"] for p in saved["points"])
    assert res.data["summary"] == {"1": 0.0, "2": 0.0} and res.data["failed_levels"] == [1, 2]
