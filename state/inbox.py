"""Supervisor messages for a live run: file-based, atomic, authenticated, each delivered once.

A sender (`agent say/stop/budget/allow`) writes one file per message into the run's inbox/ with a
unique name, atomically (temp file + rename), signed: `mac` is an HMAC-SHA256 over the file's name
and the message, keyed by the run's inbox key. The loop turns each into an event and only then
deletes the file; the event carries the file's name, so a crash between the two cannot deliver a
message twice (the fold remembers which were delivered) nor lose one.

The key is what makes the inbox the supervisor's channel and not the model's: a model command can
write files (in the workdir, and before issue 47 in the run folder), so a file in inbox/ proves
nothing by itself. The key lives outside the run folder, in a 0700 folder of the user's state
(`$XDG_STATE_HOME/campaign-agent/inbox-keys/`, by default `~/.local/state/...`), one 0600 file per
run named by a digest of the run folder's real path; the bash sandbox mounts an empty folder over
it and the guard never lets a command that names it run outright (tools/guard/boundary.py). A
message without a valid mac, or one that does not validate (an unknown kind, a budget that is not
a positive number, a malformed rule), is refused: moved to inbox/refused/ (never lost) and logged
as an `inbox_refused` event, which `agent watch` shows.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from state.atomic import write_all, write_atomic
from state.numbers import limits_problem
from state.run import Run

KINDS = ("say", "stop", "budget", "allow")
REFUSED = "refused"  # inbox/refused/: what was refused, kept for the supervisor to read
MAX_BYTES = 1_000_000  # a message file larger than this is nobody's message
KEY_BYTES = 32

# the check of an `allow` rule's syntax (the guard's grammar lives above state: the agent passes
# tools.domain.permission_rules through agent.supervision); None: the syntax is not checked here
RuleCheck = Callable[[str], str | None]


class InboxError(Exception):
    """The inbox key cannot be made or read safely; the message is one line for the user."""


# --- the key -------------------------------------------------------------------------------------
def key_dir() -> Path:
    """Where the runs' inbox keys live: outside every run folder, in the user's state."""
    base = os.environ.get("XDG_STATE_HOME", "")
    if not base.startswith("/"):  # the XDG spec: a relative value is ignored
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "campaign-agent" / "inbox-keys"


def key_path(run_path: Path) -> Path:
    digest = hashlib.sha256(os.fsencode(os.path.realpath(run_path))).hexdigest()[:32]
    return key_dir() / f"{digest}.key"


def run_key(run_path: Path) -> bytes:
    """The run's inbox key, made on first use by whichever side comes first (the CLI or the
    run): written to a temp file and linked into place, so both read the same key."""
    folder = key_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise InboxError(f"{folder} is not a folder of this user: the inbox key cannot live there")
    if st.st_mode & 0o077:
        os.chmod(folder, 0o700)
    path = key_path(run_path)
    if not os.path.lexists(path):
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".key.")
        try:
            write_all(fd, secrets.token_bytes(KEY_BYTES).hex().encode())
            os.fsync(fd)
            os.close(fd)
            with contextlib.suppress(FileExistsError):  # the other side made it first: theirs
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as err:
        raise InboxError(f"the inbox key {path} cannot be read: {err.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise InboxError(f"the inbox key {path} is not a private file of this user")
        text = os.read(fd, 4 * KEY_BYTES).decode("ascii", errors="replace").strip()
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise InboxError(f"the inbox key {path} is damaged: delete it and send again")
    return key


def signature(key: bytes, name: str, message: dict[str, Any]) -> str:
    """The message's MAC under the run's key, bound to its file name (what `send` writes)."""
    body = {k: v for k, v in message.items() if k != "mac"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hmac.new(key, f"{name}\n{canonical}".encode(), hashlib.sha256).hexdigest()


# --- sending -------------------------------------------------------------------------------------
def send(run_path: Path, kind: str, **body: Any) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown inbox message kind {kind!r}")
    message = {"kind": kind, **body}
    why = problem(message)
    if why:
        raise ValueError(why)
    inbox = run_path / "inbox"
    inbox.mkdir(mode=0o700, exist_ok=True)  # the run folder's: its owner's only
    name = f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(3)}.json"
    message["mac"] = signature(run_key(run_path), name, message)
    write_atomic(inbox / name, json.dumps(message).encode())
    return name


# --- receiving -----------------------------------------------------------------------------------
def problem(message: Any, rule_check: RuleCheck | None = None) -> str | None:
    """Why `message` is not one `agent say/stop/budget/allow` writes, or None."""
    if not isinstance(message, dict):
        return "not a JSON object"
    kind = message.get("kind")
    extra = set(message) - {"kind", "mac", "text", "limits", "rule"}
    if kind not in KINDS:
        return f"unknown kind {str(kind)[:40]!r}"
    if extra:
        return f"unknown fields {sorted(extra)[:3]}"
    if kind == "say":
        text = message.get("text")
        if not isinstance(text, str) or not text.strip():
            return "a say message without text"
    elif kind == "budget":
        return _limits_problem(message.get("limits"))
    elif kind == "allow":
        rule = message.get("rule")
        if not isinstance(rule, str) or not rule.strip() or "\n" in rule or len(rule) > 1000:
            return "an allow message without a one-line rule"
        if rule_check is not None:
            return rule_check(rule)
    return None


def _limits_problem(limits: Any) -> str | None:
    """The limits `agent budget` sends (those not given are null), within the bounds agent.toml's
    budget has and the fold checks (state/numbers.py): a signed budget of 100000 minutes is none."""
    if not isinstance(limits, dict) or not limits:
        return "a budget message without limits"
    given = {k: v for k, v in limits.items() if v is not None}
    if not given:
        return "a budget message that raises no limit"
    return limits_problem(given)


def _read(path: Path) -> dict[str, Any] | str:
    """The message in `path`, or why it is refused (a link, not a file, too big, not JSON)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        return "a symbolic link" if os.path.islink(path) else f"unreadable ({err.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if st.st_size > MAX_BYTES:
            return f"{st.st_size} bytes, more than a message holds"
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        message = json.loads(data)
    except ValueError:
        return "not JSON"
    return message if isinstance(message, dict) else "not a JSON object"


