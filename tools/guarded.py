"""What the model's shell commands may do, decided once for bash and start_job: the config's and
the supervisor's rules, the run's own pids and ports, the host's sandbox (tools.guard.decide,
tools/hosts/sandbox.py) - and the command line that then runs: as it is, in the sandbox, or not at
all (the refusal names the rule that would allow it)."""

from __future__ import annotations

import dataclasses
import glob
import os
import posixpath
import re
from itertools import islice
from typing import Any

from state.inbox import key_dir
from tools.base import ToolContext, ToolError
from tools.guard import Context, Decision, RuleError, Rules, boundary, decide, paths
from tools.guard.context import BUILTIN, RUN_WRITABLE, Programs
from tools.guard.network import needs_network
from tools.guard.prepare import prepare
from tools.guard.unwrap import name_of, unwrap
from tools.guard.walk import simple_commands
from tools.hosts import Host
from tools.hosts.sandbox import Sandbox
from tools.servers.profiles import ProfileError, engine_for


def rules_of(ctx: ToolContext) -> Rules:
    """The config's [guard] rules, then the supervisor's (`agent allow`, folded from the log)."""
    guard = ctx.config.guard
    extra = list(getattr(ctx.run.state, "guard_allow", []) or [])
    try:
        return Rules.parse(guard.allow, guard.deny).with_allow(extra)
    except RuleError as err:  # the config validated its own; a bad `agent allow` is refused there
        raise ToolError(f"a [guard] rule is invalid: {err}") from None


async def guarded(ctx: ToolContext, host: Host, command: str) -> tuple[Decision, str]:
    """The decision on `command` for this host, and the command line to run (in the sandbox
    when the decision says so)."""
    probed = await host.probed() if ctx.config.guard.sandbox else None
    sandbox = probed.sandbox if probed else None
    why = probed.why if probed else "[guard] sandbox = false in the config"
    workdir = await host.workdir()
    run_dir = str(ctx.run.path.resolve()) if host.is_local else None
    context = Context(
        workdir=workdir,
        run_dir=run_dir,
        home=os.path.expanduser("~") if host.is_local else await host.home(),
        pids=frozenset(_recorded(ctx, "pid") | _recorded(ctx, "pgid")),
        ports=frozenset(_recorded(ctx, "port")),
        read=_read_script if host.is_local else None,
        listdir=_listdir if host.is_local else None,
        public_bind=ctx.config.server.allow_public_bind,
        search_path=_search_path() if host.is_local else None,
        busy=bool(ctx.run.state.jobs),
        engines=engine_programs(ctx),
    )
    decision = decide(command, rules_of(ctx), sandbox is not None, context, why)
    if decision.action == "allow" and decision.writes and not decision.rule:
        escape = await _escapes(host, context, list(decision.writes))
        if escape:
            why_not = f"{escape} leads out of the workdir and the run folder (a symlink)"
            decision = _not_outright(decision, why_not, sandbox, why)
    if decision.action == "allow":  # a link the sandbox let the model make: `k -> ~/.ssh/id_rsa`
        leak = await _reads_secret(host, context, command)
        if leak:
            why_not = f"{leak} leads to a credential or a key (a symlink)"
            decision = _not_outright(decision, why_not, sandbox, why)
    unmasked = sandbox is None and host.is_local and decision.action == "allow"
    if unmasked and decision.rule and runs_code(command, decision.rule):
        # no mask here: the line would run with the run's inbox key and control files
        return Decision("refuse", f"{UNMASKED.format(rule=decision.rule)} ({why})"), command
    if sandbox is None or decision.action == "refuse":
        return decision, command
    # the run folder read-only but for its outputs/ and logs/ (real folders, not links): its
    # control files - events, todos, inbox, results, config, the lock - cannot be written inside
    inner = [f"{run_dir}/{d}" for d in RUN_WRITABLE] if run_dir else []
    inner = [d for d in inner if os.path.isdir(d) and not os.path.islink(d)]
    readonly = [run_dir] if run_dir else []
    hide = [h.identity_file for h in ctx.config.hosts if h.identity_file] if host.is_local else []
    hide += [f"{k}.pub" for k in hide]
    if host.is_local:
        hide.append(str(key_dir()))  # the runs' inbox keys (state/inbox.py): an empty folder
    if decision.action == "allow":
        if decision.rule and host.is_local and runs_code(command, decision.rule):
            # a supervisor's rule may name a program that runs any code (`python3 -c:*`): it
            # runs with the machine as the user has it, but the kernel hides the inbox keys
            # and keeps the run's control files read-only (issue 47)
            return decision, sandbox.mask(command, hide, readonly, inner)
        return decision, command
    # its own network namespace unless the line names the network (tools/guard/network.py)
    network = not sandbox.net or needs_network(command) is not None
    decision = dataclasses.replace(decision, network=network)
    free = _disk(workdir) if host.is_local else None  # the file limit, read here: no fork
    return decision, sandbox.wrap(command, workdir, [workdir], readonly, hide, inner, network, free)


