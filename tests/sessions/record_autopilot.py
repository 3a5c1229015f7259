"""Re-record tests/sessions/autopilot/lab.jsonl: the default lab campaign, run for real (the
simulator as real server processes, the real tools, the autopilot), about 5 minutes. Run it after
changing the planner, the brain or a tool the autopilot calls:

    .venv/bin/python -m tests.sessions.record_autopilot
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "autopilot" / "lab.jsonl"  # apart from the Claude sessions test_replay.py globs


def main() -> int:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        cmd = [
            sys.executable,
            "-m",
            "agent.cli",
            "run",
            "--goal",
            "beat baseline",
            "--runs-dir",
            str(runs),
            "--run-id",
            "autopilot-lab",
        ]
        code = subprocess.call(cmd, env=env)
        if code != 0:
            print(f"the campaign exited {code}; nothing recorded", file=sys.stderr)
            return code
        shutil.copyfile(runs / "autopilot-lab" / "events.jsonl", OUT)
    print(f"recorded {OUT} ({OUT.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
