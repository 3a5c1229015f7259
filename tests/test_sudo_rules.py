"""What a supervisor's rule for sudo means (issue 47): a line that sudo (doas, pkexec, run0) makes
root runs outright only where a rule names the wrapper (`Bash(sudo nvidia-smi -pm:*)`; a rule for
`nvidia-smi -pm:*` alone leaves `sudo nvidia-smi -pm 1` to the sandbox, where sudo cannot raise
it), the program runs no code of the line's (decision.ROOT_PROGRAMS: no shell, no python, no
installer - root would read the run's inbox key), a rule that names no option of it allows only
what the rules find certain, and the deny gate's refusal holds whatever the rules: sudo of a
destructive command is never allowed outright."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_guard_decide import BOX, DESTRUCTIVE, campaign_box, expand, heldout
from tools.guard import Rules, decide

BROAD = ["Bash(sudo:*)", "Bash(doas:*)"]


@pytest.mark.parametrize("sandbox", [True, False])
def test_sudo_of_a_destructive_command_is_never_allowed_outright(
    sandbox: bool, tmp_path: Path
) -> None:
    """Every command of both destructive corpora behind sudo or doas, with the broadest rules a
    supervisor could add (`sudo:*`, `doas:*`) and with the rule naming the command's own first
    words: none is allowed outright."""
    ctx = campaign_box(tmp_path)
    commands = [c for _, c in heldout()] + [expand(e["command"]) for e in DESTRUCTIVE]
    allowed = []
    for command in commands:
        for wrapper in ("sudo", "doas"):
            line = f"{wrapper} {command}"
            first = command.split()[0] if command.split() else ""
            for rules in (BROAD, [f"Bash({wrapper} {first}:*)"]):
                try:
                    parsed = Rules.parse(rules)
                except ValueError:
                    continue
                d = decide(line, parsed, sandbox, ctx)
                if d.action == "allow":
                    allowed.append((rules, line))
    # allowed only where what sudo runs is certain and no code (a query of ps, lsof, dmesg)
    risky = [(r, line) for r, line in allowed if not _harmless(line)]
    assert not risky, risky[:10]


def _harmless(line: str) -> bool:
    """Read-only inspection the rules allow outright anyway, here as root: ps/lsof/ss/dmesg
    reading, with no option that writes or kills."""
    words = line.split()
    return words[1] in ("ps", "lsof", "ss", "dmesg") and not any(
        w.startswith(("-K", "-c", "-C", "--kill", "-D", "--clear")) for w in words[2:]
    )


@pytest.mark.parametrize(
    ("rules", "command", "action", "says"),
    [
        (BROAD, "sudo rm -rf /", "refuse", "sudo of a destructive command, whatever the rules"),
        (["Bash(sudo rm -rf /)"], "sudo rm -rf /", "refuse", "whatever the rules"),
        (BROAD, "sudo mkfs.ext4 /dev/sda", "refuse", "whatever the rules"),
        (BROAD, "sudo kill -9 1", "refuse", "whatever the rules"),
        (BROAD, "sudo python3 -c 1", "refuse", "would run python3 as root"),
        (BROAD, "sudo bash -c ls", "refuse", "would run bash as root"),
        (["Bash(sudo -i)"], "sudo -i", "refuse", "would run a shell as root"),
        (BROAD, "sudo pip install x", "refuse", "would run pip as root"),
        (BROAD, "sudo rm -rf /root/campaign/x", "refuse", "would run rm as root"),
        (BROAD, "sudo pkill -9 -v sim", "refuse", "names no option of pkill"),
        (BROAD, "sudo fuser -km /dev/nvidia1", "refuse", "names no option of fuser"),
        (BROAD, "sudo nvidia-smi -pm 1", "refuse", "Bash(sudo nvidia-smi -pm:*)"),
        (["Bash(sudo nvidia-smi -pm:*)"], "sudo nvidia-smi -pm 1", "allow", None),
        (["Bash(sudo nvidia-smi -lgc:*)"], "sudo nvidia-smi -lgc 1500", "allow", None),
        (["Bash(sudo sysctl -w:*)"], "sudo sysctl -w vm.drop_caches=3", "allow", None),
        (BROAD, "sudo ps aux", "allow", None),
        # a rule that does not name sudo runs the program as the user, not as root
        (["Bash(nvidia-smi -pm:*)"], "sudo nvidia-smi -pm 1", "sandbox", "sudo"),
        ([], "sudo nvidia-smi -pm 1", "sandbox", "Bash(sudo nvidia-smi:*)"),
    ],
)
def test_what_a_rule_for_sudo_allows(
    rules: list[str], command: str, action: str, says: str | None
) -> None:
    d = decide(command, Rules.parse(rules), True, BOX)
    assert d.action == action, d
    if says:
        assert says in f"{d.reason} {d.rule}", d
        assert d.reason and "\n" not in d.reason


async def test_through_the_bash_tool_a_rule_for_sudo_kills_but_does_not_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real bash tool, with a stand-in sudo on PATH (it runs its command as this user):
    `agent allow RUN 'Bash(sudo:*)'` lets no `sudo rm -rf ~` through (the canary home stays),
    while `Bash(sudo kill -TERM:*)` signals the process outright."""
    import subprocess

    from tests.ssh_fixtures import close_context, make_context
    from tests.test_guard_sandbox import call
    from tools.domain.config import GuardConfig, HostConfig

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sudo").write_text(
        '#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"\n'
    )
    (bin_dir / "sudo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    (home / "data" / "canary").write_text("canary")
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "w"
    work.mkdir()
    ctx = make_context(tmp_path / "runs", HostConfig(name="local", workdir=str(work)))
    ctx.config.guard = GuardConfig(allow=[*BROAD, "Bash(sudo kill -TERM:*)"])
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        for line in ("sudo rm -rf ~", "sudo rm -rf ~/data", "sudo bash -c 'rm -rf ~/data'"):
            text, err, data = await call(ctx, line)
            assert err and data["guard"]["action"] == "refuse", (line, text)
            assert (home / "data" / "canary").read_text() == "canary", line
        text, err, data = await call(ctx, f"sudo kill -TERM {sleeper.pid}")
        assert not err and data["guard"]["rule"] == "Bash(sudo kill -TERM:*)", text
        assert sleeper.wait(30) == -15
    finally:
        sleeper.kill()
        sleeper.wait(5)
        await close_context(ctx)
