"""tools.guard.decide: what the bash tool does with a command - allow, sandbox or refuse - judged on
the corpora (no command is run here; tests/test_guard_sandbox.py runs them confined)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from tools.domain.config import ConfigError, GuardConfig
from tools.domain.permission_rules import RuleError, parse_rule
from tools.guard import Context, Rules, decide

DATA = Path(__file__).parent / "data"
DESTRUCTIVE: list[dict[str, str]] = json.loads((DATA / "destructive_corpus.json").read_text())[
    "commands"
]
ORDINARY: list[str] = json.loads((DATA / "ordinary_corpus.json").read_text())["commands"]
CLASSES = {
    "shell-text", "xargs-find", "in-place", "delete", "lifeline-process", "lifeline-network",
    "wrappers", "interpreters", "system", "resource",
}  # fmt: skip
# a campaign box as the bash tool sees it: the workdir, the run folder, what the run started
BOX = Context(
    workdir="/root/campaign",
    run_dir="/root/runs/demo",
    home="/root",
    pids=frozenset({4242, 12345}),
    ports=frozenset({30000}),
)


SHELL_TOOLS = ("bash", "start_job")


def expand(command: str) -> str:
    """The corpus writes encoded payloads readably: <<b64:X>> and <<hex:X>>."""
    command = re.sub(r"<<b64:(.*?)>>", lambda m: base64.b64encode(m[1].encode()).decode(), command)
    return re.sub(r"<<hex:(.*?)>>", lambda m: m[1].encode().hex(), command)


def session_commands() -> list[str]:
    """Every bash and start_job command of the recorded sessions (tests/sessions)."""
    found = []
    for path in (Path(__file__).parent / "sessions").rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            event = json.loads(line) if line.strip() else {}
            if event.get("type") == "tool_call" and event.get("name") in SHELL_TOOLS:
                found.append(event["input"]["command"])
            for block in event.get("content") or [] if event.get("role") == "assistant" else []:
                if block.get("type") == "tool_use" and block.get("name") in SHELL_TOOLS:
                    found.append(block["input"]["command"])
    return found


def test_the_destructive_corpus_is_large_and_covers_every_class() -> None:
    commands = [e["command"] for e in DESTRUCTIVE]
    assert len(set(commands)) == len(commands) >= 300
    assert {e["class"] for e in DESTRUCTIVE} == CLASSES


@pytest.mark.parametrize("sandbox", [True, False])
def test_no_destructive_command_is_allowed(sandbox: bool) -> None:
    by_class: Counter[tuple[str, str]] = Counter()
    for entry in DESTRUCTIVE:
        d = decide(expand(entry["command"]), sandbox=sandbox, context=BOX)
        assert d.action != "allow", entry
        assert d.reason and "\n" not in d.reason and len(d.reason) < 400, (entry, d.reason)
        assert sandbox or d.action == "refuse"
        by_class[(entry["class"], d.action)] += 1
    # a fork bomb is not contained by the sandbox (no process limit): refused outright
    assert all(a == "refuse" for (c, a) in by_class if c == "resource")
    print(sorted(by_class.items()))


HELDOUT = DATA / "destructive_heldout.txt"
HELDOUT_CLASSES = {
    "input-substitution", "subscript-evaluation", "write-then-run", "read-only-options",
    "symlinks", "pip-anywhere", "lifelines", "find-exec", "network-env", "public-bind",
    "background", "wrappers",
}  # fmt: skip


def heldout() -> list[tuple[str, str]]:
    """(class, command) of tests/data/destructive_heldout.txt: `# class: X` starts a class,
    `<NL>` is a newline."""
    found: list[tuple[str, str]] = []
    cls = ""
    for line in HELDOUT.read_text().splitlines():
        if line.startswith("# class:"):
            cls = line.split(":", 1)[1].strip()
        elif line.strip() and not line.startswith("#"):
            found.append((cls, line.replace("<NL>", "\n")))
    return found


def campaign_box(tmp_path: Path) -> Context:
    """BOX on the local host: a workdir with the venv, scripts and logs a campaign has, the run
    folder, what the run started; scripts read and folders listed (under tmp_path)."""
    work = tmp_path / "campaign"
    for folder in (".venv/lib/python3.11/site-packages", ".venv/bin", "scripts", "logs", "configs"):
        (work / folder).mkdir(parents=True)
    (work / "scripts" / "datagen.sh").write_text("#!/usr/bin/env bash\nset -euo pipefail\n")
    (work / "logs" / "server.log").write_text("ready\n")

    def here(path: str) -> Path:
        return Path(path.replace("/root/campaign", str(work), 1))

    return replace(
        BOX,
        read=lambda p: here(p).read_text() if here(p).is_file() else None,
        listdir=lambda p: sorted(os.listdir(here(p))) if here(p).is_dir() else None,
    )


def test_the_held_out_corpus_is_large_new_and_covers_every_class() -> None:
    entries = heldout()
    commands = [c for _, c in entries]
    assert len(set(commands)) == len(commands) >= 150
    assert {c for c, _ in entries} == HELDOUT_CLASSES
    assert all(n >= 10 for n in Counter(c for c, _ in entries).values())
    guard = json.loads((DATA / "guard_corpus.json").read_text())
    others = set(ORDINARY) | {e["command"] for e in DESTRUCTIVE}
    others |= {x if isinstance(x, str) else x["command"] for k in guard for x in guard[k]}
    assert not set(commands) & others


@pytest.mark.parametrize("sandbox", [True, False])
def test_no_held_out_destructive_command_is_allowed_outright(sandbox: bool, tmp_path: Path) -> None:
    """Issue 47: 287 new destructive strings got 127 allowed outright. The held-out corpus, written
    after the certain-only shapes, on a realistic box (workdir, run folder, pids, ports known)."""
    ctx = campaign_box(tmp_path)
    by_class: Counter[tuple[str, str]] = Counter()
    for cls, command in heldout():
        d = decide(command, sandbox=sandbox, context=ctx)
        assert d.action != "allow", (cls, command)
        assert d.reason and "\n" not in d.reason, (command, d.reason)
        assert sandbox or d.action == "refuse"
        by_class[(cls, d.action)] += 1
    assert all(a == "refuse" for (c, a) in by_class if c == "public-bind" and sandbox is False)
    print(sorted(by_class.items()))


def test_the_campaign_is_not_refused() -> None:
    commands = ORDINARY + session_commands()
    assert len(ORDINARY) >= 150 and len(set(session_commands())) >= 7
    refused = []
    for command in commands:
        d = decide(command, sandbox=True, context=BOX)
        if d.action == "refuse":
            refused.append((command, d.reason))
            assert d.rule, f"a refusal must name the rule that allows it: {command!r}"
        else:
            assert d.action == "sandbox" or d.reason is None
    assert len(refused) <= 0.01 * len(commands), refused
    no_sandbox = [c for c in commands if decide(c, sandbox=False, context=BOX).action == "refuse"]
    for command in no_sandbox:
        d = decide(command, sandbox=False, context=BOX)
        assert d.rule and "agent allow" not in (d.reason or "") and "no sandbox" in (d.reason or "")
    # without a sandbox, stricter: what is not allowed outright is refused, nothing more allowed
    sandboxed = [c for c in commands if decide(c, sandbox=True, context=BOX).action == "sandbox"]
    assert set(sandboxed) <= set(no_sandbox)
    allowed = {c for c in commands if decide(c, sandbox=True, context=BOX).action == "allow"}
    assert allowed == {
        c for c in commands if decide(c, sandbox=False, context=BOX).action == "allow"
    }
    print(f"ordinary: {len(commands)}, refused {len(refused)}, without a sandbox {len(no_sandbox)}")


def lab_box(tmp_path: Path) -> Context:
    """The pipeline lab as the bash tool sees it on the local host: its workdir with the
    scripts (read), the folder listed (no package shadows an engine module)."""
    from tools.servers.pipeline_lab import STAGES, script

    work = tmp_path / "work"
    (work / "scripts").mkdir(parents=True)
    for name in STAGES:
        (work / "scripts" / f"{name}.sh").write_text(script(name, 4000, name == "datagen"))
    return Context(
        workdir=str(work),
        run_dir=str(tmp_path / "runs" / "demo"),
        home="/root",
        pids=BOX.pids,
        ports=BOX.ports,
        read=lambda p: Path(p).read_text() if Path(p).is_file() else None,
        listdir=lambda p: sorted(os.listdir(p)) if os.path.isdir(p) else None,
    )


def test_the_autopilots_own_bash_commands_are_allowed(tmp_path: Path) -> None:
    """The lab campaign takes the same decisions with the sandbox on and off: its polls and the
    pipeline's scripts (their text read: `exec python -m sim.pipeline`); the drafter's
    acceptance is read with read_log, not bash."""
    from tools.servers.pipeline_lab import STAGES

    ctx = lab_box(tmp_path)
    for command in (
        "sleep 12.5",
        *(f"bash scripts/{name}.sh" for name in STAGES),
    ):
        assert decide(command, context=ctx).action == "allow", command
    # the same script over SSH (its text not readable here) is not certain
    assert decide("bash scripts/datagen.sh", context=BOX).action == "sandbox"


@pytest.mark.parametrize(
    "command",
    [
        "echo hi > /dev/sda",  # the issue's: an allow rule `echo .*` let it through
        "echo hi > /etc/passwd",
        "cat x > /dev/nvme0n1",
    ],
)
def test_a_write_to_a_device_is_refused_even_with_an_allow_rule(command: str) -> None:
    rules = Rules.parse(["echo:*", "cat:*"])
    assert decide(command, rules, context=BOX).action == "refuse"


def test_a_redirection_is_allowed_outright_only_to_dev_null_or_stderr_to_stdout() -> None:
    assert decide("ls logs > /dev/null 2>&1", context=BOX).action == "allow"
    assert decide("nvidia-smi 2>/dev/null | head -5", context=BOX).action == "allow"
    for command in (
        "echo hi > /etc/motd",
        "echo hi > /root/campaign/notes.txt",  # the workdir: written, so not certain
        "echo hi >> /root/runs/demo/outputs/x",
        "echo hi > ../x",
        "cd /etc && echo hi > motd",
        "cat < notes.txt",
        "grep x <<< 'a b'",
    ):
        assert decide(command, context=BOX).action == "sandbox", command


def test_the_form_of_a_line_is_judged_whatever_its_programs() -> None:
    """A substitution, an expansion (quoted too: builtins evaluate subscripts), an assignment,
    a background job, a function, two commands that write: not certain."""
    for command in (
        "echo $(ls)",
        "cat <(ls)",
        "printf -v 'a[$(ls)]' x",
        "test 'a[$(ls)]' -eq 0",
        "ls $HOME",
        "X=1 ls",
        "X=1; ls",
        "sleep 5 &",
        "f() { ls; }; f",
        "mkdir -p a && cp b a/",
        "timeout --signal=KILL 5 sudo ls",
        "setsid ls",
    ):
        assert decide(command, context=BOX).action == "sandbox", command
    assert decide("mkdir -p a && ls a", context=BOX).action == "allow"


def test_a_read_only_program_is_allowed_with_the_options_it_lists_only() -> None:
    allowed = (
        "nvidia-smi --query-gpu=memory.used --format=csv -l 1",
        "git -C /opt/sglang log --oneline -3",
        "curl -s http://127.0.0.1:30000/v1/models",
        "sed -n '1,20p' logs/server.log",
        "sort -n logs/x.txt",
        "tail -n 20 logs/server.log",
        "dmesg -T",
    )
    for command in allowed:
        assert decide(command, context=BOX).action == "allow", command
    for command in (
        "nvidia-smi -lmcd 1",
        "git log --oneline",  # the workdir's repository: its config may run commands
        "curl -s http://127.0.0.1:8265/api/jobs/",  # loopback, but no server of this run
        "curl -sx http://proxy:1 http://127.0.0.1:30000/",
        "sed -e '1e ls' logs/server.log",
        "sort -o /tmp/x logs/x.txt",
        "tail --pid=1 --unknown logs/server.log",
        "dmesg -c",
        "cat ~/.ssh/id_rsa",
        "cat /proc/4242/environ",
        "grep -r token ~",
        "printenv",
    ):
        assert decide(command, context=BOX).action == "sandbox", command


def test_an_engine_launch_follows_start_servers_public_bind_rule(tmp_path: Path) -> None:
    ctx = lab_box(tmp_path)
    for command in (
        "vllm serve /m --host 0.0.0.0 &",
        "python -m sglang.launch_server --model-path m --host 0.0.0.0",
        "llama-server -m m.gguf --host=10.0.0.5",
        "trtllm-serve /m --host 0.0.0.0",
        "bash -c 'python -m sim --host :: --port 30000'",
    ):
        d = decide(command, context=ctx)
        assert d.action == "refuse" and "allow_public_bind" in (d.reason or ""), command
        assert "\n" not in (d.reason or "")
    assert decide(
        "vllm serve /m --host 0.0.0.0", context=replace(ctx, public_bind=True)
    ).action != ("refuse")
    # vLLM listens on every interface without --host: start_server adds it, a line cannot
    d = decide("vllm serve /m --port 8000", context=ctx)
    assert d.action == "sandbox" and "every interface" in (d.reason or "")


def test_python_m_is_not_certain_where_the_workdir_may_shadow_the_module(tmp_path: Path) -> None:
    ctx = lab_box(tmp_path)
    stage = "python -m sim.pipeline train --time-scale 4000 --epochs 3"
    assert decide(stage, context=ctx).action == "allow"
    assert decide("python -m sim.evil", context=ctx).action == "sandbox"
    assert decide("python -m sim.pipeline train --workdir /etc", context=ctx).action == "sandbox"
    assert decide(f"cd /etc && {stage}", context=ctx).action == "sandbox"  # it writes where it runs
    assert decide(stage, context=BOX).action == "sandbox"  # the workdir cannot be listed
    (Path(ctx.workdir or "") / "sim").mkdir()
    assert decide(stage, context=ctx).action == "sandbox"


def test_kill_is_allowed_for_what_the_run_started_only() -> None:
    assert decide("kill -9 4242", context=BOX).action == "allow"
    assert decide("kill -TERM -- -12345", context=BOX).action == "allow"
    assert decide("kill -9 999", context=BOX).action == "sandbox"
    assert decide("kill -9 $(pgrep sshd)", context=BOX).action == "sandbox"
    assert decide("fuser -k 30000/tcp", context=BOX).action == "allow"
    assert decide("fuser -k 22/tcp", context=BOX).action == "sandbox"
    assert decide("pkill -f sglang", context=BOX).action == "allow"
    assert decide("pkill -f 'sglang|sshd'", context=BOX).action == "sandbox"


def test_pip_installs_only_in_the_sandbox() -> None:
    """The sandbox writes the workdir's venv; nothing a pip install fetches runs outright."""
    assert decide(".venv/bin/pip install x", context=BOX).action == "sandbox"
    assert decide("/root/campaign/.venv/bin/python -m pip install x", context=BOX).action == (
        "sandbox"
    )
    assert decide("pip install x", context=BOX).action == "sandbox"
    assert decide(".venv/bin/pip list", context=BOX).action == "sandbox"  # the venv's .pth run
    assert decide("pip list", context=BOX).action == "allow"


