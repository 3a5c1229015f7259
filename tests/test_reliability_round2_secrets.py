"""Issue 16, round two: secrets (items 8, 9), exposure (11, 12) and the small hangs (15, 17).

Each test failed before its fix; docs/reliability.md names them."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agent.view.watch import NoEvents, follow
from benchmarks.kill_resume_lab import free_port
from state.run import Run
from state.secrets import (
    Scrubber,
    UnresolvedSecret,
    command_secrets,
    config_secrets,
    resolve,
    secret_values,
)
from tools.base import ToolBox, ToolContext, host_for
from tools.domain.config import (
    Config,
    ConfigError,
    FilesConfig,
    GuardConfig,
    HostConfig,
    ServerConfig,
    lab_config,
    load_config,
)
from tools.hosts import HostPool
from tools.registry import all_tools
from tools.servers.command import public_bind

pytest_plugins = ["tests.ssh_fixtures"]
BOX = ToolBox(all_tools())
AGENT = [sys.executable, "-m", "agent.cli"]


async def call(ctx: ToolContext, name: str, **inp: object) -> tuple[str, bool, dict[str, object]]:
    result, _ = await BOX.call(ctx, name, inp)
    return result.text, result.is_error, result.data


async def close_context(ctx: ToolContext) -> None:
    assert ctx.hosts is not None
    await ctx.hosts.close()
    ctx.run.close()


def files_holding(root: Path, needles: list[str]) -> list[tuple[str, str]]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [(path.name, n) for n in needles if n.encode() in data]
    return found


# --- 8: secrets ----------------------------------------------------------------------------------


def test_secrets_with_quotes_backslashes_and_newlines_reach_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events and run files are scrubbed as serialized JSON, where such a secret is escaped: the
    scrub looked for the raw value only and missed it."""
    password = 'pa"ss\\wo\nrd-0123456789'
    monkeypatch.setenv("DB_PASSWORD", password)
    run = Run.create(tmp_path / "runs", "r")
    run.append("note", text=f"connecting with {password}", nested={"pw": [password]})
    run.write_json("outputs/conn.json", {"dsn": f"postgres://u:{password}@db"})
    run.close()
    forms = [password, json.dumps(password)[1:-1], json.dumps(password, ensure_ascii=True)[1:-1]]
    forms += [password.split("\n")[0]]  # not even the first line of it
    assert files_holding(tmp_path, forms) == []
    events = [json.loads(line) for line in (run.path / "events.jsonl").read_text().splitlines()]
    assert events[-1]["text"] == "connecting with [redacted]"  # still valid JSON, masked
    assert events[-1]["nested"] == {"pw": ["[redacted]"]}


