"""The sandbox for real: bubblewrap around what the rules do not allow, on the local host and over
SSH, and the destructive corpus run through the bash tool against canaries.

These tests need bubblewrap (`apt-get install -y bubblewrap`; .ci/run installs it). In CI (CI set)
they fail without it: a sandbox that silently is not there is the failure they exist to catch; on
a newcomer's machine they skip, naming the package, as the OpenSSH tests do.

Safety: the destructive corpus runs with its paths rewritten onto a canary tree under /var/tmp
(outside the workdir, outside the sandbox's private /tmp) and HOME pointed at the canary home;
each command's decision is taken first with the bash tool's own function, and an "allow" fails the
test before anything runs. Commands that can only target the machine's own services (the network,
kernel modules, mounts, power) are judged, never run.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from state.inbox import drain
from tools.base import ToolBox, ToolContext
from tools.bash import Bash
from tools.domain.config import GuardConfig, HostConfig
from tools.guarded import guarded
from tools.hosts.base import listening_ports

pytest_plugins = ["tests.ssh_fixtures"]

DATA = Path(__file__).parent / "data"
DESTRUCTIVE: list[dict[str, str]] = json.loads((DATA / "destructive_corpus.json").read_text())[
    "commands"
]
# what only the machine's own services are the target of: judged (tests/test_guard_decide.py),
# never run here, even confined
NEVER_RUN_CLASSES = {"lifeline-network", "resource"}
NEVER_RUN_WORDS = re.compile(  # as a word of the command, not a part of a path (etc/passwd)
    r"(?<![\w/.-])(?:systemctl|service|telinit|init|shutdown|reboot|poweroff|halt|kexec|modprobe|rmmod|"
    r"swapoff|sysctl|nvidia-smi|userdel|passwd|usermod|groupdel|hostnamectl|timedatectl|"
    r"hwclock|crontab|docker|dbus-send|ssh|ss|date|killall5|umount|mount|lvremove|vgremove|"
    r"pvremove|http\.server)(?![\w/.-])"
)
CANARY_FILES = [
    "etc/passwd", "etc/shadow", "etc/group", "etc/gshadow", "etc/sudoers", "etc/fstab",
    "etc/hosts", "etc/hostname", "etc/ssh/sshd_config", "etc/bash.bashrc", "etc/x.gz",
    "usr/bin/tool", "usr/lib/libx.so.1", "usr/local/bin/x", "var/log/syslog",
    "var/lib/dpkg/status", "boot/vmlinuz", "root/.profile", "opt/app/x", "bin/bash", "lib/x",
    "srv/x", "dev/sda", "dev/nvme0n1", "home/user/.bashrc", "home/user/.ssh/authorized_keys",
    "home/user/.ssh/id_rsa", "home/user/.aws/credentials",
]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def bwrap() -> None:
    if shutil.which("bwrap") is None:
        why = (
            "bubblewrap is not installed: `apt-get install -y bubblewrap` (.ci/run installs it); "
            "the sandbox tests need it"
        )
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def make_context(runs: Path, host: HostConfig, **kw: Any) -> ToolContext:
    from tests.ssh_fixtures import make_context as make  # after pytest_plugins loaded it

    return make(runs, host, **kw)


async def close_context(ctx: ToolContext) -> None:
    from tests.ssh_fixtures import close_context as close

    await close(ctx)


def expand(command: str) -> str:
    command = re.sub(r"<<b64:(.*?)>>", lambda m: base64.b64encode(m[1].encode()).decode(), command)
    return re.sub(r"<<hex:(.*?)>>", lambda m: m[1].encode().hex(), command)


def onto_canaries(command: str, root: str, port: int) -> str:
    """Every absolute path of the command moved under the canary root (encoded payloads are
    encoded again from the moved text); port 22 becomes the canary listener's port. `~` and
    $HOME need no rewrite: HOME is the canary home while the corpus runs."""
    start = r"(?:(?<=[\s'\"=(,:<>|;&`{])|^)"

    def move(text: str) -> str:
        text = re.sub(start + r"/(?=[\w.*?\[{/\s'\")]|$)", root + "/", text)
        return re.sub(r"\b22(?=/tcp\b)|(?<=:)22\b|(?<=dport = )22\b", str(port), text)

    command = re.sub(
        r"<<b64:(.*?)>>", lambda m: base64.b64encode(move(m[1]).encode()).decode(), command
    )
    command = re.sub(r"<<hex:(.*?)>>", lambda m: move(m[1]).encode().hex(), command)
    return move(command)


def snapshot(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            if p.is_symlink():
                out[str(p)] = ("link", os.readlink(p))
            elif p.is_file():
                out[str(p)] = (st.st_mode, hashlib.sha256(p.read_bytes()).hexdigest())
            else:
                out[str(p)] = (st.st_mode, "dir")
    return out


@pytest.fixture
def canaries(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A canary tree and canary processes outside the writable set; HOME is its home."""
    root = Path(tempfile.mkdtemp(prefix="guard-canary-", dir="/var/tmp"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for rel in CANARY_FILES:
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"canary {rel} {secrets.token_hex(4)}\n")
        bin_dir = root / "procs"
        bin_dir.mkdir()
        for name in ("sshd", "canary", "python3"):  # what pkill/killall patterns aim at
            shutil.copy("/bin/sleep", bin_dir / name)
            procs.append(subprocess.Popen([str(bin_dir / name), "3600"]))
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        listener.close()
        procs.append(
            subprocess.Popen(
                [
                    shutil.which("python3") or "python3",
                    "-c",
                    "import socket,time; s=socket.socket(); "
                    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                    f"s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(3600)",
                ]
            )
        )
        deadline = time.monotonic() + 60
        while not port_open(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert port_open(port), "the canary listener did not start within 60 s"
        monkeypatch.setenv("HOME", str(root / "home/user"))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-canary-" + secrets.token_hex(8))
        yield {"root": root, "procs": procs, "port": port}
    finally:
        for p in procs:
            p.kill()
            p.wait(5)
        shutil.rmtree(root, ignore_errors=True)


def port_open(port: int) -> bool:
    """Listening, read from /proc/net/tcp (a connect per command would fill its backlog)."""
    return port in listening_ports(Path("/proc/net/tcp").read_text())


async def call(ctx: ToolContext, command: str, timeout_s: float = 20) -> tuple[str, bool, Any]:
    result, _ = await ToolBox([Bash()]).call(
        ctx, "bash", {"command": command, "timeout_s": timeout_s}
    )
    return result.text, result.is_error, result.data


async def run_confined(
    ctx: ToolContext, command: str, canaries: dict[str, Any], before: dict[str, Any]
) -> None:
    """`command` through the real bash tool: sandboxed, and every canary as it was - the files
    under the canary root, the canary processes alive, the canary port listening."""
    for sub in ("outputs", "logs", "results"):  # a confined rm may empty the run folder
        (ctx.run.path / sub).mkdir(exist_ok=True)
    text, _, data = await call(ctx, command, timeout_s=15)
    assert data.get("guard", {}).get("action") == "sandbox", (command, text)
    after = snapshot(canaries["root"])
    assert after == before, (command, text, set(before.items()) ^ set(after.items()))
    dead = [p.args[0] for p in canaries["procs"] if p.poll() is not None]
    assert not dead, (command, text, dead)
    assert port_open(canaries["port"]), (command, text)


@pytest.mark.timeout(1200)
async def test_the_destructive_corpus_runs_refused_or_confined(
    canaries: dict[str, Any], tmp_path: Path
) -> None:
    root, port = str(canaries["root"]), canaries["port"]
    ctx = make_context(tmp_path / "runs", HostConfig(name="local", workdir=str(tmp_path / "work")))
    host = ctx.hosts.get("local")  # type: ignore[union-attr]
    try:
        # the sandbox itself first: no capability, its own pid namespace, the canaries read-only
        text, _, data = await call(
            ctx,
            f"grep CapEff /proc/self/status; ps -e --no-headers | wc -l; touch {root}/probe",
        )
        assert data.get("guard", {}).get("action") == "sandbox", text
        assert "CapEff:\t0000000000000000" in text and "Read-only file system" in text, text
        assert int(text.split("CapEff:\t0000000000000000\n")[1].split()[0]) <= 5, text
        assert not (canaries["root"] / "probe").exists()
        before = snapshot(canaries["root"])
        counts: Counter[tuple[str, str]] = Counter()
        for entry in DESTRUCTIVE:
            cls = entry["class"]
            command = onto_canaries(entry["command"], root, port)
            runnable = cls not in NEVER_RUN_CLASSES and not NEVER_RUN_WORDS.search(command)
            runnable = runnable and (root in command or cls == "lifeline-process")
            decision, _ = await guarded(ctx, host, expand(command))
            if decision.action == "allow":
                pytest.fail(f"allowed outright, not run: {command!r} ({cls})")
            if decision.action == "refuse" or not runnable:
                counts[(cls, "refused" if decision.action == "refuse" else "judged")] += 1
                continue
            await run_confined(ctx, command, canaries, before)
            counts[(cls, "confined")] += 1
        total = sum(counts.values())
        print(json.dumps(sorted([*k, v] for k, v in counts.items())), total)
        assert total == len(DESTRUCTIVE)
        assert sum(v for (c, a), v in counts.items() if a == "confined") >= 150
    finally:
        await close_context(ctx)


@pytest.fixture
def secret_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home outside /tmp (the sandbox's /tmp is private anyway) holding credentials."""
    home = Path(tempfile.mkdtemp(prefix="guard-home-", dir="/var/tmp"))
    try:
        for rel in (".ssh/id_ed25519", ".aws/credentials", ".config/gcloud/creds.json", ".netrc"):
            (home / rel).parent.mkdir(parents=True, exist_ok=True)
            (home / rel).write_text("SECRET-" + rel)
        (home / "agent_key").write_text("SECRET-agent-key")
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("HF_TOKEN", "hf_canary_" + secrets.token_hex(8))
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def test_the_sandbox_confines_writes_hides_secrets_and_ends_with_the_call(
    any_host: HostConfig, tmp_path: Path, secret_home: Path
) -> None:
    outside = Path(tempfile.mkdtemp(prefix="guard-outside-", dir="/var/tmp"))
    key = HostConfig(
        name="gpu", address="ssh://u@127.0.0.1:1", identity_file=str(secret_home / "agent_key")
    )
    ctx = make_context(tmp_path / "runs", any_host, extra_hosts=[key])
    mark = f"60.{secrets.randbelow(10**9):09d}"
    try:
        # allowed outright: runs as it is
        text, err, data = await call(ctx, "touch inside.txt && ls inside.txt")
        assert not err and "guard" not in data and "inside.txt" in text, text
        # not allowed outright: confined, and says so with the rule that would allow it
        text, err, data = await call(ctx, f'python3 -c \'open("{outside}/x", "w")\'')
        assert data["guard"]["action"] == "sandbox" and "ran in the sandbox" in text, text
        assert "Read-only file system" in text and not (outside / "x").exists()
        assert data["guard"]["rule"] == "Bash(python3 -c:*)" and "agent allow" in text
        # the workdir is writable inside; /tmp is its own
        probe = (
            "import os; open('made.txt','w').write('x'); open('/tmp/priv-" + mark + "','w'); "
            "print([os.path.exists(os.path.expanduser(p)) and os.listdir(os.path.expanduser(p)) "
            "for p in ('~/.ssh', '~/.aws', '~/.config/gcloud')]); "
            "print(repr(open(os.path.expanduser('~/.netrc')).read())); "
            f"print(repr(open('{secret_home}/agent_key').read())); "
            "print(os.environ.get('HF_TOKEN'))"
        )
        text, err, data = await call(ctx, f'python3 -c "{probe}"')
        assert data["guard"]["action"] == "sandbox" and not err, text
        workdir = Path(any_host.workdir)
        assert (workdir / "made.txt").read_text() == "x"
        assert not Path(f"/tmp/priv-{mark}").exists()
        if any_host.name == "local":  # the remote's home is its own; the test's is this one's
            assert "[[], [], []]" in text and "''" in text, text
            assert "SECRET" not in text and "hf_canary" not in text, text
            assert "None" in text
        # the whole process tree ends with the call, detached or not
        text, err, data = await call(
            ctx,
            "python3 -c 'import subprocess; "
            f'subprocess.Popen(["sleep", "{mark}"], start_new_session=True)\'; echo started',
        )
        assert data["guard"]["action"] == "sandbox" and "started" in text, text
        left = subprocess.run(["pgrep", "-f", f"sleep {mark}"], capture_output=True, text=True)
        assert left.stdout.strip() == "", left.stdout
    finally:
        await close_context(ctx)
        shutil.rmtree(outside, ignore_errors=True)


async def test_the_run_folder_is_writable_but_not_its_log(tmp_path: Path) -> None:
    ctx = make_context(tmp_path / "runs", HostConfig(name="local", workdir=str(tmp_path / "w")))
    run = ctx.run.path
    try:
        log = (run / "events.jsonl").read_bytes()
        text, _, data = await call(
            ctx,
            f'python3 -c \'open("{run}/outputs/note", "w").write("x")\' && '
            f'python3 -c \'open("{run}/events.jsonl", "a").write("junk")\'',
        )
        assert data["guard"]["action"] == "sandbox", text
        assert (run / "outputs/note").read_text() == "x"
        assert "Read-only file system" in text
        assert (run / "events.jsonl").read_bytes().startswith(log)
        assert b"junk" not in (run / "events.jsonl").read_bytes()
    finally:
        await close_context(ctx)


async def test_a_symlink_out_of_the_workdir_is_not_written_outright(tmp_path: Path) -> None:
    outside = Path(tempfile.mkdtemp(prefix="guard-link-", dir="/var/tmp"))
    ctx = make_context(tmp_path / "runs", HostConfig(name="local", workdir=str(tmp_path / "w")))
    try:
        (tmp_path / "w").mkdir(exist_ok=True)
        (tmp_path / "w" / "out").symlink_to(outside)
        # a file operation under the workdir is allowed outright, unless a link leads it out
        text, _, data = await call(ctx, "touch out/f")
        assert data["guard"]["action"] == "sandbox" and "symlink" in data["guard"]["reason"]
        assert not (outside / "f").exists(), text
        text, _, data = await call(ctx, "echo x > out/f")  # a redirection: never outright
        assert data["guard"]["action"] == "sandbox", text
        assert not (outside / "f").exists(), text
    finally:
        await close_context(ctx)
        shutil.rmtree(outside, ignore_errors=True)


async def test_without_a_sandbox_it_is_refused_and_agent_allow_lets_it_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a host without a sandbox, a signal to a process the run did not record is refused;
    `agent allow RUN 'kill -TERM:*'` lets it through. A rule for code (`awk:*`) does not: there
    is no mask to run it in (tests/test_guard_boundary.py has why)."""
    from agent.cli.main import main
    from agent.view.live import event_line
    from state.events import read_events

    ctx = make_context(tmp_path / "runs", HostConfig(name="local", workdir=str(tmp_path / "w")))
    ctx.config.guard = GuardConfig(sandbox=False)
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        text, err, data = await call(ctx, f"kill -TERM {sleeper.pid}")
        assert err and data["guard"]["action"] == "refuse", text
        assert "no sandbox" in text and "agent allow" in text
        assert sleeper.poll() is None, text  # not run
        for rule in ("kill -TERM:*", "awk:*"):
            code = main(["allow", str(ctx.run.path), rule])
            assert code == 0 and "queued" in capsys.readouterr().out
        assert main(["allow", str(ctx.run.path), "^awk.*$"]) == 2
        assert "regex" in capsys.readouterr().err
        assert drain(ctx.run) == 2  # what the loop does before its next model call
        events = read_events(ctx.run.events_path).events
        allowed = [e for e in events if e["type"] == "guard_allowed"]
        assert [e["rule"] for e in allowed] == ["kill -TERM:*", "awk:*"]
        line = event_line(allowed[0])
        assert line is not None and "kill -TERM:*" in line.plain
        assert ctx.run.state.guard_allow == ["kill -TERM:*", "awk:*"]
        assert "awk:*" in json.dumps(ctx.run.state.messages[-1])  # the model is told
        text, err, data = await call(ctx, f"kill -TERM {sleeper.pid}")
        assert not err and data["guard"]["rule"] == "kill -TERM:*", text
        assert sleeper.wait(30) == -15
        text, err, data = await call(ctx, "awk 'BEGIN { print 6 * 7 }'")
        assert err and "no sandbox to mask it in" in text, text
        assert re.search(r"^42$", text, re.M) is None, text
    finally:
        sleeper.kill()
        sleeper.wait(5)
        await close_context(ctx)


@pytest.mark.slow  # two pipeline campaigns (~1 min each here)
def test_the_lab_campaign_decides_the_same_with_the_sandbox_on_and_off(tmp_path: Path) -> None:
    """The autopilot's bash calls (job polls, the acceptance grep) are allowed outright, so the
    sandbox changes none of its decisions."""
    from tools.servers.pipeline_lab import setup

    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    decisions = {}
    for sandbox in ("true", "false"):
        lab = setup(tmp_path / f"lab-{sandbox}", defect=True, scale=4000)
        text = lab.config.read_text().replace("[1, 2, 5, 10, 30, 70]", "[1, 4, 16]")
        text = text.replace("max_tokens = 128", "max_tokens = 64")
        lab.config.write_text(text + f"\n[guard]\nsandbox = {sandbox}\n")
        runs = tmp_path / f"runs-{sandbox}"
        done = subprocess.run(
            [
                *(sys.executable, "-m", "agent.cli", "run", "--config", str(lab.config)),
                *("--goal", "train an EAGLE-3 drafter and beat the baseline", "--model"),
                *("autopilot", "--runs-dir", str(runs), "--run-id", "r"),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        lines = (runs / "r" / "events.jsonl").read_text().splitlines()
        evs = [json.loads(line) for line in lines if line.strip()]
        bash = [e for e in evs if e["type"] == "tool_result" and e["name"] == "bash"]
        assert bash and all("guard" not in e.get("data", {}) for e in bash)  # all allowed
        # the decisions, not the polls (how many depends on the machine's speed)
        jobs = [e["name"] for e in evs if e["type"] == "job_started"]
        launches = [
            e["input"].get("flags")
            for e in evs
            if e["type"] == "tool_call" and e["name"] == "start_server"
        ]
        # the pipeline's stages and that the drafter it trained was served; which configurations
        # follow, and in what order, rests on measurements a loaded machine moves (a loaded run
        # relaunched the baseline for another A/A sweep before the drafter, the other did not)
        drafter = {"--speculative-algorithm": "EAGLE3", "--speculative-draft-model-path": "drafter"}
        served = any(all(f and f.get(k) == v for k, v in drafter.items()) for f in launches)
        assert (runs / "r" / "recommendation.json").is_file()
        decisions[sandbox] = (jobs, served)
    assert decisions["true"] == decisions["false"] and decisions["true"][1]


async def test_a_job_is_decided_as_bash_is_refused_or_confined(tmp_path: Path) -> None:
    """start_job goes through the same decision as bash: what the rules do not allow runs in the
    sandbox for the job's whole life (it outlives the call, not the sandbox), and what the deny
    rules refuse does not start."""
    from tools.base import ToolError
    from tools.jobs import StartJob

    outside = Path(tempfile.mkdtemp(prefix="guard-job-", dir="/var/tmp"))
    (outside / "keep").write_text("canary")
    work = tmp_path / "w"
    ctx = make_context(tmp_path / "runs", HostConfig(name="local", workdir=str(work)))
    try:
        work.mkdir(exist_ok=True)
        jobs = ToolBox([StartJob()])
        result, _ = await jobs.call(
            ctx,
            "start_job",
            {"name": "wipe", "command": f"rm -rf {outside}; echo done > out.txt"},
        )
        assert not result.is_error, result.text
        exit_file = Path(ctx.run.state.jobs["wipe"]["exit_file"])
        deadline = time.monotonic() + 120
        while not exit_file.exists():
            assert time.monotonic() < deadline, "the job did not end within 120 s"
            time.sleep(0.1)
        assert (outside / "keep").read_text() == "canary", "the job ran unconfined"
        assert (work / "out.txt").read_text() == "done\n", "the job could not write its workdir"
        with pytest.raises(ToolError, match="refused by the destructive-command guard"):
            await StartJob().run(ctx, StartJob.Input(name="root", command="rm -rf /"))
        assert "root" not in ctx.run.state.jobs
    finally:
        await close_context(ctx)
        shutil.rmtree(outside, ignore_errors=True)