def test_a_script_is_judged_by_its_text_where_it_can_be_read() -> None:
    texts = {
        "/root/campaign/ok.sh": "nvidia-smi\ntail -n 5 logs/x.log\n",
        "/root/campaign/bad.sh": "rm -rf /\n",
    }
    ctx = Context(workdir="/root/campaign", home="/root", read=texts.get)
    assert decide("bash ok.sh", context=ctx).action == "allow"
    bad = decide("bash bad.sh", context=ctx)
    assert bad.action == "refuse" and "bad.sh" in (bad.reason or "")
    assert decide("bash /etc/x.sh", context=ctx).action == "sandbox"


def test_a_bare_name_is_not_certain_where_path_holds_a_folder_the_model_writes() -> None:
    system = replace(BOX, search_path=("/usr/local/bin", "/usr/bin", "/bin"))
    assert decide("ls -la", context=system).action == "allow"
    for path in (("/root/campaign/.venv/bin", "/usr/bin"), ("", "/usr/bin"), (".", "/bin")):
        assert decide("ls -la", context=replace(BOX, search_path=path)).action == "sandbox", path
    assert decide("/bin/ls -la", context=replace(BOX, search_path=(".",))).action == "allow"


def test_while_a_job_runs_a_write_or_a_script_is_not_certain(tmp_path: Path) -> None:
    """A job (confined or not) may swap a folder for a link or rewrite a script between the
    check and the run: reads and signals stay certain, writes and scripts do not."""
    ctx = lab_box(tmp_path)
    busy = replace(ctx, busy=True)
    for command in ("mkdir -p out", "bash scripts/train.sh"):
        assert decide(command, context=ctx).action == "allow", command
        assert decide(command, context=busy).action == "sandbox", command
    assert decide("tail -n 5 scripts/train.sh", context=busy).action == "allow"


