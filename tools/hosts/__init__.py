"""Hosts: where tools run commands, start servers and read files. `HostPool(config)` is what the
loop puts in `ctx.hosts`; `pool.get(name)` gives a Host (SSH hosts connect lazily, once, and
reconnect after a drop)."""

from __future__ import annotations

from tools.domain.config import Config
from tools.hosts.base import CommandResult, Host, HostError, Proc
from tools.hosts.connect import parse_address
from tools.hosts.local import LocalHost
from tools.hosts.ssh import SSHHost

__all__ = [
    "CommandResult",
    "Host",
    "HostError",
    "HostPool",
    "LocalHost",
    "Proc",
    "SSHHost",
]


class HostPool:
    def __init__(self, config: Config) -> None:
        self.config = config
        self._hosts: dict[str, Host] = {}

    @property
    def default(self) -> str:
        """The host a tool uses when the call names none: the server's."""
        return str(self.config.server.host)

    def names(self) -> list[str]:
        return [h.name for h in self.config.hosts]

    def get(self, name: str | None = None) -> Host:
        name = name or self.default
        host = self._hosts.get(name)
        if host is None:
            configs = {h.name: h for h in self.config.hosts}
            if name not in configs:
                raise HostError(f"unknown host {name!r}; configured hosts: {', '.join(configs)}")
            cfg = configs[name]
            if cfg.address == "local":
                host = LocalHost(cfg)
            else:
                parse_address(cfg.address)  # a bad address fails here, with its own message
                host = SSHHost(cfg)
            self._hosts[name] = host
        return host

    async def close(self) -> None:
        for host in self._hosts.values():
            await host.close()
        self._hosts.clear()
