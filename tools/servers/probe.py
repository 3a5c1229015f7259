"""What an engine says about itself before a launch, on the host it runs on: its version (recorded
with every launch and so with every result) and, where the profile says so, the `--help` its
pre-launch flag check reads - asked once per engine version and cached on disk."""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass

from tools.domain.space import Check
from tools.hosts import Host, HostError
from tools.servers.cache_dir import user_cache_dir
from tools.servers.flagcheck import help_check, launch_words, parser_check
from tools.servers.profiles import Engine

UNKNOWN = "unknown"
# vLLM imports torch and its whole CLI first: on a loaded 2-core machine its CPU build took 32 s
# for the version and 55 s for `--help=all` (issue 28), past the 60 s this once was
PROBE_TIMEOUT_S = 240.0

_versions: dict[tuple[str, str, str], str] = {}  # (host, engine, launcher) -> version
_checks: dict[tuple[str, str], Check] = {}  # (engine, launcher) -> the last check probed


@dataclass(frozen=True)
class Facts:
    version: str  # UNKNOWN when the engine cannot say
    check: Check | None  # the pre-launch flag check, None where the engine cannot say


def templates(command: str) -> dict[str, str]:
    """{exe} (the program, with its VAR=value prefix) and {launcher} (the command's words
    before its flags) for a profile's version and help commands."""
    launcher, _ = launch_words(command)
    env = [w for w in launcher if re.match(r"^[A-Za-z_]\w*=", w)]
    exe = launcher[len(env) : len(env) + 1]
    return {"exe": shlex.join([*env, *exe]), "launcher": shlex.join(launcher)}


async def engine_version(host: Host, engine: Engine, command: str) -> str:
    """The engine's version as its profile reads it; UNKNOWN when no command says."""
    words = templates(command)
    key = (host.name, engine.name, words["launcher"])
    if key in _versions:
        return _versions[key]
    pattern = re.compile(engine.profile.version.pattern, re.MULTILINE)
    version = UNKNOWN
    for template in engine.profile.version.commands:
        try:
            res = await host.run(template.format(**words), timeout=PROBE_TIMEOUT_S)
        except HostError:
            break
        found = pattern.search(res.stdout + "\n" + res.stderr)
        if found:
            version = found.group(1).strip()
            break
    _versions[key] = version
    return version


async def flag_check(host: Host, engine: Engine, command: str, version: str) -> Check | None:
    """The profile's pre-launch check for this command's engine; None where it cannot tell."""
    spec = engine.profile.flags
    if spec.check == "python" and spec.parser:
        return parser_check(spec.parser, launch_words(command)[1])
    if spec.check != "help":
        return None
    help_text = await engine_help(host, engine, command, version)
    if not help_text:
        return None
    check = help_check(engine.name, help_text, version)
    _checks[(engine.name, templates(command)["launcher"])] = check
    return check


def known_check(engine: Engine, command: str) -> Check | None:
    """The pre-launch check without I/O, for planners (the autopilot's search space): the
    engine's own parser where the profile names one, else the `--help` check that the last
    start_server of this command probed; None before any launch."""
    spec = engine.profile.flags
    if spec.check == "python" and spec.parser:
        return parser_check(spec.parser, launch_words(command)[1])
    return _checks.get((engine.name, templates(command)["launcher"]))


async def engine_help(host: Host, engine: Engine, command: str, version: str) -> str | None:
    """The engine's --help text: from the cache when this version was asked before."""
    words = templates(command)
    asked = engine.profile.flags.help_command.format(**words)
    path = None
    if version != UNKNOWN:  # an unknown version could be any build: ask every time
        digest = hashlib.sha256(f"{host.name}\0{asked}\0{version}".encode()).hexdigest()[:16]
        path = user_cache_dir() / "engine-help" / f"{engine.name}-{digest}.txt"
        if path.is_file():
            return path.read_text()
    try:
        res = await host.run(asked, timeout=PROBE_TIMEOUT_S)
    except HostError:
        return None
    text = res.stdout + "\n" + res.stderr
    if res.exit_code != 0 or not any(w.startswith("--") for w in text.split()):
        return None  # not a help text: check nothing rather than refuse everything
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError:
            pass  # a read-only cache costs one --help per launch, nothing else
    return text


async def probe(host: Host, engine: Engine, command: str) -> Facts:
    version = await engine_version(host, engine, command)
    return Facts(version, await flag_check(host, engine, command, version))