def test_a_script_that_writes_is_not_certain() -> None:
    """bash reads a script as it runs it: `cp evil.sh x.sh` inside x.sh runs evil.sh's rest."""
    texts = {"/root/campaign/x.sh": "cp scripts/evil.sh x.sh\n", "/root/campaign/ok.sh": "ls\n"}
    ctx = replace(BOX, read=texts.get)
    assert decide("bash x.sh", context=ctx).action == "sandbox"
    assert decide("bash ok.sh", context=ctx).action == "allow"
    assert decide("bash /dev/fd/0", context=ctx).action == "sandbox"


def test_rules_deny_wins_and_the_most_specific_allow_is_named() -> None:
    rules = Rules.parse(["Bash(nvidia-smi:*)", "nvidia-smi -pm:*"], ["Bash(nvidia-smi -pm 0)"])
    d = decide("nvidia-smi -pm 1", rules, context=BOX)
    assert d.action == "allow" and d.rule == "nvidia-smi -pm:*"
    denied = decide("nvidia-smi -pm 0", rules, context=BOX)
    assert denied.action == "refuse" and "Bash(nvidia-smi -pm 0)" in (denied.reason or "")
    # a rule matches one simple command, never the line
    assert decide("nvidia-smi -pm 1; rm -rf /", rules, context=BOX).action == "refuse"
    # deny rules refuse what would otherwise be allowed outright
    assert decide("ls", Rules.parse([], ["ls:*"]), context=BOX).action == "refuse"


