"""The winner as files, not only a command: deploy/ in the run folder holds a launch script per
server, a docker-compose file and a Kubernetes Deployment + Service per server, and a README
(docs/report.md, "Deploying the winner"). A concurrency policy is one server per range - each its
own launch script, compose service and Deployment - and the routing rule in the README.

The YAML files are written as JSON (JSON is YAML), so that no YAML library is needed to write or
read them back; a `#` comment at their top says what they are. The image is the engine profile's
(tools/servers/profiles/*.toml `image`); an engine without one (the lab's simulator) gets a
placeholder that says so."""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.report.figures import Figures
from agent.report.outcome import policy_servers, routing_rule
from agent.report.render import Block, Heading, Links, Para
from state.atomic import write_atomic
from tools.domain.gpus import gpus_of
from tools.servers.profiles import Engine, recorded_engine

FOLDER = "deploy"
PLACEHOLDER_IMAGE = "example.invalid/set-your-image:latest"


@dataclass
class Server:
    """One server to deploy: its launch command as recommended, split into words."""

    name: str  # a DNS-1123 name for compose and Kubernetes
    label: str  # the configuration's name in the report
    span: str  # "" for a single server, else the range of requests in flight it serves
    argv: list[str]
    port: int
    gpus: int


@dataclass
class Plan:
    servers: list[Server]
    engine: Engine
    image: str  # the profile's, else PLACEHOLDER_IMAGE
    ready_timeout_s: int
    routing: str  # "" for a single server
    run_id: str

    def script(self, s: Server) -> str:
        return "launch.sh" if len(self.servers) == 1 else f"launch-{s.name}.sh"

    def files(self) -> list[str]:
        return [*(self.script(s) for s in self.servers), "compose.yaml", "kubernetes.yaml"]


def plan(f: Figures) -> Plan | None:
    """What to write: the servers the report's conclusion says to deploy (None: nothing)."""
    if f.winner is None:
        return None
    server_cfg = f.m.state.config.get("server") or {}
    engine = recorded_engine(server_cfg)  # its readiness path, image and GPU count
    port_flag = engine.port_flag
    default_port = int(server_cfg.get("port") or 0)
    pairs: list[tuple[str, str, str]] = []  # (label, span, command)
    policy = policy_servers(f)
    if policy:
        pairs = [(p.name, p.span, p.command) for p in policy]
    else:
        stated = f.m.recommendation.command if f.m.recommendation is not None else ""
        pairs = [(f.winner.name, "", stated or f.m.command_of(f.winner))]
    servers = []
    for i, (label, span, command) in enumerate(pairs):
        if not command:
            return None  # no launch recorded: nothing runnable to write
        argv = shlex.split(command)
        port = _flag_value(argv, port_flag)
        name = _dns(label) if len(pairs) == 1 else _dns(f"{label}-{i + 1}")
        servers.append(
            Server(
                name=name,
                label=label,
                span=span,
                argv=argv,
                port=int(port) if port and port.isdigit() else default_port + i,
                gpus=gpus_of(_flags_of(argv), engine.profile.parallelism),
            )
        )
    return Plan(
        servers=servers,
        engine=engine,
        image=engine.profile.image or PLACEHOLDER_IMAGE,
        ready_timeout_s=int(server_cfg.get("ready_timeout_s") or 600),
        routing=routing_rule(policy) if policy else "",
        run_id=f.m.state.run_id or f.m.run_path.name,
    )


def write(f: Figures, out_dir: Path) -> list[Path]:
    """Write deploy/ under out_dir; returns the paths written ([] when nothing is deployed)."""
    p = plan(f)
    if p is None:
        return []
    folder = out_dir / FOLDER
    folder.mkdir(mode=0o700, exist_ok=True)  # private like the run folder
    texts = {p.script(s): launch_script(p, s) for s in p.servers}
    texts |= {"compose.yaml": compose(p), "kubernetes.yaml": kubernetes(p), "README.md": readme(p)}
    written = []
    for name, text in texts.items():
        write_atomic(folder / name, text.encode())
        written.append(folder / name)
    for s in p.servers:
        (folder / p.script(s)).chmod(0o700)  # the run folder is private (0600); scripts run
    return written