def verdict(
    run_path: Path, path: Path, key: bytes | None, rule_check: RuleCheck | None = None
) -> dict[str, Any] | str:
    """The message in `path` if the `agent` CLI wrote it (a valid mac) and it validates, else
    the reason it is refused."""
    message = _read(path)
    if isinstance(message, str):
        return message
    mac = message.get("mac")
    if key is None:
        return "the run's inbox key cannot be read"
    if not isinstance(mac, str) or not hmac.compare_digest(mac, signature(key, path.name, message)):
        return "not written by the agent CLI (no valid signature)"
    why = problem(message, rule_check)
    return why if why else message


def _key_or_none(run_path: Path) -> bytes | None:
    try:
        return run_key(run_path)
    except (InboxError, OSError):
        return None


def waiting(run_path: Path, delivered: set[str]) -> list[dict[str, Any]]:
    """The authentic messages not delivered yet, oldest first, left in place (the loop looks for
    a stop while a tool call runs; it delivers them before the next model call)."""
    inbox = run_path / "inbox"
    paths = sorted(inbox.glob("*.json")) if inbox.is_dir() else []
    paths = [p for p in paths if p.name not in delivered]
    if not paths:
        return []
    key = _key_or_none(run_path)
    out = []
    for path in paths:
        message = verdict(run_path, path, key)
        if isinstance(message, dict):
            out.append(message)
    return out


def drain(run: Run, rule_check: RuleCheck | None = None) -> int:
    """Turn waiting messages into events, oldest first; returns how many were delivered. One
    that is refused is logged as `inbox_refused` and moved to inbox/refused/."""
    inbox = run.path / "inbox"
    delivered = 0
    paths = sorted(inbox.glob("*.json")) if inbox.is_dir() else []
    key = _key_or_none(run.path) if paths else None
    for path in paths:
        if path.name not in run.state.inbox_done:
            message = verdict(run.path, path, key, rule_check)
            if isinstance(message, str):
                _refuse(run, path, message)
                continue
            _deliver(run, path.name, message)
            delivered += 1
        path.unlink(missing_ok=True)
    return delivered


def _refuse(run: Run, path: Path, reason: str) -> None:
    """Log a refused file, then move it aside: a crash between the two logs it again on the next
    drain (twice rather than never), and the file is never deleted."""
    aside = run.path / "inbox" / REFUSED
    target = aside / path.name
    n = 1
    while os.path.lexists(target):
        target, n = aside / f"{path.name}.{n}", n + 1
    run.append("inbox_refused", inbox_id=path.name, reason=reason, moved_to=_rel(run, target))
    aside.mkdir(mode=0o700, exist_ok=True)
    with contextlib.suppress(OSError):  # gone already, or not writable: refused again next time
        os.rename(path, target)


def _rel(run: Run, path: Path) -> str:
    return str(path.relative_to(run.path))


def _deliver(run: Run, inbox_id: str, message: dict[str, Any]) -> None:
    kind = message.get("kind")
    if kind == "say":
        run.append("supervisor_message", text=str(message.get("text", "")), inbox_id=inbox_id)
    elif kind == "stop":
        run.append("stop_requested", inbox_id=inbox_id)
    elif kind == "allow":  # a bash rule (validated by `agent allow`): the bash tool reads the fold
        run.append("guard_allowed", rule=str(message.get("rule", "")), inbox_id=inbox_id)
    elif kind == "budget":
        limits = {k: v for k, v in (message.get("limits") or {}).items() if v is not None}
        run.append("limits_changed", limits=limits, inbox_id=inbox_id)