def test_a_refusal_names_the_rule_that_would_allow_it() -> None:
    d = decide("sysctl -w vm.overcommit_memory=1", sandbox=False, context=BOX)
    assert d.action == "refuse" and d.rule == "Bash(sysctl -w:*)"
    assert decide("sysctl -w vm.overcommit_memory=1", Rules.parse([d.rule]), False, BOX).action == (
        "allow"
    )
    gate = decide("reboot", context=BOX)
    assert gate.action == "refuse" and gate.rule == "Bash(reboot)"


@pytest.mark.parametrize(
    ("text", "words", "prefix"),
    [
        ("Bash(npm run test:*)", ("npm", "run", "test"), True),
        ("pip install:*", ("pip", "install"), True),
        ("Bash(nvidia-smi -pm 1)", ("nvidia-smi", "-pm", "1"), False),
        ("kill -0 *", ("kill", "-0"), True),
    ],
)
def test_rules_are_written_as_claude_code_writes_them(
    text: str, words: tuple[str, ...], prefix: bool
) -> None:
    rule = parse_rule(text)
    assert (rule.words, rule.prefix) == (words, prefix)


@pytest.mark.parametrize("bad", ["^reboot$", "(", "Bash(rm", "", ":*", "ls; rm:*", "a | b"])
def test_a_bad_rule_is_one_line_naming_the_key(bad: str) -> None:
    with pytest.raises(RuleError):
        parse_rule(bad)
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as info:
        GuardConfig(allow=[bad])
    assert "allow" in str(info.value)
    assert ConfigError  # the loader turns it into one line naming guard.allow (test_bad_input_cli)