def test_a_token_exported_with_a_semicolon_is_the_token_not_the_semicolon(
    tmp_path: Path,
) -> None:
    token = "hf_FAKEtokenFAKEtoken1234"
    command = f"export HUB_TOKEN={token}; python -m sim --api-key 'sk-QUOTED-1234' --tp 2"
    assert command_secrets(command) == [token, "sk-QUOTED-1234"]
    scrub = Scrubber(config_secrets({"server": {"command": command}}))
    assert scrub(command) == (
        "export HUB_TOKEN=[redacted]; python -m sim --api-key '[redacted]' --tp 2"
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(3):  # the servers print the bare token (no `;` after it)
        (logs / f"server-{i}.log").write_text(f"login with token {token}\nready\n")
    assert scrub.folder(tmp_path) == 3
    assert files_holding(tmp_path, [token]) == []


def test_sshpass_mysql_pwd_passwd_and_the_like_are_secrets() -> None:
    values = {
        "SSHPASS": "ssh-pass-123456",
        "MYSQL_PWD": "mysql-pwd-123456",
        "PASSWD": "passwd-1234567",
        "DB_PASSPHRASE": "a-long-passphrase",
        "PGPASSWORD": "pg-password-123",
        "PWD": "/work/some/folder",  # the shell's working directory, not a password
        "OLDPWD": "/work/other/folder",
        "PATH": "/usr/bin:/bin:/usr/sbin",
    }
    assert sorted(secret_values(values)) == sorted(list(values.values())[:5])
    assert command_secrets("SSHPASS=abcdefgh123 sshpass -e ssh box; mysql --passwd=xyz12345") == [
        "abcdefgh123",
        "xyz12345",
    ]


def test_a_password_in_an_ssh_address_is_refused_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(
        '[[hosts]]\nname = "box"\naddress = "ssh://admin:hunter2-secret@gpu1"\n'
        '[server]\nhost = "box"\n'
    )
    with pytest.raises(ConfigError) as err:
        load_config(config)
    message = str(err.value)
    assert "password in the address is refused" in message and "identity_file" in message
    assert "hunter2-secret" not in message and "\n" not in message
    out = subprocess.run(
        [*AGENT, "run", "--config", str(config), "--runs-dir", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "hunter2-secret" not in out.stderr + out.stdout
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


# --- 9: secrets by reference --------------------------------------------------------------------


def test_a_masked_secret_is_resolved_from_the_environment_by_its_name() -> None:
    recorded = "export HUB_TOKEN=[redacted]; HF_TOKEN=[redacted] vllm serve m"
    env = {"HUB_TOKEN": "hf_a b'c", "HF_TOKEN": "hf_plain123"}
    resolved = resolve(recorded, env)
    assert resolved == "export HUB_TOKEN='hf_a b'\"'\"'c'; HF_TOKEN=hf_plain123 vllm serve m"
    with pytest.raises(UnresolvedSecret, match=r"set HF_TOKEN in the environment"):
        resolve(recorded, {"HUB_TOKEN": "x"})
    with pytest.raises(UnresolvedSecret, match="no variable names"):
        resolve("vllm serve m --api-key [redacted]", env)
    assert resolve("python -m sim --tp 2", {}) == "python -m sim --tp 2"


async def test_a_resumed_run_launches_with_the_real_token_and_the_same_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The config a resumed run reads back from its log holds `HUB_TOKEN=[redacted]`; the
    launch must use the environment's token and keep the `;` (the server below only starts
    when both hold), and the log keeps the reference, never the value."""
    token = "hf_REALtokenREALtoken42"
    monkeypatch.setenv("HUB_TOKEN", token)
    lab = lab_config(time_scale=50, port=free_port())
    digest = hashlib.sha256(token.encode()).hexdigest()
    check = f'test "$(printf %s "$HUB_TOKEN" | sha256sum | cut -c1-64)" = {digest}'
    original = f"export HUB_TOKEN={token}; {check} && exec {lab.server.command}"
    recorded = Scrubber(config_secrets({"command": original}))(original)
    assert recorded.startswith("export HUB_TOKEN=[redacted]; test")
    config = Config(
        hosts=[HostConfig(name="local", workdir=str(tmp_path / "work"))],
        # the generic profile: the simulator's own flag check reads a plain `python -m sim` line
        server=lab.server.model_copy(update={"command": recorded, "engine": "openai"}),
        search=lab.search,
    )
    run = Run.create(tmp_path / "runs", "resumed")
    ctx = ToolContext(run=run, config=config, hosts=HostPool(config))
    try:
        text, is_error, _ = await call(ctx, "start_server", flags=lab.search["baseline"])
        assert not is_error and token not in text, text
    finally:
        await call(ctx, "kill_server")
        await close_context(ctx)
    assert files_holding(run.path, [token]) == []
    started = [e for e in map(json.loads, run.events_path.read_text().splitlines())]
    command = next(e["command"] for e in started if e["type"] == "server_started")
    assert command.startswith("export HUB_TOKEN=[redacted]; test")


# --- 11: binding every interface ----------------------------------------------------------------


def test_public_bind_finds_every_non_loopback_host() -> None:
    for command in (
        "vllm serve m --host 0.0.0.0",
        "vllm serve m --host=::",
        "python -m sglang.launch_server --host 10.0.0.5",
        "llama-server --host gpu1.lan",
    ):
        assert public_bind(command) is not None, command
    for command in (
        "vllm serve m --host 127.0.0.1",
        "vllm serve m --host=localhost",
        "vllm serve m --host ::1",
        "python -m sim --port 30000",
    ):
        assert public_bind(command) is None, command


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
async def test_start_server_refuses_all_interfaces_unless_the_config_opts_in(
    tmp_path: Path, host: str
) -> None:
    lab = lab_config(time_scale=50, port=free_port())
    config = Config(
        hosts=[HostConfig(name="local", workdir=str(tmp_path / "work"))],
        server=lab.server,
        search=lab.search,
    )
    run = Run.create(tmp_path / "runs", "bind")
    ctx = ToolContext(run=run, config=config, hosts=HostPool(config))
    try:
        text, is_error, _ = await call(ctx, "start_server", flags={"--host": host})
        assert is_error and "server.allow_public_bind" in text and "\n" not in text, text
        assert "server_started" not in run.events_path.read_text()  # nothing was launched
    finally:
        await close_context(ctx)
    assert ServerConfig(command="x", allow_public_bind=True).allow_public_bind


# --- 12: both ends of put_file / get_file --------------------------------------------------------


async def test_a_symlink_in_the_workdir_does_not_lead_out_of_it(host_ctx: ToolContext) -> None:
    host = host_for(host_ctx, None)
    outside = Path(await host.workdir()).parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not yours")
    await host.run(f"ln -s {outside} link; ln -s {outside / 'secret.txt'} file.txt")
    text, is_error, _ = await call(host_ctx, "get_file", remote_path="link/secret.txt")
    assert is_error and "really" in text and "outside the workdir" in text, text
    text, is_error, _ = await call(host_ctx, "get_file", remote_path="file.txt")
    assert is_error and "outside the workdir" in text, text
    (host_ctx.run.path / "x.txt").write_text("x")
    text, is_error, _ = await call(
        host_ctx, "put_file", local_path="x.txt", remote_path="link/planted.txt"
    )
    assert is_error and not (outside / "planted.txt").exists(), text


async def test_this_machine_end_is_confined_to_the_run_folder(
    tmp_path: Path, host_ctx: ToolContext
) -> None:
    (host_ctx.run.path / "ok.txt").write_text("ok")
    await call(host_ctx, "put_file", local_path="ok.txt", remote_path="ok.txt")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (host_ctx.run.path / "out").symlink_to(outside)
    for local in ("../../escape.txt", str(outside / "x.txt"), "out/x.txt"):
        text, is_error, _ = await call(host_ctx, "get_file", remote_path="ok.txt", local_path=local)
        assert is_error and "outside the run folder" in text and "allow_local" in text, local
    assert not list(outside.iterdir()) and not (tmp_path / "escape.txt").exists()
    text, is_error, _ = await call(
        host_ctx, "put_file", local_path="/etc/hostname", remote_path="stolen.txt"
    )
    assert is_error and "outside the run folder" in text
    # the config can allow more
    host_ctx.config = host_ctx.config.model_copy(
        update={"files": FilesConfig(allow_local=[str(outside)])}
    )
    text, is_error, _ = await call(
        host_ctx, "get_file", remote_path="ok.txt", local_path=str(outside / "x.txt")
    )
    assert not is_error and (outside / "x.txt").read_text() == "ok", text


def test_allow_local_must_be_absolute() -> None:
    with pytest.raises(ValueError, match="not an absolute path"):
        FilesConfig(allow_local=["relative/dir"])


# --- 15: hangs and untruths ---------------------------------------------------------------------


async def test_read_log_on_a_fifo_answers_at_once(host_ctx: ToolContext) -> None:
    host = host_for(host_ctx, None)
    await host.run("mkfifo pipe.log")
    for mode in ("tail", "range"):
        text, is_error, _ = await asyncio.wait_for(
            call(host_ctx, "read_log", path="pipe.log", mode=mode), 20
        )
        assert is_error and "is a FIFO, not a regular file" in text, text
    text, is_error, _ = await asyncio.wait_for(
        call(host_ctx, "get_file", remote_path="pipe.log"), 20
    )
    assert is_error and "FIFO" in text


async def test_bash_names_a_setsid_child_instead_of_claiming_all_was_killed(
    tmp_path: Path,
) -> None:
    # a child that outlives the call is never allowed outright (issue 47): the supervisor's
    # rules allow each command here, to test what the tool says of a survivor
    config = Config(
        hosts=[HostConfig(name="local", workdir=str(tmp_path / "work"))],
        server=ServerConfig(command="true"),
        guard=GuardConfig(allow=["Bash(setsid:*)", "Bash(echo:*)", "Bash(sleep:*)"]),
    )
    run = Run.create(tmp_path / "runs", "setsid")
    ctx = ToolContext(run=run, config=config, hosts=HostPool(config))
    tag = f"{secrets.randbelow(10**9):09d}"
    try:
        text, is_error, data = await call(
            ctx,
            "bash",
            command=f"setsid sleep 67.{tag} >/dev/null 2>&1 & echo $! > s.pid; sleep 68.{tag}",
            timeout_s=1,
        )
        pid = int((tmp_path / "work" / "s.pid").read_text())
        try:
            assert is_error and "everything it started were killed" not in text
            assert f"pid {pid} (sleep 67.{tag})" in text and data["survivors"] == [pid], text
        finally:
            os.kill(pid, 9)
    finally:
        await close_context(ctx)


def test_watch_json_on_an_empty_log_waits_for_a_live_writer_only(tmp_path: Path) -> None:
    run = tmp_path / "r"
    run.mkdir()
    (run / "events.jsonl").write_bytes(b"")
    (run / "run.lock").write_text(f"{os.getpid()}\n")  # a live writer: its first event may come
    clock = iter(range(1000)).__next__
    batches = follow(run / "events.jsonl", interval=0, grace=2, clock=lambda: float(clock()))
    for _ in range(50):
        assert next(batches) == (False, [])
    (run / "run.lock").write_text("999999999\n")  # no such process: it ended
    with pytest.raises(NoEvents):
        for _ in range(10):
            next(batches)
    out = subprocess.run(
        [*AGENT, "watch", "--json", str(run), "--grace", "0.2", "--interval", "0.05"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and out.stdout == "", out
    assert "no events" in out.stderr and len(out.stderr.strip().splitlines()) == 1


# --- 17: report files ---------------------------------------------------------------------------


def test_report_files_are_the_owners_only(tmp_path: Path) -> None:
    from agent.report import write_report

    run = Run.create(tmp_path / "runs", "rep")
    run.append("run_started", goal="g", config={}, pid=os.getpid())
    write_report(run)
    run.close()
    written = [p for p in run.path.iterdir() if p.name.startswith("report")]
    assert {p.name for p in written} >= {"report.md", "report.html"}
    assert {stat.S_IMODE(p.stat().st_mode) for p in written} == {0o600}