def _disk(path: str) -> tuple[int, int] | None:
    """The free and total bytes of the disk that holds `path` on this machine."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


# programs that run no code of the line's and act on the host's processes (a pid namespace of
# their own would hide them): a supervisor's rule for these alone runs them as it would outright
PROCESS_PROGRAMS = {"kill", "pkill", "killall", "fuser", "pgrep", "ps", "nvidia-smi", "renice"}
PROCESS_PROGRAMS |= {"ionice", "taskset", "lsof", "ss", "true", "echo", "sleep", "wait"}
# a supervisor's rule for code on this machine without a sandbox: refused (issue 47)
UNMASKED = (
    "the supervisor's rule {rule!r} lets this line run code, and this host has no sandbox to "
    "mask it in: it would run with the run's inbox key and control files (a rule for code "
    "applies only where bubblewrap runs; the supervisor can run it at the terminal)"
)
# a rule that makes the line root runs outright (bwrap's no_new_privs would stop sudo): decide()
# allows it only for programs that run no code of the line's, never a destructive command
PRIVILEGED = re.compile(r"(?:Bash\()?(?:sudo|doas|pkexec|run0)\b")


def runs_code(command: str, rule: str) -> bool:
    """Whether a line a supervisor's rule allows runs in the mask (Sandbox.mask): unless the
    rule makes it root, or every program of the line acts on processes and runs no code."""
    if PRIVILEGED.match(rule):
        return False
    try:
        source, literal = prepare(command)
        commands = simple_commands(source, literal)
    except Exception:  # not read: masked
        return True
    heads = [unwrap(list(c.argv), []) for c in commands]
    return not heads or any(not h or not _runs_no_code(h) for h in heads)


def _runs_no_code(argv: list[str]) -> bool:
    """A program of PROCESS_PROGRAMS, or `trap '' SIG...` / `trap - SIG...`: an empty action
    ignores the signals and `-` resets them - only another action is shell text run later."""
    name = name_of(argv[0])
    return name in PROCESS_PROGRAMS or (name == "trap" and len(argv) > 1 and argv[1] in ("", "-"))


def _not_outright(decision: Decision, why: str, sandbox: Sandbox | None, no: str) -> Decision:
    if sandbox is None:
        where = f"this host has no sandbox to run it in ({no})"
        return Decision("refuse", f"{why}; {where}", decision.rule)
    return Decision("sandbox", why, decision.rule)


def refusal(ctx: ToolContext, decision: Decision) -> str:
    allow = (
        f"; if it is really intended, the supervisor can allow it: `agent allow "
        f"{ctx.run.path.name} {decision.rule!r}` (or [guard] allow in agent.toml)"
        if decision.rule
        else ""
    )
    return f"refused by the destructive-command guard: {decision.reason}{allow}"


def engine_programs(ctx: ToolContext) -> Programs:
    """The engines' programs the guard knows: every built-in profile's, and the run's engine's
    where it is a user's profile file (its launchers, programs, kill names and workers)."""
    try:
        profile = engine_for(ctx.config).profile
    except ProfileError:
        return BUILTIN  # start_server says why in one line; the guard knows the built-ins
    return BUILTIN.joined(Programs.of(profile.processes, profile.workers))


def _recorded(ctx: ToolContext, key: str) -> set[int]:
    """Pids, groups or ports of what the run started (servers, jobs), running or ended."""
    state = ctx.run.state
    records: list[dict[str, Any]] = [
        *state.servers.values(),
        *state.launched.values(),
        *state.jobs.values(),
    ]
    return {int(r[key]) for r in records if isinstance(r.get(key), int) and r[key] > 1}


def _read_script(path: str) -> str | None:
    """A script's text on this machine (at most 1 MB, regular files only)."""
    try:
        if os.path.isfile(path) and os.path.getsize(path) <= 1_000_000:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
    except OSError:
        return None
    return None


def _search_path() -> tuple[str, ...] | None:
    """This machine's PATH, where the bash tool's commands look their programs up."""
    path = os.environ.get("PATH")
    return tuple(path.split(":")) if path is not None else None


def _listdir(path: str) -> list[str] | None:
    """A folder's entries on this machine (does the workdir shadow `python -m X`?)."""
    try:
        return os.listdir(path)
    except OSError:
        return None


async def _escapes(host: Host, context: Context, writes: list[str]) -> str | None:
    """The first path written that a symlink takes out of the writable folders, or None."""
    wanted: list[str] = []
    for path in writes:
        full = context.absolute(path)
        if full is None or full.startswith("/dev/"):
            continue
        cut_at = paths.GLOB.search(full)
        wanted.append(posixpath.dirname(full[: cut_at.start()]) if cut_at else full)
    if not wanted:
        return None
    real = await host.realpaths(wanted)
    roots = [r for r in (await host.realpaths(context.roots())) if r]
    for path, target in zip(wanted, real, strict=False):
        if not any(target == r or target.startswith(r.rstrip("/") + "/") for r in roots):
            return path
        if context.control(target):  # into the run's control files, through a link
            return path
    return None


async def _reads_secret(host: Host, context: Context, command: str) -> str | None:
    """The first path the line names whose links lead to a credential or a key, or None. On
    this machine a glob is expanded first (`cat *` over a planted link)."""
    named = boundary.read_paths(command, context)
    if host.is_local:
        expanded: list[str] = []
        for path in named:
            # bounded: `cat /*/*/*/*` must not walk the disk before the decision
            hits = list(islice(glob.iglob(path), 200)) if paths.GLOB.search(path) else [path]
            expanded.extend(hits)
        named = expanded[:400]
    if not named:
        return None
    real = [os.path.realpath(p) for p in named] if host.is_local else await host.realpaths(named)
    for path, target in zip(named, real, strict=False):
        if boundary.secret(target, context):
            return path
    return None
