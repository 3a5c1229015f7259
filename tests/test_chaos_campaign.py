"""A whole campaign against a hostile engine ends by itself, recommends nothing it did not measure,
leaves nothing running, and replays with no drift (benchmarks/chaos_campaign.py; issue 23)."""

from __future__ import annotations

import asyncio

import pytest

from benchmarks.chaos import ENGINE
from benchmarks.chaos_campaign import CampaignScenario

pytestmark = pytest.mark.slow


def _scenario(name: str) -> CampaignScenario:
    return CampaignScenario(next(s for s in ENGINE if s.name == name), hang_s=600)


def test_a_campaign_on_junk_streams_measures_nothing_and_says_why() -> None:
    # readiness's test completion is served whole; every benchmark request after it is junk
    out = asyncio.run(_scenario("`data: {not json`").run())
    assert not out.hang and not out.false_finish, out
    assert out.right, out.got
    assert "bad_response" in out.got and "exit 0" in out.got
    assert out.left == []
    assert out.replay == "passes"


def test_a_healthy_engine_is_measured_through_the_same_harness() -> None:
    # the control: the harness can tell a measured campaign from a failed one
    out = asyncio.run(_scenario("healthy engine (control)").run())
    assert out.right, out.got
    assert out.got.startswith("0/"), out.got  # no level failed
    assert out.left == [] and out.replay == "passes"
