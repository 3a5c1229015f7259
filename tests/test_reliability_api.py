"""Model API faults at a 20 % rate (429 with retry-after, 500, 529, timeouts, connection resets),
injected by the replay transport under the real anthropic SDK, over every recorded Claude session
and several seeds: each run completes with the same result as without faults. (Fatal 400/401:
tests/test_replay.py.)"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agent.brains.replay import Faults
from agent.session_replay import replay
from state.events import read_events

SESSIONS = [
    p
    for p in sorted((Path(__file__).parent / "sessions").glob("*.jsonl"))
    if any(e["type"] == "api_exchange" for e in read_events(p).events)
]
SEEDS = range(1, 8)
KINDS = {"429", "500", "529", "timeout", "reset"}


def outcome(path: Path) -> dict[str, Any]:
    """What a run decided and did: its tool calls and results, its todos, how it ended."""
    events = read_events(path).events
    end = events[-1]
    return {
        "calls": [(e["name"], e["input"]) for e in events if e["type"] == "tool_call"],
        "results": [(e["text"], e["is_error"]) for e in events if e["type"] == "tool_result"],
        "todos": [e["todos"] for e in events if e["type"] == "todo"],
        "end": (end["type"], end["status"], end["reason"]),
    }


@pytest.mark.timeout(300)
async def test_every_session_under_faults_completes_the_same(tmp_path: Path) -> None:
    assert len(SESSIONS) >= 2
    injected: Counter[str] = Counter()
    for path in SESSIONS:
        code, clean, drift = await replay(path, tmp_path / f"{path.stem}-clean")
        assert (code, drift) == (0, None)
        expected = outcome(clean.events_path)
        for seed in SEEDS:
            faults = Faults(rate=0.2, seed=seed)
            code, run, drift = await replay(path, tmp_path / f"{path.stem}-{seed}", faults=faults)
            assert (code, drift) == (0, None), (path.stem, seed, drift)
            assert outcome(run.events_path) == expected, (path.stem, seed)
            injected.update(faults.injected)
    print(f"faults injected: {dict(injected)} (total {sum(injected.values())})")
    assert set(injected) == KINDS  # every kind was met and retried through
    assert sum(injected.values()) >= 20
