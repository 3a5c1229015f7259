"""Who a sandboxed line is, and how much it may write (issue 47, round three), through the real
bash tool and bubblewrap: where the host's user is root, the line is nobody in a user namespace of
its own (not root inside; what it writes in the workdir is still the user's outside), and the
system's secret files are empty; a call stops when what it wrote leaves the workdir's disk under
its reserve - however many files it spread it over (RLIMIT_FSIZE bounds one file).

Like tests/test_guard_sandbox.py these need bubblewrap: they fail without it in CI, skip elsewhere.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from tests.test_guard_sandbox import bwrap, call, close_context, make_context  # noqa: F401
from tools.domain.config import HostConfig
from tools.hosts import sandbox

pytest_plugins = ["tests.ssh_fixtures"]


async def test_a_sandboxed_line_is_not_root_inside(tmp_path: Path) -> None:
    work = tmp_path / "w"
    ctx = make_context(tmp_path / "runs", HostConfig(name="local", workdir=str(work)))
    try:
        box = await ctx.hosts.get("local").sandbox()  # type: ignore[union-attr]
        assert box is not None
        line = (
            "id -u; id -g; grep CapEff /proc/self/status; wc -c < /etc/shadow; "
            "python3 -c 'import os; print(\"PY\", os.geteuid())'; echo made > made.txt"
        )
        text, err, data = await call(ctx, line)
        assert data["guard"]["action"] == "sandbox" and not err, text
        words = text.split()
        if os.getuid() == 0:
            assert box.user and "as nobody (uid 65534) in a user namespace" in box.describe()
            assert "\n65534\n65534\n" in text and "PY 65534" in text, text
        else:  # a user that is not root stays that user
            assert f"\n{os.getuid()}\n" in text and f"PY {os.getuid()}" in text, text
        assert "CapEff:\t0000000000000000" in text, text
        if Path("/etc/shadow").exists():  # empty inside, whoever reads it
            assert words[words.index("0000000000000000") + 1] == "0", text
        made = work / "made.txt"
        assert made.read_text() == "made\n" and made.stat().st_uid == os.getuid()
    finally:
        await close_context(ctx)


async def test_a_call_stops_when_its_files_together_pass_its_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files of 1 MiB each - every one far under RLIMIT_FSIZE - written until the call ends:
    the call is stopped once the disk falls under its reserve, here 32 MiB below the free space
    at the start (others writing to the disk meanwhile only stop it sooner), with one line that
    says why; what it wrote stays for the model to remove."""
    work = tmp_path / "w"
    work.mkdir()
    st = os.statvfs(work)
    free = st.f_bavail * st.f_frsize
    monkeypatch.setattr(sandbox, "FILE_RESERVE", 1 << 40)  # the reserve: RESERVE_MIN alone
    monkeypatch.setattr(sandbox, "RESERVE_MIN", free - (32 << 20))
    ctx = make_context(tmp_path / "runs", HostConfig(name="local", workdir=str(work)))
    try:
        fill = (
            "import time\nfor i in range(1000):\n"
            " open('part-%04d' % i, 'wb').write(b'x' * (1 << 20)); time.sleep(0.02)\n"
            "print('DONE')"
        )
        text, err, data = await call(ctx, f"python3 -c {shlex.quote(fill)}", timeout_s=120)
        assert data["guard"]["action"] == "sandbox", text
        assert "DONE" not in text and text.startswith("exit 122 "), text
        assert "the call was stopped: what it wrote left the workdir's disk with" in text, text
        quota = re.search(r"a call may write (\d+) MiB there in all", text)
        assert quota and int(quota[1]) <= 32, text
        written = len(list(work.glob("part-*")))
        assert 0 < written < 1000, written
        # a call that writes under its quota is not stopped
        monkeypatch.setattr(sandbox, "RESERVE_MIN", 1 << 30)
        text, err, data = await call(ctx, "rm -f part-* && python3 -c 'print(6 * 7)' > out.txt")
        assert not err and (work / "out.txt").read_text() == "42\n", text
    finally:
        await close_context(ctx)
