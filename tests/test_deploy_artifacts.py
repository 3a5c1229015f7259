"""The winner as files (agent/report/deploy.py, docs/report.md "Deploying the winner"): the launch
script starts the winner on the lab for real; the compose file and the Kubernetes manifests parse
(JSON is YAML: they are read back with json) and carry the command, the port, the GPUs and the
engine profile's readiness probes; a concurrency policy gives a server, a service and a Deployment
per range, and the routing rule; the report links them."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from agent.report import gather, render_files, write_report
from agent.report.deploy import PLACEHOLDER_IMAGE
from state.events import read_events
from tests.report_session import command_of, flags_of, write_session
from tools.servers.profiles import ENGINES


def yaml_json(path: Path) -> Any:
    """A JSON-style YAML file read back: its `#` comment lines, then one JSON document."""
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# ")
    return json.loads("\n".join(line for line in lines if not line.startswith("#")))


def render(folder: Path, engine: str | None = None) -> list[Path]:
    f = gather(folder, read_events(folder / "events.jsonl").events)
    if engine:
        f.m.state.config["server"]["engine"] = engine
    return render_files(f, folder)


def single(folder: Path) -> Path:
    """The reference session with a one-configuration recommendation (no policy)."""
    write_session(folder)
    rec = json.loads((folder / "recommendation.json").read_text())
    rec["policy"], rec["crossover"] = [], []
    (folder / "recommendation.json").write_text(json.dumps(rec))
    return folder


WINNER = shlex.split(command_of(flags_of("cg256")))  # the session's winner, on port 30000


def test_compose_and_manifests_carry_the_command_port_gpus_and_probes(tmp_path: Path) -> None:
    folder = single(tmp_path / "run")
    render(folder)
    deploy = folder / "deploy"
    assert sorted(p.name for p in deploy.iterdir()) == [
        "README.md", "compose.yaml", "kubernetes.yaml", "launch.sh"
    ]  # fmt: skip

    services = yaml_json(deploy / "compose.yaml")["services"]
    assert len(services) == 1
    (svc,) = services.values()
    # the recommended command, listening on the container's interface (SGLang: loopback alone)
    assert svc["entrypoint"] == [*WINNER, "--host", "0.0.0.0"]
    assert svc["ports"] == ["30000:30000"]
    assert svc["healthcheck"]["test"][-1] == "http://127.0.0.1:30000/health"  # sim's readiness
    (gpus,) = svc["deploy"]["resources"]["reservations"]["devices"]
    assert gpus["count"] == 8 and gpus["capabilities"] == ["gpu"]  # --tp 8
    assert svc["image"] == PLACEHOLDER_IMAGE  # the simulator has no image, and says so
    assert "placeholder" in (deploy / "compose.yaml").read_text().splitlines()[1]

    doc = yaml_json(deploy / "kubernetes.yaml")
    kinds = [item["kind"] for item in doc["items"]]
    assert kinds == ["Deployment", "Service"]
    deployment, service = doc["items"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == [*WINNER, "--host", "0.0.0.0"]
    assert container["ports"][0]["containerPort"] == 30000
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": 30000}
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == labels == service["spec"]["selector"]
    assert service["spec"]["ports"][0]["targetPort"] == 30000


def test_the_image_and_the_readiness_path_come_from_the_engine_profile(tmp_path: Path) -> None:
    assert ENGINES["vllm"].profile.image.startswith("vllm/vllm-openai")
    assert ENGINES["sglang"].profile.image.startswith("lmsysorg/sglang")
    assert ENGINES["llama.cpp"].profile.image == "ghcr.io/ggml-org/llama.cpp:server"
    assert ENGINES["sim"].profile.image == ""  # inherits sglang's tables, not its image
    folder = single(tmp_path / "run")
    render(folder, engine="llama-cpp-python")  # no image, and /v1/models for readiness
    (svc,) = yaml_json(folder / "deploy" / "compose.yaml")["services"].values()
    assert svc["healthcheck"]["test"][-1].endswith(":30000/v1/models")
    render(folder, engine="vllm")
    (svc,) = yaml_json(folder / "deploy" / "compose.yaml")["services"].values()
    assert svc["image"] == ENGINES["vllm"].profile.image
    assert "placeholder" not in (folder / "deploy" / "compose.yaml").read_text()


def test_a_policy_gives_two_servers_two_services_two_deployments_and_the_rule(
    tmp_path: Path,
) -> None:
    folder = write_session(tmp_path / "run")  # C=1 -> eagle on 30000, C>=2 -> cg256 on 30001
    render(folder)
    deploy = folder / "deploy"
    scripts = sorted(p.name for p in deploy.glob("launch*.sh"))
    assert len(scripts) == 2 and "launch.sh" not in scripts
    services = yaml_json(deploy / "compose.yaml")["services"]
    commands = {p: s["entrypoint"] for s in services.values() for p in s["ports"]}
    eagle, cg256 = (shlex.split(command_of(flags_of(n), port)) for n, port in
                    (("eagle", 30000), ("cg256", 30001)))  # fmt: skip
    assert commands == {
        "30000:30000": [*eagle, "--host", "0.0.0.0"],
        "30001:30001": [*cg256, "--host", "0.0.0.0"],
    }
    items = yaml_json(deploy / "kubernetes.yaml")["items"]
    deployments = [i for i in items if i["kind"] == "Deployment"]
    assert len(deployments) == 2 and len([i for i in items if i["kind"] == "Service"]) == 2
    assert len({d["metadata"]["name"] for d in deployments}) == 2
    readme = (deploy / "README.md").read_text()
    assert "requests in flight" in readme and "C=1: eagle" in readme and "C>=2: cg256" in readme
    for name in ("compose.yaml", "kubernetes.yaml"):  # the rule beside the servers, too
        assert "Routing: " in (deploy / name).read_text()
    texts = {(deploy / s).read_text() for s in scripts}  # each server its range's command
    (c1,) = (t for t in texts if "EAGLE3" in t)
    (rest,) = texts - {c1}
    assert '"${PORT:-30000}"' in c1 and "C=1" in c1.splitlines()[1]
    assert '"${PORT:-30001}"' in rest and "C>=2" in rest.splitlines()[1]


def test_the_report_links_the_files(tmp_path: Path) -> None:
    folder = single(tmp_path / "run")
    render(folder)
    md, page = (folder / "report.md").read_text(), (folder / "report.html").read_text()
    for name in ("launch.sh", "compose.yaml", "kubernetes.yaml", "README.md"):
        assert f"(deploy/{name})" in md
        assert f'href="deploy/{name}"' in page
    assert md.index("## Deploy files") < md.index("## Throughput")  # right after the conclusion


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers_models(script: Path, tmp_path: Path) -> dict[str, Any]:
    """Run a launch script as a person would, on a port of ours (PORT), until the server answers
    /v1/models (a deadline), then kill its process group; returns the answer."""
    port = free_port()  # PORT overrides the recommended one, so parallel tests do not collide
    env = dict(os.environ, PORT=str(port), SIM_GPU_DIR=str(tmp_path / "gpus"))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `python`
    log_path = tmp_path / f"{script.stem}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(script)], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        deadline, answer = time.monotonic() + 90, None
        while answer is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{script.name}: no answer on /v1/models: {log_path.read_text()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
                    answer = json.load(r)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        # exec: the script's process is the server itself, no shell left in between
        argv = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert b"sim" in argv and not argv[0].endswith(b"bash"), argv
        return answer
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def test_the_launch_script_starts_the_winner_on_the_lab(tmp_path: Path) -> None:
    folder = single(tmp_path / "run")
    render(folder)
    script = folder / "deploy" / "launch.sh"
    assert os.access(script, os.X_OK)
    assert script.read_text().splitlines()[3] == "set -euo pipefail"
    answer = answers_models(script, tmp_path)
    assert answer["data"][0]["id"] == "moonshotai/Kimi-K2-Thinking"  # the winner's model


def test_nothing_to_deploy_writes_no_files(tmp_path: Path, make_run: Any) -> None:
    run, _ = make_run()
    write_report(run, "stopped")
    assert (run.path / "report.md").is_file()
    assert not (run.path / "deploy").exists()
    assert "Deploy files" not in (run.path / "report.md").read_text()


@pytest.mark.slow  # a whole small lab campaign (~1 min): .ci/run's slow stage
def test_a_lab_run_ends_with_deploy_files_whose_scripts_start_its_servers(tmp_path: Path) -> None:
    from tests.test_lab_campaign import SMALL, agent_run, check_run

    (tmp_path / "agent.toml").write_text(SMALL.format(port=free_port()))
    proc, run = agent_run(tmp_path, "--config", "agent.toml", timeout=400)
    rec = check_run(proc, run)
    deploy = run / "deploy"
    assert f"launch script, compose and Kubernetes files: {deploy}" in proc.stdout + proc.stderr
    policy = rec["policy"] if len(rec["policy"]) > 1 else []  # a policy: a server per range
    wanted = [p["command"] for p in policy] or [rec["command"]]
    scripts = sorted(deploy.glob("launch*.sh"))
    assert len(scripts) == len(wanted)
    services = yaml_json(deploy / "compose.yaml")["services"].values()
    assert sorted(s["entrypoint"][:-2] for s in services) == sorted(map(shlex.split, wanted))
    for script in scripts:  # each server of the recommendation starts from its script
        assert answers_models(script, tmp_path)["data"]