def test_every_engine_profiles_launch_is_not_refused(tmp_path: Path) -> None:
    """The launch each profile's header describes (tools/servers/profiles/*.toml), on loopback:
    run in the sandbox (an engine's flags can serve or write files, run the model's code: it is
    start_server's to launch), never refused. A new profile fails here until it names its
    launcher (its `[processes]`) and this test a launch line of it."""
    from tools.servers.profiles.load import builtin_names

    launches = {
        "sglang": ["python -m sglang.launch_server --model-path M --port 30000"],
        "vllm": [
            "vllm serve M --port 8000 --host 127.0.0.1",
            "python3 -m vllm.entrypoints.openai.api_server --model M --host 127.0.0.1",
        ],
        "llama.cpp": ["llama-server -m model.gguf --port 8080", "/opt/llama/bin/llama-server -m m"],
        "llama-cpp-python": ["python -m llama_cpp.server --model model.gguf"],
        "sim": ["python -m sim --port 30000"],
        "trtllm": ["trtllm-serve M --tp_size 8 --extra_llm_api_options extra.yaml --port 8000"],
        "openai": [],  # any server: its command is the user's, not a known shape
    }
    assert set(launches) == set(builtin_names())
    ctx = lab_box(tmp_path)
    for commands in launches.values():
        for command in commands:
            d = decide(command, context=ctx)  # known as an engine: the reason names the tool
            assert d.action == "sandbox" and "start_server" in (d.reason or ""), (command, d)
            line = f"nohup {command} > logs/server.log 2>&1 &"
            assert decide(line, context=ctx).action == "sandbox", line


