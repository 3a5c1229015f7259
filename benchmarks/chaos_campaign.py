"""Chaos at the campaign's level: each hostile engine of benchmarks/chaos.py tuned by `agent run`
(issue 23: the table's `agent replay --check` column for the engine's side).

    .venv/bin/python -m benchmarks.chaos_campaign [--only NAME ...] [--hang-s 240]

benchmarks/chaos.py sweeps each hostile engine with the benchmark client alone. Here the same
engine is a server process (`python -m tests.hostile_server`) that a whole campaign starts,
benchmarks, kills and concludes on: `agent run` (the autopilot, a space of two values of a flag
the server ignores) with the scaled-down deadlines of chaos.py in `[bench.deadlines]`; the engine
serves readiness's test completion whole (`--healthy-first 1`) and misbehaves from then on. Per
scenario: what the run's benchmarks recorded, how the run ended (status, exit code), the seconds
to it, what was left running (a process of the scenario, anything listening on its port), and
whether `agent replay RUN --check` passes. The right outcome: the run ends by itself, every level
on the hostile engine failed with the kind chaos.py expects (or, where the engine misbehaves
before its first level, its start or the sweep failed with that reason), and no configuration is
recommended from a failed level (a false finish).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.chaos import ENGINE, EngineScenario, Outcome, summary

ROOT = Path(__file__).resolve().parent.parent
AGENT = [sys.executable, "-m", "agent.cli"]

# the client-side scenarios the server process cannot play (a restart driven from the harness)
SKIP = ("restarts on the same port",)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(scenario: EngineScenario, port: int, tag: str) -> str:
    opts = {"mode": "ok", **scenario.server}
    flags = [f"--{k.replace('_', '-')} {v}" for k, v in opts.items()]
    command = (
        f"PYTHONPATH={shlex.quote(str(ROOT))} {shlex.quote(sys.executable)} "
        f"-m tests.hostile_server {' '.join(flags)} --healthy-first 1 --chaos-tag {tag}"
    )
    deadlines = "\n".join(
        f"{k} = {v}" for k, v in scenario.deadlines.to_job().items() if v is not None
    )
    levels = ", ".join(str(c) for c in scenario.levels)
    return f"""
[[hosts]]
name = "local"

[server]
engine = "openai"
host = "local"
command = {json.dumps(command)}
port = {port}
ready_timeout_s = 30

[search]
"--variant" = ["a", "b"]
[search.baseline]
"--variant" = "a"

[bench]
concurrency = [{levels}]
requests_per_level = {scenario.requests}
min_level_s = 0  # the scenario's own counts: the deadlines are under test, not the lengths
warmup_requests = 1
input_len = 8
max_tokens = 8

[bench.deadlines]
{deadlines}
"""


def _left(tag: str, port: int) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if tag in cmd and "chaos_campaign" not in cmd:
            found.append(f"process {entry.name} ({cmd[:60].strip()})")
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) == 0:
            found.append(f"something listens on :{port}")
    return found


def _events(run_dir: Path) -> list[dict[str, object]]:
    """The run's events; a benchmark's carries its levels' error kinds from its result file."""
    path = run_dir / "events.jsonl"
    if not path.exists():
        return []
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for e in events:
        if e.get("type") == "benchmark":
            result = json.loads(Path(str(e["path"])).read_text())
            e["errors"] = sorted({k for p in result["points"] for k in p.get("errors") or {}})
    return events


