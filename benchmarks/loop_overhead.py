"""The loop's own cost per step, and the time to fold a long event log.

    .venv/bin/python -m benchmarks.loop_overhead [--steps 1000]

Generates a STEPS-turn Claude session (todo tools, periodic compactions, as a long campaign would
have), records it through the real loop, then replays it and measures, per step, the wall time of
the step minus the brain's time and the tools' time: what the loop itself costs (event writes with
fsync, the fold, building the request). Prints the median and p90, and the time to fold the log.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.brains.base import Turn, TurnRequest
from agent.session_replay import replay
from state.events import read_events
from state.fold import fold
from tests.sessions.make_sessions import Script, call, record, say, todo


def long_session(steps: int) -> Script:
    s = Script("long")
    plan = [todo(f"t{i}", f"Experiment {i}", "pending") for i in range(12)]
    for i in range(steps - 1):
        plan = [
            dict(t, status="completed" if j < i % 12 else "pending") for j, t in enumerate(plan)
        ]
        plan[i % 12]["status"] = "in_progress"
        plan[i % 12]["content"] = f"Experiment {i % 12}, attempt {i}"
        s.turn(say(f"Step {i}."), call("todowrite", todos=plan), call("todoread"))
    s.turn(say("done"), stop="end_turn")
    return s


class Timed:
    """Wraps a brain or a toolbox method and adds up the time spent inside it."""

    def __init__(self) -> None:
        self.spent = 0.0

    def wrap(self, fn: Any) -> Any:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - start

        return timed


async def measure(source: Path, runs_dir: Path) -> list[float]:
    import agent.session_replay as replay_module

    overheads: list[float] = []
    original = replay_module.make_agent

    def instrumented(*args: Any, **kwargs: Any) -> Any:
        agent = original(*args, **kwargs)
        outside = Timed()
        agent.brain.next_turn = outside.wrap(agent.brain.next_turn)  # type: ignore[method-assign]
        step = agent.step

        async def timed_step() -> None:
            tools_call = agent.tools.call
            agent.tools.call = outside.wrap(tools_call)  # type: ignore[method-assign]
            outside.spent = 0.0
            start = time.perf_counter()
            try:
                await step()
            finally:
                overheads.append(time.perf_counter() - start - outside.spent)
                agent.tools.call = tools_call  # type: ignore[method-assign]

        agent.step = timed_step  # type: ignore[method-assign]
        return agent

    replay_module.make_agent = instrumented
    try:
        code, _, drift = await replay(source, runs_dir)
    finally:
        replay_module.make_agent = original
    assert code == 0 and drift is None, (code, drift)
    return overheads


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        import tests.sessions.make_sessions as sessions

        sessions.session_config = lambda: _config()  # compact at 30k tokens
        source = asyncio.run(
            record(long_session(args.steps), Path(tmp) / "rec", 10 * args.steps, True)
        )
        n_events = len(read_events(source).events)
        size_mb = source.stat().st_size / 1e6
        overheads = asyncio.run(measure(source, Path(tmp) / "replay"))
        ms = sorted(o * 1000 for o in overheads)
        start = time.perf_counter()
        state = fold(read_events(source).events)
        fold_s = time.perf_counter() - start
    print(
        f"session: {state.steps} model turns, {n_events} events, {size_mb:.1f} MB, "
        f"{state.compactions} compactions"
    )
    print(
        f"loop overhead per step: median {statistics.median(ms):.2f} ms, "
        f"p90 {ms[int(len(ms) * 0.9)]:.2f} ms, max {ms[-1]:.2f} ms (target: median < 5 ms)"
    )
    print(f"fold of the whole log (read + parse + apply): {fold_s * 1000:.0f} ms (target < 1 s)")


def _config() -> Any:
    from tools.domain.config import CompactionConfig, Config, ServerConfig

    return Config(
        server=ServerConfig(engine="sim", command="true", port=30000),
        compaction=CompactionConfig(threshold_tokens=30_000, keep_turns=4, keep_tool_tokens=2000),
    )


_ = TurnRequest, Turn  # the types the timed brain passes through

if __name__ == "__main__":
    main()
