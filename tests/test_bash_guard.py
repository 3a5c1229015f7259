"""The destructive-command guard: a table of commands it must refuse and must let through."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.guard import check

REFUSED = [
    "rm -rf /",
    "rm -rf /*",
    "rm -fr ~",
    "rm -rf ~/",
    "rm -rf $HOME",
    "rm -r -f /etc",
    "rm --recursive --force /usr",
    "sudo rm -rf /var",
    "cd /tmp && rm -rf /",
    "echo hi; rm -Rf /boot",
    "rm -rf --no-preserve-root /x",
    "bash -c 'rm -rf /'",
    "FOO=1 nohup rm -rf / &",
    "timeout 5 rm -rf /home",
    "mkfs.ext4 /dev/sda1",
    "mkfs -t xfs /dev/nvme0n1",
    "wipefs -a /dev/sdb",
    "dd if=/dev/zero of=/dev/sda bs=1M",
    "dd if=/dev/urandom of=/dev/nvme0n1",
    "echo x > /dev/sda",
    "cat img >/dev/nvme1n1",
    "shutdown -h now",
    "sudo reboot",
    "poweroff",
    "halt",
    "systemctl reboot",
    "init 0",
    ":(){ :|:& };:",
    "bomb(){ bomb|bomb& }; bomb",
    "kill -9 1",
    "kill 1",
    "kill -1",
    "kill -9 -1",
    "kill -KILL -- -1",
    "chmod -R 777 /",
    "chown -R nobody /etc",
    "find / -name '*.log' -delete",
    "$(rm -rf /)",
    # prefixes whose options take a value
    "sudo -u root rm -rf /",
    "nice -n 19 rm -rf /",
    "timeout -s KILL 5 rm -rf /home",
    "ionice -c 3 mkfs.ext4 /dev/sda",
]

ALLOWED = [
    "rm -rf /tmp/campaign/out",
    "rm -rf ./build",
    "rm -f /etc/myapp.conf",  # not recursive
    "rm -rf ~/campaign/old",
    "ls -la /",
    "dd if=/dev/zero of=/tmp/blob bs=1M count=1",
    "echo 1 > /dev/null",
    "cat /dev/sda1 | head -c 10 | xxd",  # reading a disk is fine
    "kill -TERM -- -12345",
    "kill -9 4242",
    "chmod -R 755 /root/campaign",
    "find /root/campaign -name '*.tmp' -delete",
    "nvidia-smi --query-compute-apps=pid,used_memory --format=csv",
    "python -m sglang.launch_server --model-path /models/m --tp 8 2>&1 | tail",
    "echo 'rm -rf /' > notes.txt",
    "grep -r 'shutdown' /var/log",
    "systemctl status sshd",
    "sudo -u bob ls /",
    "nice -n 19 python train.py",
]


@pytest.mark.parametrize("command", REFUSED)
def test_refused(command: str) -> None:
    assert check(command, []) is not None, command


@pytest.mark.parametrize("command", ALLOWED)
def test_allowed(command: str) -> None:
    assert check(command, []) is None, check(command, [])


def test_kill_zero_of_init_is_refused_too() -> None:
    # the rule looks at the target, not the signal: one false positive is the price of simplicity
    assert check("kill -0 1", []) is not None


def test_allow_list_lets_a_matching_command_through() -> None:
    assert check("reboot", [r"^reboot$"]) is None
    assert check("sudo reboot", [r"^reboot$"]) is not None


def test_reason_is_one_line() -> None:
    reason = check("rm -rf /", [])
    assert reason and "\n" not in reason and "/" in reason


@pytest.mark.timeout(60)
def test_a_huge_command_is_judged_without_wedging() -> None:
    # a 2 MB command once took the fork-bomb regex (and shlex) hours: the guard must stay linear
    pad = "x" * 2_000_000
    assert check("echo " + pad, []) is None
    assert check("f()" + pad, []) is None
    assert check(f"rm -rf / {pad}", []) is not None
    assert check(f"echo {pad}; reboot", []) is not None


async def test_allow_list_from_the_config_reaches_the_bash_tool(tmp_path: Path) -> None:
    from state.run import Run
    from tools.base import ToolBox, ToolContext
    from tools.bash import Bash
    from tools.domain.config import Config, GuardConfig, HostConfig, ServerConfig
    from tools.hosts import HostPool

    # `kill -0 1` only asks whether init exists: harmless, yet refused unless allowed
    box = ToolBox([Bash()])
    for allow, refused in (([], True), ([r"^kill -0 1$"], False)):
        config = Config(
            hosts=[HostConfig(name="local", workdir=str(tmp_path / "work"))],
            server=ServerConfig(command="true"),
            guard=GuardConfig(allow=allow),
        )
        ctx = ToolContext(run=Run.create(tmp_path / "runs"), config=config, hosts=HostPool(config))
        result, _ = await box.call(ctx, "bash", {"command": "kill -0 1"})
        ctx.run.close()
        await ctx.hosts.close()
        assert result.is_error is refused, result.text
        assert ("[guard] allow" in result.text) is refused
        assert result.text.startswith("exit ") is not refused
