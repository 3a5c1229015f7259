"""Issue 47's boundary as decide() judges it, without running anything (so it holds where
bubblewrap is missing too; tests/test_guard_boundary.py runs the same through the bash tool):
secrets, the environment and the run's control files are never allowed outright - not even with
a supervisor's allow rule - while the commands a campaign uses stay allowed."""

from __future__ import annotations

import pytest

from tools.guard import Context, Rules, decide

BOX = Context(workdir="/root/campaign", run_dir="/root/runs/demo", home="/root")
NESTED = Context(workdir="/root/campaign", run_dir="/root/campaign/runs/demo", home="/root")
RUN = "/root/runs/demo"

NEVER_OUTRIGHT = [
    "printenv ANTHROPIC_API_KEY",
    "printenv",
    "env",
    "export -p",
    "declare -p",
    "set",
    "compgen -e",
    "ps auxe",
    "echo $ANTHROPIC_API_KEY",
    "echo ${DATABASE_URL}",
    "echo $GH_PAT > /root/campaign/x",
    "cat /proc/1/environ",
    "cat /proc/self/environ",
    "tr '\\0' '\\n' < /proc/4242/environ",
    "cat ~/.ssh/id_*",
    "cat ~/.ssh/id_ed25519",
    "cat /root/.ssh/id_rsa",
    "cat $HOME/.pgpass",
    "cat ~/.npmrc",
    "cat ~/.config/gh/hosts.yml",
    "cat ~/.*/credentials",
    "bash -c 'cat ~/.aws/credentials'",
    "grep -r token ~",
    "tar czf home.tgz ~",
    "cat /root/.local/state/campaign-agent/inbox-keys/abc.key",
    f"echo x > {RUN}/events.jsonl",
    f"echo '{{}}' > {RUN}/inbox/m.json",
    f"cp /dev/null {RUN}/todos.json",
    f"rm {RUN}/run.lock",
    f"touch {RUN}/config.toml",
    f"tee {RUN}/results/x.json",
    f"mv {RUN}/inbox /root/campaign/x",
    f"rm -rf {RUN}",
    "rm -rf /root/runs",
    "rm -rf /root/r*",
    f"cd {RUN} && echo x > todos.json",
]


@pytest.mark.parametrize("command", NEVER_OUTRIGHT)
def test_never_outright_even_with_an_allow_rule(command: str) -> None:
    rules = Rules.parse(["printenv:*", "env", "cat:*", "echo:*", "grep:*", "rm:*", "tee:*"])
    assert decide(command, context=BOX).action != "allow", command
    assert decide(command, rules, context=BOX).action != "allow", command
    assert decide(command, sandbox=False, context=BOX).action == "refuse", command


@pytest.mark.parametrize(
    "command",
    [
        "echo x > runs/demo/events.jsonl",
        "rm -rf runs",
        "rm -rf r*",
        "rm -rf runs/demo/inbox",
        "cd runs/demo && touch run.lock",
    ],
)
def test_the_run_inside_the_workdir_is_still_the_runs(command: str) -> None:
    assert decide(command, context=NESTED).action != "allow", command


@pytest.mark.parametrize(
    "command",
    [
        "ps -eo pid,ppid,pgid,etime,cmd",
        "ps aux",
        f"tail -n 50 {RUN}/logs/server.log",
        f"cat {RUN}/todos.json",
        "ls -la",
        "sleep 12.5",
    ],
)
def test_what_a_campaign_reads_stays_allowed(command: str) -> None:
    assert decide(command, context=BOX).action == "allow", command


def test_control_is_the_run_folder_but_its_outputs_and_logs() -> None:
    assert BOX.control(f"{RUN}/events.jsonl") and BOX.control(f"{RUN}/inbox/x.json")
    assert BOX.control(RUN) and BOX.control("/root/runs") and BOX.control("/root/r*")
    assert BOX.control(f"{RUN}/outputs") and BOX.control(f"{RUN}/logs")
    assert not BOX.control(f"{RUN}/outputs/note") and not BOX.control(f"{RUN}/logs/x.log")
    assert not BOX.control("/root/campaign/x") and not BOX.control("/root/other")
    assert BOX.writable(f"{RUN}/outputs/note") and not BOX.writable(f"{RUN}/todos.json")
