"""Security of a real campaign: secrets never reach a file of the run folder (or the ledger beside
it), servers listen on 127.0.0.1 only, run folders are their owner's."""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.kill_resume_lab import free_port, leftover_processes, write_config
from sim.flags import parse_server_args
from state.run import Run
from state.secrets import command_secrets
from tools.base import ToolBox, ToolContext
from tools.domain.config import Config, HostConfig, lab_config
from tools.hosts import HostPool
from tools.registry import all_tools
from tools.servers.command import build_command
from tools.servers.profiles import ENGINES

ROOT = Path(__file__).parent.parent
ENV_SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-FAKE-0123456789abcdefghij",
    "HF_TOKEN": "hf_FAKEenvTOKEN0123456789",
    "DB_PASSWORD": "correct-horse-battery-staple",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYFAKEKEY",
    "MY_SERVICE_KEY": "svc-key-0123456789",
}
IN_COMMAND = "hf_FAKEcommandTOKEN987654321"  # HF_TOKEN=... written inside server.command


def listening_addresses(port: int) -> set[str]:
    """Local addresses in LISTEN state on `port`, from /proc/net/tcp{,6}."""
    found = set()
    for name in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(_address(address))
    return found


def _address(hex_address: str) -> str:
    if len(hex_address) == 8:
        return ".".join(str(int(hex_address[i : i + 2], 16)) for i in (6, 4, 2, 0))
    return "::1" if hex_address == "0" * 24 + "01000000" else f"ipv6:{hex_address}"


@pytest.mark.timeout(240)
def test_a_lab_campaign_with_secrets_set_writes_none_of_them(tmp_path: Path) -> None:
    lab = shlex.split(lab_config(time_scale=50).server.command)
    command = shlex.join([f"HF_TOKEN={IN_COMMAND}", *lab])
    config = write_config(tmp_path, "small", command=command)
    runs = tmp_path / "runs"
    env = {**os.environ, **ENV_SECRETS}
    args = ["run", "--goal", "beat baseline", "--model", "autopilot", "--config", str(config)]
    proc = subprocess.run(
        [sys.executable, "-m", "agent.cli", *args, "--runs-dir", str(runs)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=220,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    secrets = [*ENV_SECRETS.values(), IN_COMMAND]
    files = [p for p in runs.rglob("*") if p.is_file()]
    assert len(files) > 10 and any(p.name == "ledger.jsonl" for p in files)
    leaks = [(p.name, s) for p in files for s in secrets if s.encode() in p.read_bytes()]
    assert leaks == []
    assert not any(s.encode() in proc.stdout + proc.stderr for s in secrets)
    (run,) = [p for p in runs.iterdir() if p.is_dir()]
    events = (run / "events.jsonl").read_text()
    assert "HF_TOKEN=[redacted]" in events  # the command is kept, its secret is not
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    for sub in ("results", "outputs", "logs"):
        assert stat.S_IMODE((run / sub).stat().st_mode) == 0o700
    assert leftover_processes({int(p) for p in _ports(events)}) == []


def _ports(events: str) -> list[str]:
    return re.findall(r'"type":"server_started".*?"port":(\d+)', events)


def test_secrets_inside_commands_are_found_but_counts_are_not() -> None:
    line = (
        "HF_TOKEN=hf_abcdefgh123 vllm serve m --api-key=sk-abcdefgh --hf-token 'tok en 12345' "
        "--max-tokens 512 --max-num-batched-tokens 16384 --tokenizer /models/tokenizer-long"
    )
    assert command_secrets(line) == ["hf_abcdefgh123", "sk-abcdefgh", "tok en 12345"]


async def test_the_lab_server_listens_on_loopback_only(tmp_path: Path) -> None:
    assert parse_server_args([]).host == "127.0.0.1"  # the simulator's own default
    port = free_port()
    lab = lab_config(time_scale=50, port=port)
    config = Config(
        hosts=[HostConfig(name="local", workdir=str(tmp_path / "work"))],
        server=lab.server,
        search=lab.search,
    )
    run = Run.create(tmp_path / "runs", "bind")
    ctx = ToolContext(run=run, config=config, hosts=HostPool(config))
    box = ToolBox(all_tools())
    try:
        result, _ = await box.call(ctx, "start_server", {"flags": lab.search["baseline"]})
        assert not result.is_error, result.text
        assert "--host" not in result.data["command"]  # no override: the default is loopback
        assert listening_addresses(port) == {"127.0.0.1"}
    finally:
        killed, _ = await box.call(ctx, "kill_server", {})
        await ctx.hosts.close()
        run.close()
    assert not killed.is_error and listening_addresses(port) == set()


def test_vllm_is_told_to_bind_loopback_unless_the_user_says_otherwise() -> None:
    vllm, sglang, sim = ENGINES["vllm"], ENGINES["sglang"], ENGINES["sim"]
    assert build_command("vllm serve m", {}, vllm, 8000).endswith("--port 8000 --host 127.0.0.1")
    for base, flags in (
        ("vllm serve m --host 0.0.0.0", {}),
        ("vllm serve m --host=10.0.0.5", {}),
        ("vllm serve m", {"--host": "0.0.0.0"}),
    ):
        assert "127.0.0.1" not in build_command(base, flags, vllm, 8000)  # a deliberate choice
    # SGLang and the simulator listen on 127.0.0.1 unless told otherwise: nothing to add
    assert "--host" not in build_command("python -m sglang.launch_server", {}, sglang, 30000)
    assert "--host" not in build_command("python -m sim", {}, sim, 30000)
