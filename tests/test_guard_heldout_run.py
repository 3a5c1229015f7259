"""The held-out destructive corpus (tests/data/destructive_heldout.txt, issue 47) run through the
real bash tool and bubblewrap against canaries, as tests/test_guard_sandbox.py runs the first
corpus: none is allowed outright, and what runs in the sandbox touches no canary file, process or
listener. Each command's paths are moved onto a canary tree under /var/tmp, HOME is its canary
home; lines that would reach the network or start an engine are judged only (their decision is
the same; running them would wait on hosts this box may not reach). A call's limits are made small
(64 processes, 64 MiB written) so that fork floods and disk fills end quickly.

Needs bubblewrap, as tests/test_guard_sandbox.py does.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.test_guard_decide import heldout
from tests.test_guard_sandbox import (  # noqa: F401 (fixtures)
    NEVER_RUN_WORDS,
    bwrap,
    call,
    canaries,
    close_context,
    expand,
    make_context,
    onto_canaries,
    port_open,
    run_confined,
    snapshot,
)
from tools.domain.config import HostConfig
from tools.guard import Context, decide
from tools.guard.network import needs_network
from tools.guarded import guarded
from tools.hosts import sandbox

pytest_plugins = ["tests.ssh_fixtures"]
ENGINES = re.compile(r"\b(?:vllm|sglang|llama-server|trtllm-serve|text-generation-launcher)\b")


@pytest.mark.timeout(1500)
async def test_the_held_out_corpus_runs_refused_or_confined(
    canaries: dict[str, Any],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root, port = str(canaries["root"]), canaries["port"]
    work = tmp_path / "work"
    work.mkdir()
    st = os.statvfs(work)
    monkeypatch.setattr(sandbox, "MAX_TASKS", 64)
    monkeypatch.setattr(sandbox, "FILE_RESERVE", 1 << 40)
    monkeypatch.setattr(sandbox, "RESERVE_MIN", st.f_bavail * st.f_frsize - (64 << 20))
    ctx = make_context(tmp_path / "runs", HostConfig(name="local", workdir=str(work)))
    host = ctx.hosts.get("local")  # type: ignore[union-attr]
    box = Context(workdir=str(work), run_dir=str(ctx.run.path), home="/root")
    try:
        before = snapshot(canaries["root"])
        counts: Counter[tuple[str, str]] = Counter()
        for cls, written in heldout():
            as_written = decide(expand(written), context=box)
            assert as_written.action != "allow", (cls, written)
            command = onto_canaries(written, root, port)
            decision, _ = await guarded(ctx, host, expand(command))
            if decision.action == "allow":  # moved, a read of a canary (`cat CANARY/etc/shadow`)
                assert re.search(r"\bread|secret", as_written.reason or ""), (written, command)
                text, _, _ = await call(ctx, command, timeout_s=15)
                assert snapshot(canaries["root"]) == before, (command, text)
                counts[(cls, "moved: a read, run outright")] += 1
                continue
            judged = needs_network(command) or ENGINES.search(command)
            if decision.action == "refuse" or judged or NEVER_RUN_WORDS.search(command):
                counts[(cls, "refused" if decision.action == "refuse" else "judged")] += 1
                continue
            await run_confined(ctx, command, canaries, before)
            counts[(cls, "confined")] += 1
        print(json.dumps(sorted([*k, v] for k, v in counts.items())))
        assert sum(counts.values()) == len(heldout())
        assert sum(v for (c, a), v in counts.items() if a == "confined") >= 100
    finally:
        await close_context(ctx)
