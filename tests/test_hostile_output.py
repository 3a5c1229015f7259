"""Hostile tool output: floods of text, binary and escape sequences cost bounded memory, and the
model gets short, clean text while the output is kept under the run's outputs/.

Each case runs in its own interpreter (benchmarks/hostile_output.py), so its peak RSS is its own.
The bound asserted is generous (the figures are in docs/reliability.md); what it catches is memory
that grows with the output, which at 100 MB would be far above it.
"""

from __future__ import annotations

import pytest

from benchmarks.hostile_output import commands, measure

MB = 100
PEAK_RSS_BOUND_MB = 400  # measured: 100-300 MB, the same at 20 MB as at 100 MB of output
ESC = "\x1b"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", list(commands(1)))
def test_a_flood_costs_bounded_memory_and_the_model_gets_clean_text(case: str) -> None:
    r = measure(case, MB, timeout=240)
    assert r["peak_rss_mb"] < PEAK_RSS_BOUND_MB, r
    assert not r["is_error"], r
    assert r["text_chars"] < 13_000, r  # the model sees head and tail only
    assert r["control_chars"] == 0 and ESC not in r["body_start"], r
    assert "full text:" in r["head"] and r["saved_bytes"] > 1_000_000, r  # the rest is on disk
    if case == "ansi":
        assert "red" in r["body_start"] and "42%" in r["body_start"], r["body_start"]
        assert "red" in r["saved_start"]
    if case in ("lines", "one-line", "binary"):
        # beyond the 16 MiB capture the middle is dropped, and the model is told how much
        assert "bytes beyond the capture limit were dropped" in r["head"], r["head"]
    if case == "lines":
        assert r["body_start"].startswith("a line of output, 32 bytes..")
        assert r["saved_start"].startswith("a line of output, 32 bytes..")
    if case == "binary":
        assert "\ufffd" in r["body_start"]  # undecodable bytes are replaced, not passed on
