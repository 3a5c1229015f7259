"""Hostile tool output: what a flood of output costs the agent in memory, and what the model sees.

    .venv/bin/python -m benchmarks.hostile_output [--mb 100] [--case NAME ...]

Each case runs in a fresh Python process (so its peak RSS, VmHWM, is its own): a real run folder,
the local host, the real ToolBox. Printed per case: seconds, peak RSS before and after the call,
the characters the model got, control characters left in them (must be 0), and the bytes saved
under outputs/. Cases: bash printing MB of lines, one MB-long line, random binary, an ANSI flood;
read_log tail and grep of an MB-sized log with no newline (a progress bar that only uses \\r).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # what must not reach the model (tab, \n ok)


def commands(mb: int) -> dict[str, tuple[str, dict[str, Any]]]:
    n = mb * 1024 * 1024
    ansi = r"\e[31;1mred\e[0m \e[2K\e[1G\e]0;title\a 42%\r"
    return {
        "lines": ("bash", {"command": f"yes 'a line of output, 32 bytes..' | head -c {n}"}),
        "one-line": ("bash", {"command": f"head -c {n} /dev/zero | tr '\\0' x"}),
        "binary": ("bash", {"command": f"head -c {n} /dev/urandom"}),
        "ansi": ("bash", {"command": f"yes $'{ansi}' | head -c {n}"}),
        "log-tail": ("read_log", {"path": "huge.log", "lines": 100}),
        "log-grep": ("read_log", {"path": "huge.log", "mode": "grep", "pattern": "x"}),
    }


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def one_case(name: str, mb: int, work: Path) -> dict[str, Any]:
    """Run one case in this process; the figures as a dict."""
    from state.run import Run
    from tools.base import ToolBox, ToolContext
    from tools.domain.config import Config, HostConfig, ServerConfig
    from tools.hosts import HostPool
    from tools.registry import all_tools

    tool, inp = commands(mb)[name]
    if name.startswith("log-"):  # a log made of \r-separated progress, no newline at all
        with (work / "huge.log").open("wb") as f:
            for _ in range(mb):
                f.write(b"x" * (1024 * 1024 - 1) + b"\r")
    config = Config(
        hosts=[HostConfig(name="local", workdir=str(work))], server=ServerConfig(command="true")
    )
    run = Run.create(work / "runs")
    ctx = ToolContext(run=run, config=config, hosts=HostPool(config))
    box = ToolBox(all_tools())
    before = peak_rss_mb()
    start = time.perf_counter()
    result, _ = await box.call(ctx, tool, {**inp, "timeout_s": 600} if tool == "bash" else inp)
    seconds = time.perf_counter() - start
    await ctx.hosts.close()
    run.close()
    saved = sum(p.stat().st_size for p in (run.path / "outputs").iterdir())
    return {
        "case": name,
        "mb": mb,
        "seconds": round(seconds, 2),
        "rss_before_mb": round(before, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "text_chars": len(result.text),
        "control_chars": len(CONTROL.findall(result.text)),
        "is_error": result.is_error,
        "saved_bytes": saved,
        "head": result.text.split("\n", 1)[0][:300],
        "body_start": result.text.split("\n", 1)[-1][:300],
        "saved_start": _start_of(run.path / "outputs"),
    }


def _start_of(folder: Path) -> str:
    files = sorted(folder.iterdir())
    return files[0].read_bytes()[:300].decode("utf-8", "replace") if files else ""


def measure(name: str, mb: int, timeout: float = 600) -> dict[str, Any]:
    """One case in a fresh interpreter, so that its peak RSS is its own."""
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.hostile_output", "--child", name, "--mb", str(mb)],
            cwd=ROOT,
            env={"HOSTILE_WORK": tmp, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"case {name} failed: {proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=int, default=100, help="megabytes of output per case")
    p.add_argument("--case", action="append", choices=list(commands(1)), help="default: all")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        import os

        work = Path(os.environ["HOSTILE_WORK"])
        print(json.dumps(asyncio.run(one_case(args.child, args.mb, work))))
        return
    print(
        f"{'case':<10} {'MB':>4} {'s':>7} {'RSS before':>10} {'peak RSS':>9} "
        f"{'chars':>6} {'ctrl':>4} {'saved':>11}  first line"
    )
    for name in args.case or list(commands(1)):
        r = measure(name, args.mb)
        print(
            f"{r['case']:<10} {r['mb']:>4} {r['seconds']:>7.2f} {r['rss_before_mb']:>10.1f} "
            f"{r['peak_rss_mb']:>9.1f} {r['text_chars']:>6} {r['control_chars']:>4} "
            f"{r['saved_bytes']:>11}  {r['head'][:70]}",
            flush=True,
        )


if __name__ == "__main__":
    main()
