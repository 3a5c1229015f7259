"""tools.guard.decide: what the bash tool does with a command - allow, sandbox or refuse - judged on
the corpora (no command is run here; tests/test_guard_sandbox.py runs them confined)."""

from __future__ import annotations

import base64
import json
import re
import shutil
from collections import Counter
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
    assert len(refused) <= 0.02 * len(commands), refused
    no_sandbox = [c for c in commands if decide(c, sandbox=False, context=BOX).action == "refuse"]
    for command in no_sandbox:
        d = decide(command, sandbox=False, context=BOX)
        assert d.rule and "agent allow" not in (d.reason or "") and "no sandbox" in (d.reason or "")
    print(f"ordinary: {len(commands)}, refused {len(refused)}, without a sandbox {len(no_sandbox)}")


def test_the_autopilots_own_bash_commands_are_allowed() -> None:
    from agent.brains.autopilot.pipeline_verdict import PROBE

    for command in (
        f"grep -ho '{PROBE}: [0-9.]*' /root/runs/demo/logs/server-eagle.log | tail -1",
        "sleep 12.5",
        "bash scripts/datagen.sh",
    ):
        assert decide(command, context=BOX).action == "allow", command


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


def test_a_write_outside_the_workdir_is_not_allowed_outright() -> None:
    assert decide("echo hi > /etc/motd", context=BOX).action == "sandbox"
    assert decide("echo hi > /root/campaign/notes.txt", context=BOX).action == "allow"
    assert decide("echo hi > /root/runs/demo/outputs/x", context=BOX).action == "allow"
    assert decide("echo hi > ../x", context=BOX).action == "sandbox"
    assert decide("cd /etc && echo hi > motd", context=BOX).action == "sandbox"


def test_kill_is_allowed_for_what_the_run_started_only() -> None:
    assert decide("kill -9 4242", context=BOX).action == "allow"
    assert decide("kill -TERM -- -12345", context=BOX).action == "allow"
    assert decide("kill -9 999", context=BOX).action == "sandbox"
    assert decide("kill -9 $(pgrep sshd)", context=BOX).action == "sandbox"
    assert decide("fuser -k 30000/tcp", context=BOX).action == "allow"
    assert decide("fuser -k 22/tcp", context=BOX).action == "sandbox"
    assert decide("pkill -f sglang", context=BOX).action == "allow"
    assert decide("pkill -f 'sglang|sshd'", context=BOX).action == "sandbox"


def test_pip_is_allowed_into_the_workdirs_venv_only() -> None:
    assert decide(".venv/bin/pip install x", context=BOX).action == "allow"
    assert decide("/root/campaign/.venv/bin/python -m pip install x", context=BOX).action == "allow"
    assert decide("pip install x", context=BOX).action == "sandbox"
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


def test_every_engine_profiles_launch_is_allowed() -> None:
    """The launch each profile's header describes (tools/servers/profiles/*.toml): allowed
    outright, in the background with its log in the workdir. A new profile fails here until its
    launcher is added to tools/guard/context.py."""
    from tools.servers.profiles.load import builtin_names

    launches = {
        "sglang": ["python -m sglang.launch_server --model-path M --port 30000"],
        "vllm": [
            "vllm serve M --port 8000",
            "python3 -m vllm.entrypoints.openai.api_server --model M",
        ],
        "llama.cpp": ["llama-server -m model.gguf --port 8080", "/opt/llama/bin/llama-server -m m"],
        "llama-cpp-python": ["python -m llama_cpp.server --model model.gguf"],
        "sim": ["python -m sim --port 30000", "agent sim serve --port 30000"],
        "openai": [],  # any server: its command is the user's, not a known shape
    }
    assert set(launches) == set(builtin_names())
    for commands in launches.values():
        for command in commands:
            line = f"nohup {command} > logs/server.log 2>&1 &"
            assert decide(line, context=BOX).action == "allow", line


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
            if text.startswith("#") or not first:
                continue
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
