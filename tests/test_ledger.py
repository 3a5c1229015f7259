"""The ledger: append-only across runs, lookup by config hash, a torn last line survived."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from state.ledger import Ledger


def entry(
    h: str, i: str, summary: dict[str, float], failed: list[int] | None = None
) -> dict[str, object]:
    return {
        "config_hash": h,
        "id": i,
        "run_id": "r1",
        "summary": summary,
        "failed_levels": failed or [],
    }


def test_append_and_lookup(tmp_path: Path) -> None:
    ledger = Ledger.in_runs_dir(tmp_path / "runs")
    ledger.append(entry("aaa", "b001", {"1": 90.0, "10": 700.0}))
    ledger.append(entry("bbb", "b002", {"1": 50.0}))
    ledger.append(entry("aaa", "b003", {"1": 92.0, "10": 0.0}, failed=[10]))
    assert [e["id"] for e in ledger.lookup("aaa")] == ["b001", "b003"]
    assert ledger.lookup("zzz") == []
    assert ledger.measured_levels("aaa") == {"1": [90.0, 92.0], "10": [700.0]}
    assert all("ts" in e for e in ledger.entries())
    lines = (tmp_path / "runs" / "ledger.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line) for line in lines)


def test_a_torn_last_line_is_skipped_then_cut(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(entry("aaa", "b001", {"1": 90.0}))
    with ledger.path.open("ab") as f:
        f.write(b'{"config_hash": "aaa", "id": "b0')  # a crash in the middle of a write
    assert [e["id"] for e in ledger.lookup("aaa")] == ["b001"]
    assert ledger.repaired and "torn" in ledger.repaired
    ledger.append(entry("aaa", "b002", {"1": 91.0}))
    assert [e["id"] for e in ledger.lookup("aaa")] == ["b001", "b002"]
    assert ledger.path.read_bytes().count(b"\n") == 2


def _writer(path: str, k: int) -> None:
    ledger = Ledger(Path(path))
    for i in range(25):
        ledger.append(entry("h", f"{k}-{i}", {"1": float(i)}) | {"pad": "x" * 5000})


def test_concurrent_writers_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    procs = [
        multiprocessing.get_context("spawn").Process(target=_writer, args=(str(path), k))
        for k in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    entries = Ledger(path).entries()
    assert len(entries) == 75 and len({e["id"] for e in entries}) == 75