def docs_commands() -> list[str]:
    """The shell commands the docs show (README, docs/, prompts/): lines of fenced bash blocks,
    and indented lines that start with a command (on this machine's PATH, or the project's own);
    continued lines joined, a synopsis' trailing `   (note)` dropped."""
    root = Path(__file__).resolve().parent.parent
    own = ("agent", "vllm", "llama-server", "ray", "srun", "sbatch", "kubectl", "nvidia-smi")
    found: list[str] = []
    texts = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    for path in [*texts, *sorted((root / "prompts").rglob("*.md"))]:
        fence: str | None = None
        pending = ""
        for line in path.read_text().splitlines():
            opened = re.match(r"^\s*```(\w*)", line)
            if opened:
                fence = None if fence is not None else opened.group(1)
                continue
            if fence in ("bash", "sh", "shell", "console"):
                text = line.strip().removeprefix("$ ")
            elif fence is None and line.startswith("    ") and not line.startswith("     "):
                text = line.strip()
            else:
                continue
            text = pending + text
            if text.endswith("\\"):
                pending = text[:-1]
                continue
            pending = ""
            text = re.sub(r"\s{2,}\(.*\)$", "", text)
            words = [w for w in text.split() if "=" not in w or w.startswith("-")]
            first = words[0] if words else ""
            if text.startswith("#") or not first or re.match(r"agent [\w-]+: ", text):
                continue  # a comment, or output (`agent run: agent.toml: ...`)
            if (
                fence
                or shutil.which(first)
                or first.startswith((".venv/", "./", ".ci/"))
                or first in own
            ):
                found.append(text)
    return found


def test_the_docs_examples_are_not_refused() -> None:
    commands = docs_commands()
    assert len(commands) >= 40, commands  # the docs show commands: the scan finds them
    refused = [(c, d.reason) for c in commands if (d := decide(c, context=BOX)).action == "refuse"]
    assert len(refused) <= 0.02 * len(commands), refused
    print(f"docs' examples: {len(commands)}, refused {len(refused)}")