def section(f: Figures) -> list[Block]:
    """The report's links to the files (written beside it by render_files)."""
    p = plan(f)
    if p is None:
        return []
    what = {"compose.yaml": "docker compose", "kubernetes.yaml": "Kubernetes Deployment + Service"}
    links = [
        (f"{FOLDER}/{p.script(s)}", f"launches {s.label}" + (f", for {s.span}" if s.span else ""))
        for s in p.servers
    ]
    links += [(f"{FOLDER}/{n}", what[n]) for n in ("compose.yaml", "kubernetes.yaml")]
    links.append((f"{FOLDER}/README.md", "how to use them" + (" and route" if p.routing else "")))
    out: list[Block] = [Heading(2, "Deploy files"), Links(links)]
    if p.image == PLACEHOLDER_IMAGE:
        out.append(
            Para(
                f"The {p.engine.name} engine profile names no container image: the compose and "
                "Kubernetes files carry a placeholder image to replace."
            )
        )
    return out


# --- the files ------------------------------------------------------------------------------------
def launch_script(p: Plan, s: Server) -> str:
    words = [shlex.quote(w) for w in s.argv]
    i = _flag_index(s.argv, p.engine.port_flag)
    if i is None:
        words += [p.engine.port_flag, f'"${{PORT:-{s.port}}}"']
    else:
        words[i + 1] = f'"${{PORT:-{s.port}}}"'
    serves = f", the server for {s.span} of a concurrency policy (routing: README.md)"
    serves = serves if s.span else ""
    return "\n".join(
        [
            "#!/usr/bin/env bash",
            f"# {s.label}{serves}: the command run {p.run_id} recommends.",
            f"# PORT=N overrides its port ({s.port}). Written by campaign-agent (docs/report.md).",
            "set -euo pipefail",
            "exec " + " ".join(words),
            "",
        ]
    )


def container_argv(p: Plan, s: Server) -> list[str]:
    """The command inside a container: it must listen on the container's interface, not only on
    loopback (SGLang's default), unless the command already says where."""
    argv = list(s.argv)
    if _flag_index(argv, "--host") is None:
        argv += ["--host", "0.0.0.0"]
    return argv


def _header(p: Plan, what: str) -> str:
    lines = [f"# {what} for run {p.run_id} (campaign-agent, docs/report.md). JSON is YAML."]
    if p.image == PLACEHOLDER_IMAGE:
        lines.append(
            f"# {PLACEHOLDER_IMAGE} is a placeholder: the {p.engine.name} engine profile names no "
            "image; set one that holds the engine and the command's files."
        )
    if p.routing:
        lines.append(f"# Routing: {p.routing}")
    return "\n".join(lines) + "\n"


def compose(p: Plan) -> str:
    services = {}
    for s in p.servers:
        url = f"http://127.0.0.1:{s.port}{p.engine.health_path}"
        services[s.name] = {
            "image": p.image,
            "entrypoint": container_argv(p, s),
            "ports": [f"{s.port}:{s.port}"],
            "ipc": "host",  # tensor parallelism shares memory between the GPU processes
            "healthcheck": {
                "test": ["CMD", "curl", "-fsS", url],
                "interval": "10s",
                "timeout": "5s",
                "retries": 3,
                "start_period": f"{p.ready_timeout_s}s",
            },
            "deploy": {
                "resources": {
                    "reservations": {
                        "devices": [{"driver": "nvidia", "count": s.gpus, "capabilities": ["gpu"]}]
                    }
                }
            },
            "restart": "unless-stopped",
        }
    return _header(p, "docker compose services") + json.dumps({"services": services}, indent=2)


