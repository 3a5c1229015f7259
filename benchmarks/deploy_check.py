"""The deploy files checked for real: start each server of a run's `deploy/` from its launch script
(on a free port), benchmark it with `agent bench` at its levels and the run's workload (the
Reproduce section's command), and compare with what the run recorded for that configuration.

    .venv/bin/python -m benchmarks.deploy_check RUN [RUN ...]

A RUN is a finished run folder with its report written (`agent run` writes it; `agent report RUN`
again). Per server it prints the recorded and the re-measured output tok/s at each level, their
geometric-mean ratio and the run's noise floor over those levels (of one sweep against another,
from the run's repeated sweeps), and "within the floor" or "outside the floor". A policy's
servers are each measured at the levels of their range. Exit 0 when every server is within the
floor, 1 when one is not, 2 when a run cannot be checked.

Not a test: a throughput measured now against one measured during the run depends on what else
the machine ran then and now (docs/report.md, "Deploying the winner", has the figures).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from agent.report import gather
from agent.report.deploy import FOLDER, plan
from agent.report.figures import Figures
from agent.report.measured import Configuration
from agent.report.outcome import policy_servers
from agent.report.runbook import bench_argv
from benchmarks.kill_resume_lab import free_port
from state.events import read_events
from tools.bench import results
from tools.domain import stats
from tools.domain.config import HostConfig
from tools.hosts.local import LocalHost, kill_group
from tools.servers import readiness
from tools.servers.profiles import Engine, recorded_engine
from tools.servers.readiness import Watch

BENCH_S = 3600.0  # a whole sweep of one server (agent bench's own deadlines end a stuck level)
REAP_S = 10.0  # for the killed script's process to be reaped


class CheckError(Exception):
    """A run that cannot be checked (no deploy files, no recorded figures): one line."""


def servers_of(f: Figures) -> list[tuple[str, Configuration, list[int]]]:
    """(launch script, configuration as measured, levels to measure) per server to deploy."""
    p = plan(f)
    if p is None or f.winner is None:
        raise CheckError("nothing to deploy in this run (no winner, or no launch recorded)")
    policy = policy_servers(f)
    if not policy:
        return [(p.script(p.servers[0]), f.winner, f.winner.levels)]
    out = []
    for server, range_ in zip(p.servers, policy, strict=True):
        c = range_.config
        if c is None:
            raise CheckError(f"the policy's {range_.span} configuration was not measured")
        levels = [
            lv for lv in c.levels if lv >= range_.low and (range_.high is None or lv <= range_.high)
        ]
        out.append((p.script(server), c, levels))
    return out


def wait_ready(
    engine: Engine, proc: subprocess.Popen[bytes], log: Path, port: int, deadline_s: float
) -> None:
    asyncio.run(ready(engine, proc, log, port, deadline_s))


async def ready(
    engine: Engine, proc: subprocess.Popen[bytes], log: Path, port: int, deadline_s: float
) -> None:
    """The readiness the agent itself waits for (tools/servers/readiness.py: health, the
    engine's ready line, one streamed completion); a start failure is a CheckError."""
    host = LocalHost(HostConfig(name="local"))
    watch = Watch(host, engine, proc.pid, str(log), port, deadline_s)
    try:
        await asyncio.wait_for(readiness.wait_ready(watch), deadline_s)
    except readiness.StartFailure as e:
        first = (e.diagnosis.text.splitlines() or ["no diagnosis"])[0]
        raise CheckError(f"the server did not start: {first}") from None
    except TimeoutError:
        raise CheckError(f"the server was not ready within {deadline_s:.0f} s") from None


def stop(proc: subprocess.Popen[bytes]) -> None:
    """The script exec's the server in its own session: its group killed as the agent kills one
    (tools/hosts/local.kill_group: SIGTERM, a grace, SIGKILL), then the script's process reaped."""
    asyncio.run(kill_group(proc.pid))
    try:
        proc.wait(REAP_S)
    except subprocess.TimeoutExpired:
        print(
            f"deploy_check: process {proc.pid} still there {REAP_S:.0f} s after SIGKILL",
            file=sys.stderr,
        )


def measure(
    script: Path, engine: Engine, c: Configuration, levels: list[int], ready_s: float
) -> dict[int, float]:
    """Start the server from `script`, sweep it at `levels`, stop it: output tok/s per level."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "server.log"
        log = log_path.open("wb")  # closed in the finally below
        proc = subprocess.Popen(
            ["bash", str(script)],
            env={**os.environ, "PORT": str(port)},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_ready(engine, proc, log_path, port, ready_s)
            out = Path(tmp) / "bench.json"
            argv = bench_argv(c, url, levels)
            argv[0] = str(Path(sys.executable).with_name("agent"))
            try:
                done = subprocess.run(
                    [*argv, "--json", str(out)], capture_output=True, timeout=BENCH_S
                )
            except subprocess.TimeoutExpired:
                raise CheckError(f"agent bench did not end within {BENCH_S:.0f} s") from None
            if done.returncode != 0 or not out.exists():
                said = (done.stderr or done.stdout).decode(errors="replace").strip()
                last = (said.splitlines() or ["no output"])[-1]
                raise CheckError(f"agent bench exited {done.returncode}: {last}")
            return results.sweep_of(results.load(str(out)))
        finally:
            stop(proc)
            log.close()


def check(run: Path) -> bool:
    f = gather(run, read_events(run / "events.jsonl").events)
    if not (run / FOLDER).is_dir():
        raise CheckError(f"{run / FOLDER} is missing: `agent report {run}` writes it")
    server = f.m.state.config.get("server") or {}
    ready_s, engine = float(server.get("ready_timeout_s") or 600), recorded_engine(server)
    print(f"run {run.name}")
    ok = True
    for script, c, levels in servers_of(f):
        now = measure(run / FOLDER / script, engine, c, levels, ready_s)
        recorded = {lv: c.sweep[lv] for lv in levels}
        ratio = stats.geomean_ratio(now, recorded)
        # the floor of one sweep against another over these levels (a one-level range: that
        # level's), from the run's repeated sweeps - the objective's is over all its levels
        floor = stats.objective_floor(f.repeats, levels)
        within = ratio is not None and stats.within_noise(ratio, floor)
        ok = ok and within
        print(f"  {script} ({c.name}), levels {','.join(map(str, levels))}")
        print("    recorded  " + "  ".join(f"C={lv} {recorded[lv]:.1f}" for lv in levels))
        print("    now       " + "  ".join(f"C={lv} {now.get(lv, 0.0):.1f}" for lv in levels))
        verdict = "within the floor" if within else "outside the floor"
        shown = "-" if ratio is None else f"{ratio:.3f}"
        print(
            f"    geometric-mean ratio now / recorded {shown}, noise floor {_pct(floor)}: {verdict}"
        )
    return ok


def _pct(floor: float | None) -> str:
    return "unknown" if floor is None else f"{floor:.1%}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run folders")
    args = ap.parse_args(argv)
    all_ok = True
    for run in args.runs:
        try:
            all_ok = check(run) and all_ok
        except CheckError as e:
            print(f"deploy_check: {run}: {e}", file=sys.stderr)
            return 2
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