@dataclass
class CampaignScenario:
    """One hostile engine tuned by a whole campaign, then replayed."""

    engine: EngineScenario
    hang_s: float = 240.0

    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def expect(self) -> str:
        return self.engine.expect

    async def run(self) -> Outcome:
        return await asyncio.to_thread(self._run)

    def _run(self) -> Outcome:
        tag = f"chaos-{os.getpid()}-{abs(hash(self.name)) % 10**8}"
        port = _free_port()
        with tempfile.TemporaryDirectory(prefix="chaos-campaign-") as tmp:
            cfg = Path(tmp) / "agent.toml"
            cfg.write_text(_config(self.engine, port, tag))
            runs = Path(tmp) / "runs"
            env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
            env["PYTHONPATH"] = str(ROOT)
            argv = [*AGENT, "run", "--goal", "beat baseline", "--config", str(cfg),
                    "--runs-dir", str(runs), "--run-id", "chaos",
                    "--model", "autopilot"]  # fmt: skip
            t0 = time.monotonic()
            hang = False
            try:
                proc = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True,
                                      timeout=self.hang_s)  # fmt: skip
                code: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                hang, code = True, None
            seconds = time.monotonic() - t0
            left = _left(tag, port)
            events = _events(runs / "chaos")
            replay = subprocess.run(
                [*AGENT, "replay", "chaos", "--check", "--runs-dir", str(runs)],
                cwd=tmp, env=env, capture_output=True, text=True, timeout=self.hang_s,
            )  # fmt: skip
            replay_said = "passes" if replay.returncode == 0 else (
                "DRIFT: " + (replay.stdout + replay.stderr).strip().splitlines()[-1][:60]
            )  # fmt: skip
        got, right, false_finish = self._judge(events, code, hang)
        out = Outcome(self.name, self.expect, got, seconds, right, false_finish, hang, left)
        out.replay = replay_said
        return out

    def _judge(
        self, events: list[dict[str, object]], code: int | None, hang: bool
    ) -> tuple[str, bool, bool]:
        """(the outcome in words, whether it is the right one, whether it is a false finish)."""
        if hang:
            return "hang", False, False
        what, detail = self.engine.expect_as
        kinds: set[str] = set()
        levels = failed = 0
        for e in events:
            if e.get("type") == "benchmark":
                points = e.get("points") or {}
                assert isinstance(points, dict)
                for p in points.values():
                    levels += 1
                    failed += bool(p.get("level_failed"))
                errors = e["errors"]
                assert isinstance(errors, list)
                kinds |= set(errors)
        starts_failed = sum(e.get("type") == "server_failed" for e in events)
        end = next((e for e in reversed(events) if e.get("type") == "run_finished"), {})
        rec = next((e for e in reversed(events) if e.get("type") == "recommendation"), None)
        text = (
            f"{failed}/{levels} levels failed ({', '.join(sorted(kinds - {'abandoned'})) or '-'})"
            f", {starts_failed} starts failed; {end.get('status', '?')} exit {code}"
        )
        ended = code is not None and end != {}
        measured = levels - failed
        if what == "measured":
            return text, ended and levels > 0 and failed == 0, False
        # a recommendation of a gain read from levels that failed is a false finish
        claimed = rec is not None and bool(rec.get("gain") or 0) and measured == 0
        if what == "error":  # the engine misbehaves before any level: the run ends saying why
            said = detail in str(end.get("reason", ""))
            return text, ended and said and measured == 0 and not claimed, claimed
        named = kinds - {"abandoned"}
        kind_ok = detail in named if not self.engine.only_kind else named <= {detail} and named
        return text, ended and failed > 0 and bool(kind_ok) and not claimed, claimed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", help="scenarios whose name contains one of these")
    ap.add_argument("--hang-s", type=float, default=240.0, help="a run past this is a hang")
    ns = ap.parse_args(argv)
    chosen = [
        CampaignScenario(s, ns.hang_s)
        for s in ENGINE
        if not any(w in s.name for w in SKIP) and (not ns.only or any(w in s.name for w in ns.only))
    ]
    print(
        f"{'scenario':42} {'right outcome':24} {'outcome':64} {'s':>6} {'left':>4}  replay --check"
    )
    results = []
    for s in chosen:
        r = asyncio.run(s.run())
        results.append(r)
        mark = "ok" if r.right and not r.left else "WRONG"
        print(f"{r.name[:42]:42} {r.expect[:24]:24} {r.got[:64]:64} {r.seconds:6.1f} "
              f"{len(r.left):4}  {r.replay}  {mark}", flush=True)  # fmt: skip
        for thing in r.left:
            print(f"    left running: {thing}")
    right = sum(r.right for r in results)
    replayed = sum(r.replay == "passes" for r in results)
    print(f"right outcomes {right}/{len(results)}, replay --check passes {replayed}/{len(results)}")
    print(summary(results))
    bad = right < len(results) or replayed < len(results)
    return 1 if bad or any(r.hang or r.false_finish or r.left for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