def kubernetes(p: Plan) -> str:
    items: list[dict[str, Any]] = []
    for s in p.servers:
        labels = {"app": s.name}
        probe = {"httpGet": {"path": p.engine.health_path, "port": s.port}}
        container = {
            "name": "server",
            "image": p.image,
            "command": container_argv(p, s),
            "ports": [{"containerPort": s.port, "name": "http"}],
            "resources": {"limits": {"nvidia.com/gpu": s.gpus}},
            # a slow start (loading the model) is the startup probe's, not a failed liveness
            "startupProbe": {
                **probe,
                "periodSeconds": 10,
                "failureThreshold": max(1, math.ceil(p.ready_timeout_s / 10)),
            },
            "readinessProbe": {**probe, "periodSeconds": 5, "failureThreshold": 3},
            "livenessProbe": {**probe, "periodSeconds": 15, "failureThreshold": 4},
            "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
        }
        items.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": s.name, "labels": labels},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "containers": [container],
                            "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}],
                        },
                    },
                },
            }
        )
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": s.name, "labels": labels},
                "spec": {
                    "selector": labels,
                    "ports": [{"name": "http", "port": s.port, "targetPort": s.port}],
                },
            }
        )
    doc = {"apiVersion": "v1", "kind": "List", "items": items}
    return _header(p, "Kubernetes Deployments and Services") + json.dumps(doc, indent=2)


def readme(p: Plan) -> str:
    lines = [f"# Deploying what run {p.run_id} recommends", ""]
    if p.routing:
        lines += [
            f"A concurrency policy: {len(p.servers)} servers, one per range of requests in flight.",
            "",
            f"Routing: {p.routing}",
            "",
        ]
    for s in p.servers:
        where = f"serves {s.span}, " if s.span else ""
        lines.append(
            f"- `{p.script(s)}`: {s.label} ({where}port {s.port}, {s.gpus} GPU"
            f"{'s' if s.gpus > 1 else ''}); `PORT=N` overrides the port"
        )
    lines += [
        f"- `compose.yaml`: `docker compose -f compose.yaml up`, image `{p.image}`",
        "- `kubernetes.yaml`: `kubectl apply -f kubernetes.yaml`, a Deployment and a Service each",
        "",
        f"Readiness: `{p.engine.health_path}` (the {p.engine.name} engine profile) - the compose",
        "healthcheck and the Kubernetes probes poll it. The container command is the recommended",
        "one with `--host 0.0.0.0` where it names no host; the paths in it (the engine, the model)",
        "are the tuning host's: the image, or a volume, must hold them.",
    ]
    files = _named_files(p)
    if files:
        named = ", ".join(f"`{flag} {path}`" for flag, path in files)
        lines += [
            "",
            f"Files its flags name, which the engine reads at start ({named}): the tuning host's",
            "too - copy them into the image or a volume at the same path.",
        ]
    if p.image == PLACEHOLDER_IMAGE:
        lines += ["", f"`{PLACEHOLDER_IMAGE}` is a placeholder: the engine profile names no image."]
    return "\n".join(lines) + "\n"


def _named_files(p: Plan) -> list[tuple[str, str]]:
    """(flag, path) of every server's flags whose value is a file (the profile's `file_flags`:
    TensorRT-LLM's --extra_llm_api_options), each once."""
    out: list[tuple[str, str]] = []
    for s in p.servers:
        for flag in p.engine.profile.file_flags:
            inline = [w.partition("=")[2] for w in s.argv if w.startswith(flag + "=")]
            for path in [_flag_value(s.argv, flag), *inline]:
                if path and (flag, path) not in out:
                    out.append((flag, path))
    return out


# --- helpers --------------------------------------------------------------------------------------
def _flag_index(argv: list[str], flag: str) -> int | None:
    """Where `flag VALUE` is in argv (None: absent, or with no value after it)."""
    for i, w in enumerate(argv[:-1]):
        if w == flag:
            return i
    return None


def _flag_value(argv: list[str], flag: str) -> str | None:
    i = _flag_index(argv, flag)
    return None if i is None else argv[i + 1]


def _flags_of(argv: list[str]) -> dict[str, str]:
    """`--flag value` pairs of a command (the parallel sizes gpus_of reads)."""
    return {w: argv[i + 1] for i, w in enumerate(argv[:-1]) if w.startswith("-")}


def _dns(text: str) -> str:
    """A name compose and Kubernetes accept (DNS-1123: lowercase letters, digits, '-')."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:50].strip("-")
    return name if name[:1].isalpha() else f"server-{name}".rstrip("-")
