"""Host-key verification: known_hosts on by default, `accept-new` only when configured.

asyncssh checks the key against the known_hosts file itself; a key it does not trust reaches
`validate_host_public_key`, where accept-new records a first-seen host and every other case is
refused with a message that says how to fix it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import asyncssh

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


class KeyPolicy:
    def __init__(self, setting: str, host_name: str) -> None:
        self.accept_new = setting == "accept-new"
        self.path = Path(DEFAULT_KNOWN_HOSTS if self.accept_new else setting).expanduser()
        self.host_name = host_name  # the config's name for the host, for the messages
        self.refusal: str | None = None

    def known_hosts_arg(self) -> Any:
        """What asyncssh.connect takes: the file, or an empty trust list when there is none
        (an empty value would make asyncssh fall back to ~/.ssh/known_hosts)."""
        return str(self.path) if self.path.is_file() else ([], [], [])

    def _entries(self, host: str, addr: str, port: int | None) -> list[Any]:
        if not self.path.is_file():
            return []
        return list(asyncssh.read_known_hosts(str(self.path)).match(host, addr, port)[0])

    def validate(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        """Called for a key the file does not trust."""
        port_arg = port if port != 22 else None
        where = f"[{host}]:{port}" if port != 22 else host
        fingerprint = key.get_fingerprint()
        if self._entries(host, addr, port_arg):
            self.refusal = (
                f"host key of {where} (host {self.host_name!r}) has CHANGED (now {fingerprint}); "
                f"if the box was reinstalled, remove the old entry with "
                f"`ssh-keygen -R '{where}' -f {self.path}` and connect again"
            )
            return False
        if self.accept_new:
            self._record(where, key)
            return True
        self.refusal = (
            f"host key of {where} (host {self.host_name!r}) is unknown ({fingerprint}); "
            f"verify it, then add it with `ssh-keyscan -p {port} {host} >> {self.path}`, "
            f'or set known_hosts = "accept-new" for this host'
        )
        return False

    def _record(self, where: str, key: asyncssh.SSHKey) -> None:
        line = f"{where} {key.export_public_key('openssh').decode().strip()}\n"
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


class Client(asyncssh.SSHClient):
    def __init__(self, policy: KeyPolicy) -> None:
        self.policy = policy

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        return self.policy.validate(host, addr, port, key)
